//! Every record belongs to one workspace and one mode; together they are the tenant that scopes
//! every query and every uniqueness rule.

use crate::ids::WorkspaceId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Test,
    Live,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Test => "test",
            Mode::Live => "live",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "test" => Some(Mode::Test),
            "live" => Some(Mode::Live),
            _ => None,
        }
    }

    /// The prefix of API keys of this mode.
    pub fn key_prefix(self) -> &'static str {
        match self {
            Mode::Test => "svc_test_",
            Mode::Live => "svc_live_",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant {
    pub workspace_id: WorkspaceId,
    pub mode: Mode,
}
