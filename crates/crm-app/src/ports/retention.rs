//! Retention (decisions §25): what the daily job reads and deletes.

use async_trait::async_trait;
use crm_domain::{Timestamp, WorkspaceId};

use super::StoreError;

/// A workspace's retention settings (days; `None`: kept forever).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    pub workspace_id: WorkspaceId,
    pub history_days: Option<u32>,
    pub email_days: Option<u32>,
}

#[async_trait]
pub trait RetentionRepo {
    /// Every workspace with at least one retention setting.
    async fn retention_settings(&mut self) -> Result<Vec<RetentionSettings>, StoreError>;
    /// Deletes the workspace's history entries (both modes) written before `before`; answers
    /// how many.
    async fn delete_changes_before(
        &mut self,
        workspace: &WorkspaceId,
        before: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Deletes the workspace's emails (both modes) created before `before` that are no longer
    /// waiting to be sent; answers how many.
    async fn delete_emails_before(
        &mut self,
        workspace: &WorkspaceId,
        before: Timestamp,
    ) -> Result<u64, StoreError>;
}
