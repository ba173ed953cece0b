//! Whether a record of any kind exists (`RecordRepo`), and the guard that makes an insert
//! wait for its references.

use async_trait::async_trait;
use crm_app::{
    ports::{RecordRepo, Reference},
    StoreError,
};
use crm_domain::{ObjectKind, Tenant};

use crate::tx::{tenant_query, PostgresTx};

/// The table holding records of `object`.
pub(crate) fn record_table(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

/// Appends to an `INSERT ... SELECT <values>` the condition that every record in `refs` exists,
/// their ids bound from `$first` on (tenant as `$1`, `$2`).
pub(crate) fn push_reference_guard(sql: &mut String, refs: &[Reference<'_>], first: usize) {
    for (i, r) in refs.iter().enumerate() {
        let keyword = if i == 0 { "WHERE" } else { "AND" };
        let table = record_table(r.object);
        let n = first + i;
        sql.push_str(&format!(" {keyword} EXISTS (SELECT 1 FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = ${n})"));
    }
}

#[async_trait]
impl RecordRepo for PostgresTx {
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE workspace_id = $1 AND mode = $2 AND id = $3)",
            record_table(object)
        );
        self.exists(tenant_query(&sql, tenant).bind(id)).await
    }
}
