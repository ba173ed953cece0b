//! Custom fields, enum groups and object types (`RegistryRepo`): the shared statements. The
//! single writer connection serializes write transactions, so reading a list's highest position
//! and inserting after it cannot interleave with another registration: nothing to lock.

use crm_app::StoreError;
use crm_domain::Tenant;
use crm_store_sql::registry::{PositionList, PositionLocks};

use crate::tx::SqliteTx;

crm_store_sql::impl_registry_repo!(SqliteTx);

impl PositionLocks for SqliteTx {
    async fn lock_position_list(&mut self, _: &Tenant, _: PositionList) -> Result<(), StoreError> {
        Ok(())
    }

    async fn lock_enum_group(&mut self, _: &Tenant, _: &str) -> Result<(), StoreError> {
        Ok(())
    }
}
