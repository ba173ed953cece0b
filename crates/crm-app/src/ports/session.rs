//! Console sessions and failed sign-ins (decisions §21, §24). A session id is stored as its
//! SHA-256 only; a session belongs to one user and works in one mode at a time.

use async_trait::async_trait;
use crm_domain::{Mode, Timestamp, UserId, WorkspaceId};

use super::StoreError;

/// A console session as stored.
#[derive(Clone, PartialEq)]
pub struct Session {
    /// Hex SHA-256 of the id the session cookie carries.
    pub id_hash: String,
    pub user_id: UserId,
    pub workspace_id: WorkspaceId,
    /// The mode the session works in; switched in the page header.
    pub mode: Mode,
    /// The token every state-changing console request carries (decisions §24). Not a credential
    /// alone: it is checked only beside the session cookie it belongs to.
    pub csrf_token: String,
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("user_id", &self.user_id)
            .field("mode", &self.mode)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

#[async_trait]
pub trait SessionRepo {
    async fn insert_session(&mut self, session: &Session) -> Result<(), StoreError>;
    /// The session whose id has this hash, however old.
    async fn get_session(&mut self, id_hash: &str) -> Result<Option<Session>, StoreError>;
    /// Sets `last_seen_at`; answers whether the session exists.
    async fn touch_session(&mut self, id_hash: &str, at: Timestamp) -> Result<bool, StoreError>;
    /// Sets the session's mode; answers whether the session exists.
    async fn set_session_mode(&mut self, id_hash: &str, mode: Mode) -> Result<bool, StoreError>;
    /// Deletes one session (sign-out); answers whether it existed.
    async fn delete_session(&mut self, id_hash: &str) -> Result<bool, StoreError>;
    /// Deletes every session of the user (password or role change); answers how many.
    async fn delete_user_sessions(&mut self, user_id: &UserId) -> Result<u64, StoreError>;
    /// Deletes the sessions created before `before` (they have ended); answers how many.
    async fn delete_sessions_created_before(
        &mut self,
        before: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Records one failed sign-in for the (normalised) email from the client address.
    async fn record_sign_in_failure(
        &mut self,
        email: &str,
        address: &str,
        at: Timestamp,
    ) -> Result<(), StoreError>;
    /// Forgets the failure recorded for `email` from `address` at `at` (an attempt counted before
    /// its password was checked, which proved right).
    async fn delete_sign_in_failure(
        &mut self,
        email: &str,
        address: &str,
        at: Timestamp,
    ) -> Result<(), StoreError>;
    /// Failed sign-ins for `email` at or after `since`: from `address` only when it is given,
    /// else from every address.
    async fn count_sign_in_failures(
        &mut self,
        email: &str,
        address: Option<&str>,
        since: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Forgets the failures before `before` (older than any throttling window).
    async fn delete_sign_in_failures_before(
        &mut self,
        before: Timestamp,
    ) -> Result<u64, StoreError>;
}
