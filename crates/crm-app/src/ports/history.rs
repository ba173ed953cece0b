//! Field history: the entries writes leave on contacts, companies and deals.

use async_trait::async_trait;
use crm_domain::{history::Change, Tenant};

use super::{Slice, StoreError};

#[async_trait]
pub trait HistoryRepo {
    /// Inserts `changes` (each a new entry) in this transaction.
    async fn insert_changes(
        &mut self,
        tenant: &Tenant,
        changes: &[Change],
    ) -> Result<(), StoreError>;
    /// The entries of the record `record_id`, newest first (by id; ids are time-ordered), soft
    /// deleted or not.
    async fn list_changes(
        &mut self,
        tenant: &Tenant,
        record_id: &str,
        slice: &Slice,
    ) -> Result<Vec<Change>, StoreError>;
}
