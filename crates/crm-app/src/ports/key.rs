//! API keys: listing, revoking and rolling, and the batched `last_used_at`.

use async_trait::async_trait;
use crm_domain::{ApiKeyId, Tenant, Timestamp};

use super::{Slice, StoreError};
use crate::identity::ApiKeyRecord;

#[async_trait]
pub trait KeyRepo {
    /// The tenant's keys (revoked and expired ones too), newest first.
    async fn list_api_keys(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<ApiKeyRecord>, StoreError>;
    /// Writes `revoked_at` and `expires_at` of the key `key.id` in `key`'s tenant; returns whether
    /// the key exists.
    async fn update_api_key_state(&mut self, key: &ApiKeyRecord) -> Result<bool, StoreError>;
    /// Writes `name` of the key `key.id` in `key`'s tenant; returns whether the key exists.
    async fn rename_api_key(&mut self, key: &ApiKeyRecord) -> Result<bool, StoreError>;
    /// Raises each key's `last_used_at` to the instant given, never lowering it (touches from
    /// several processes may arrive out of order). Keys that do not exist are skipped.
    async fn touch_api_keys(&mut self, uses: &[KeyUse]) -> Result<(), StoreError>;
}

/// A key seen in use at an instant (batched `last_used_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyUse {
    pub tenant: Tenant,
    pub id: ApiKeyId,
    pub at: Timestamp,
}
