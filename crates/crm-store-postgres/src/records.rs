//! Whether a record of any kind exists (`RecordRepo`), and the guard that makes an insert
//! wait for its references.

use crm_app::ports::{Reference, Referent};

use crate::tx::PostgresTx;

pub(crate) use crm_store_sql::record_table;

/// Appends to an `INSERT ... SELECT <values>` the condition that every record in `refs` exists,
/// their ids bound from `$first` on (tenant as `$1`, `$2`). An owner, a user of the workspace, is
/// held `FOR KEY SHARE` as `owner_exists` holds it: its deletion waits for this insert's
/// transaction, so no record is left owned by a deleted user.
pub(crate) fn push_reference_guard(sql: &mut String, refs: &[Reference<'_>], first: usize) {
    for (i, r) in refs.iter().enumerate() {
        let keyword = if i == 0 { "WHERE" } else { "AND" };
        let n = first + i;
        sql.push_str(&match r.referent {
            Referent::Record(object) => format!(
                " {keyword} EXISTS (SELECT 1 FROM {} WHERE workspace_id = $1 AND mode = $2 AND id = ${n})",
                record_table(object)
            ),
            Referent::User => format!(
                " {keyword} EXISTS (SELECT 1 FROM users WHERE workspace_id = $1 AND id = ${n} FOR KEY SHARE)"
            ),
        });
    }
}

crm_store_sql::impl_record_repo!(PostgresTx);
crm_store_sql::impl_history_repo!(PostgresTx);
crm_store_sql::impl_merge_repo!(PostgresTx);
crm_store_sql::impl_unique_repo!(PostgresTx);
crm_store_sql::impl_audit_repo!(PostgresTx);
crm_store_sql::impl_erase_repo!(PostgresTx);
