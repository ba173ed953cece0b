//! What every signed-in page shows around its content: who is signed in, the mode (test mode
//! is marked on every page), the navigation, global search, quick create, and the forms that
//! switch mode and sign out, each with the session's CSRF token.

use crm_app::Scope;
use crm_domain::Mode;

use crate::{pages::Kind, session::Signed};

pub struct Chrome {
    pub user_name: String,
    pub role: &'static str,
    pub test_mode: bool,
    pub csrf: String,
    /// The navigation entry of the page: `board`, `contacts`, ...
    pub here: &'static str,
    /// The kinds the user may create (quick create).
    pub creatable: Vec<(&'static str, &'static str)>,
}

impl Chrome {
    pub fn new(signed: &Signed, here: &'static str) -> Chrome {
        let session = &signed.session;
        Chrome {
            user_name: session.user.name.clone(),
            role: session.user.role.as_str(),
            test_mode: session.mode == Mode::Test,
            csrf: session.csrf_token.clone(),
            here,
            creatable: Kind::ALL
                .into_iter()
                .filter(|k| can_write(signed, *k))
                .map(|k| (k.path(), k.object()))
                .collect(),
        }
    }

    /// `aria-current` for the navigation entry `entry`.
    pub fn current(&self, entry: &str) -> &'static str {
        if self.here == entry {
            "page"
        } else {
            "false"
        }
    }
}

/// Whether the user may write records of `kind`: write controls are shown only then.
pub fn can_write(signed: &Signed, kind: Kind) -> bool {
    signed.caller.scopes.allows(Scope::write(kind.path()))
}
