//! Activities (`ActivityRepo`): every statement is the shared one.

crm_store_sql::impl_activity_repo!(crate::SqliteTx);
