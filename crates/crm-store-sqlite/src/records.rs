//! Whether a record of any kind exists (`RecordRepo`).

use crate::tx::SqliteTx;

pub(crate) use crm_store_sql::record_table;

crm_store_sql::impl_record_repo!(SqliteTx);
crm_store_sql::impl_history_repo!(SqliteTx);
crm_store_sql::impl_merge_repo!(SqliteTx);
crm_store_sql::impl_unique_repo!(SqliteTx);
crm_store_sql::impl_audit_repo!(SqliteTx);
crm_store_sql::impl_erase_repo!(SqliteTx);
