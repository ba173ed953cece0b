//! Users (decisions §21, §24) and their one-time sign-in links. Users belong to a workspace, not
//! to a mode; an email is unique across the installation, so sign-in needs no workspace.

use async_trait::async_trait;
use crm_domain::{Email, Timestamp, User, UserId, WorkspaceId};

use super::{Slice, StoreError};

/// A one-time sign-in link as stored: the SHA-256 of its token, never the token.
#[derive(Clone, PartialEq)]
pub struct SignInLink {
    /// Hex SHA-256 of the token the link carries.
    pub token_hash: String,
    pub user_id: UserId,
    pub workspace_id: WorkspaceId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

impl std::fmt::Debug for SignInLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInLink")
            .field("user_id", &self.user_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

#[async_trait]
pub trait UserRepo {
    /// Inserts a new user; `Duplicate` when its email (or id) is taken anywhere in the
    /// installation, leaving the transaction usable.
    async fn insert_user(&mut self, user: &User) -> Result<(), StoreError>;
    /// The workspace's user `id`.
    async fn get_user(
        &mut self,
        workspace: &WorkspaceId,
        id: &UserId,
    ) -> Result<Option<User>, StoreError>;
    /// The user with this (normalised) email, in any workspace.
    async fn find_user_by_email(&mut self, email: &Email) -> Result<Option<User>, StoreError>;
    /// The workspace's users, newest first.
    async fn list_users(
        &mut self,
        workspace: &WorkspaceId,
        slice: &Slice,
    ) -> Result<Vec<User>, StoreError>;
    /// Writes every member of `user` but `id`, `workspace_id` and `created_at`; `Duplicate` when
    /// the new email is another user's. Answers whether the user exists.
    async fn update_user(&mut self, user: &User) -> Result<bool, StoreError>;
    /// Deletes the user with its sign-in links and sessions; answers whether it existed.
    async fn delete_user(
        &mut self,
        workspace: &WorkspaceId,
        id: &UserId,
    ) -> Result<bool, StoreError>;
    /// Stamps a sign-in on the user (`last_login_at` alone, so that a change committed since the
    /// user was read is kept) and answers the user as it is now, locked until the transaction
    /// ends (Postgres); `None` when it is gone.
    async fn record_login(
        &mut self,
        workspace: &WorkspaceId,
        id: &UserId,
        at: Timestamp,
    ) -> Result<Option<User>, StoreError>;
    /// How many admins the workspace has, locking them (Postgres) so that two demotions cannot
    /// both see the other admin.
    async fn count_admins(&mut self, workspace: &WorkspaceId) -> Result<u64, StoreError>;
    /// Stores a new link, dropping the user's older ones: only the newest link works.
    async fn replace_sign_in_link(&mut self, link: &SignInLink) -> Result<(), StoreError>;
    /// The link whose token has this hash, expired or not.
    async fn get_sign_in_link(
        &mut self,
        token_hash: &str,
    ) -> Result<Option<SignInLink>, StoreError>;
    /// Deletes the link whose token has this hash; answers whether it was there (so that of two
    /// concurrent uses only one succeeds).
    async fn delete_sign_in_link(&mut self, token_hash: &str) -> Result<bool, StoreError>;
}
