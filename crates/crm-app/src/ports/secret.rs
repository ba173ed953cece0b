//! Raw access to the stored secrets, for the operator's steps of `crate::secrets`.

use async_trait::async_trait;
use crm_domain::Tenant;

use super::StoreError;

/// One stored secret as the database holds it (sealed, or plaintext before the first start
/// with keys).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret {
    pub table: &'static str,
    pub tenant: Tenant,
    pub id: String,
    pub value: String,
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSecret")
            .field("table", &self.table)
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// Raw access to the stored secrets and the check value, bypassing the row layer's sealing:
/// for `crate::secrets::prepare_secrets` and `crate::secrets::rotate_secrets` only.
#[async_trait]
pub trait SecretRepo {
    /// The sealed check value, if one was stored.
    async fn secret_check(&mut self) -> Result<Option<String>, StoreError>;
    /// Stores the check value unless one exists; true when this call stored it. Concurrent
    /// callers serialise: the second waits for the first to commit, then stores nothing.
    async fn claim_secret_check(&mut self, sealed: &str) -> Result<bool, StoreError>;
    /// Replaces the check value.
    async fn set_secret_check(&mut self, sealed: &str) -> Result<(), StoreError>;
    /// Every webhook secret and connection key, as stored, locked for update where the backend
    /// locks rows.
    async fn stored_secrets(&mut self) -> Result<Vec<StoredSecret>, StoreError>;
    /// Writes `secret.value` into its row as given.
    async fn replace_stored_secret(&mut self, secret: &StoredSecret) -> Result<(), StoreError>;
}
