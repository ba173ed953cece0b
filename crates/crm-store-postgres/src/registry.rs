//! Custom fields, enum groups and object types (`RegistryRepo`): the shared statements, and the
//! locks that keep two transactions from appending at the same position.

use crm_app::StoreError;
use crm_domain::Tenant;
use crm_store_sql::{
    registry::{PositionList, PositionLocks},
    Unit,
};

use crate::tx::{tenant_query, PostgresTx};

crm_store_sql::impl_registry_repo!(PostgresTx);

impl PositionLocks for PostgresTx {
    /// Custom fields and object types are appended at the highest position + 1, like enum
    /// values, but have no parent row to lock; a transaction-scoped advisory lock on the tenant
    /// and the list stands in for one (taken by its own statement, for the reason given at
    /// `lock_enum_group`). Registrations are rare, so the serialization costs nothing.
    async fn lock_position_list(
        &mut self,
        tenant: &Tenant,
        list: PositionList,
    ) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let list = match list {
            PositionList::Fields(object) => format!("custom_fields:{}", object.as_str()),
            PositionList::ObjectTypes => "object_types".to_owned(),
        };
        let q = tenant_query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2 || ':' || $3, 0))",
            tenant,
        )
        .bind(list);
        q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Two transactions appending to one group would read the same highest position, so the
    /// group's row is locked first, by a statement of its own (a READ COMMITTED statement sees
    /// only what had committed when it began, so the locking must be over before the INSERT
    /// reads the highest position).
    async fn lock_enum_group(&mut self, tenant: &Tenant, group: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query(
            "SELECT 1 FROM enum_groups WHERE workspace_id = $1 AND mode = $2 AND grp = $3 FOR UPDATE",
            tenant,
        )
        .bind(group);
        self.execute(q).await?;
        Ok(())
    }
}
