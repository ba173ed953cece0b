//! Workspaces and their API keys as the store keeps them.

use async_trait::async_trait;
use crm_domain::{ApiKeyId, Tenant, WorkspaceId};

use super::StoreError;
use crate::identity::{ApiKeyRecord, Workspace};

#[async_trait]
pub trait WorkspaceRepo {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError>;
    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError>;
    /// Whether any workspace exists (first-start bootstrap).
    async fn has_workspaces(&mut self) -> Result<bool, StoreError>;
    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError>;
    /// The key with this SHA-256 hash, revoked or not, with its workspace.
    async fn find_api_key(
        &mut self,
        hash: &str,
    ) -> Result<Option<(ApiKeyRecord, Workspace)>, StoreError>;
    async fn get_api_key(
        &mut self,
        tenant: &Tenant,
        id: &ApiKeyId,
    ) -> Result<Option<ApiKeyRecord>, StoreError>;
}
