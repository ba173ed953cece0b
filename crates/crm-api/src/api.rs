//! The API value every transport holds: the application, and what rendering a problem needs.
//! Its methods that run operations live in [`crate::call`].

use crm_app::{App, Caller};
use serde_json::Value;

use crate::problem::Problem;

/// The application plus what rendering needs (the public URL, for problem `type`s).
///
/// The application is private to this crate: a transport runs an operation only through
/// [`Api::call`], so it cannot authenticate, admit or dispatch by other means.
#[derive(Clone)]
pub struct Api {
    pub(crate) app: App,
    /// `<public_url>/errors`.
    pub errors_base_url: String,
}

impl Api {
    pub fn new(app: App, public_url: &str) -> Api {
        Api {
            app,
            errors_base_url: format!("{}/errors", public_url.trim_end_matches('/')),
        }
    }

    /// The URL clients reach this server at (without a trailing slash).
    pub fn public_url(&self) -> &str {
        self.errors_base_url
            .strip_suffix("/errors")
            .unwrap_or(&self.errors_base_url)
    }

    pub fn problem_json(&self, p: &Problem) -> Value {
        p.to_json(&self.errors_base_url)
    }

    /// The caller an `Authorization` header value names (`None`: the header is absent). For the
    /// agent transports, whose every message (a tool list as much as a tool call) needs a valid
    /// key before its framing is read; they hand the caller to [`Api::call`] as
    /// [`crate::Credentials::Caller`]. REST hands the header itself to [`Api::call`].
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, Problem> {
        Ok(self.app.authenticate(authorization).await?)
    }

    /// Whether the database answers (`/readyz`).
    pub async fn ready(&self) -> Result<(), crm_app::AppError> {
        self.app.ready().await
    }

    /// A new random id, for what a transport keeps of its own (A2A tasks and messages).
    pub fn new_uuid(&self) -> String {
        self.app.ids.new_uuid().to_string()
    }

    /// The clock's reading as RFC 3339 text, for what a transport stamps (A2A tasks).
    pub fn now(&self) -> String {
        self.app.clock.now().to_string()
    }
}
