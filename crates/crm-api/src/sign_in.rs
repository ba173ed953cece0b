//! The console's sign-in, on the API value: sessions are not operations of the catalog (no key
//! calls them), but a transport still reaches the application only through [`Api`].

use crm_app::sessions::{ConsoleSession, NewSession};
use crm_domain::{Mode, User};

use crate::{problem::Problem, Api};

impl Api {
    /// Signs a user in with email and password from client `address` (decisions §21, §24).
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        address: &str,
    ) -> Result<NewSession, Problem> {
        Ok(self.app.sign_in(email, password, address).await?)
    }

    /// The live session a cookie names; `None` when it is unknown, ended or revoked.
    pub async fn console_session(&self, id: &str) -> Result<Option<ConsoleSession>, Problem> {
        Ok(self.app.console_session(id).await?)
    }

    pub async fn sign_out(&self, session: &ConsoleSession) -> Result<(), Problem> {
        Ok(self.app.sign_out(session).await?)
    }

    pub async fn switch_mode(&self, session: &ConsoleSession, mode: Mode) -> Result<(), Problem> {
        Ok(self.app.switch_mode(session, mode).await?)
    }

    /// The user a working sign-in link is for.
    pub async fn sign_in_link_user(&self, token: &str) -> Result<User, Problem> {
        Ok(self.app.sign_in_link_user(token).await?)
    }

    /// Uses a sign-in link: sets the password and opens a session.
    pub async fn set_password_with_link(
        &self,
        token: &str,
        password: &str,
    ) -> Result<NewSession, Problem> {
        Ok(self.app.set_password_with_link(token, password).await?)
    }

    /// A signed-in user's new password, given the current one; ends the user's other sessions.
    pub async fn change_password(
        &self,
        session: &ConsoleSession,
        current: &str,
        new: &str,
    ) -> Result<NewSession, Problem> {
        Ok(self.app.change_password(session, current, new).await?)
    }
}
