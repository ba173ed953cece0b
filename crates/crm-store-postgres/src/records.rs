//! Whether a record of any kind exists (`RecordRepo`), and the guard that makes an insert
//! wait for its references.

use crm_app::ports::Reference;

use crate::tx::PostgresTx;

pub(crate) use crm_store_sql::record_table;

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

crm_store_sql::impl_record_repo!(PostgresTx);
crm_store_sql::impl_history_repo!(PostgresTx);
crm_store_sql::impl_merge_repo!(PostgresTx);
crm_store_sql::impl_unique_repo!(PostgresTx);
crm_store_sql::impl_audit_repo!(PostgresTx);
crm_store_sql::impl_erase_repo!(PostgresTx);
