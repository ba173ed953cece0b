//! User bodies (decisions §21). A user's password, or its hash, is never part of one.

use crm_app::users::WithLink;
use crm_domain::User;
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts};

/// A user: a person of the workspace who signs in to the console.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "User")]
pub struct UserBody {
    /// `usr_` prefix.
    pub id: String,
    /// Always `user`.
    pub object: &'static str,
    /// Unique across the installation; what the user signs in with.
    pub email: String,
    pub name: String,
    /// `admin` (every scope), `member` (all but keys, settings, connections, users, audit and
    /// erase) or `viewer` (every `:read` but the audit log).
    pub role: &'static str,
    pub created_at: String,
    pub last_login_at: Option<String>,
}

impl From<&User> for UserBody {
    fn from(u: &User) -> Self {
        UserBody {
            id: u.id.as_str().to_owned(),
            object: "user",
            email: u.email.as_str().to_owned(),
            name: u.name.clone(),
            role: u.role.as_str(),
            created_at: ts(u.created_at),
            last_login_at: opt_ts(u.last_login_at),
        }
    }
}

/// A one-time sign-in link: shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "SignInLink")]
pub struct SignInLinkBody {
    /// Opens the console's set-password page; works once, until `expires_at`.
    pub url: String,
    pub expires_at: String,
}

/// A user just created, or given a new sign-in link.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "UserWithSignInLink")]
pub struct UserWithLinkBody {
    #[serde(flatten)]
    pub user: UserBody,
    pub sign_in_link: SignInLinkBody,
}

impl UserWithLinkBody {
    /// The body of `new`, its link under `public_url`; `None` when it has no link.
    pub fn of(new: &WithLink, public_url: &str) -> Option<UserWithLinkBody> {
        let (token, expires_at) = (new.token.as_ref()?, new.expires_at?);
        Some(UserWithLinkBody {
            user: (&new.user).into(),
            sign_in_link: SignInLinkBody {
                url: sign_in_url(public_url, token),
                expires_at: ts(expires_at),
            },
        })
    }
}

/// The console page a sign-in link opens: built from the configured public URL, never from a
/// request's `Host` (decisions §24).
pub fn sign_in_url(public_url: &str, token: &str) -> String {
    format!("{}/sign-in/{token}", public_url.trim_end_matches('/'))
}
