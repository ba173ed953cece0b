//! Connections, templates and emails (`EmailRepo`): the statements both stores share
//! (`crm_store_sql::email`); claims need no lock on the single writer.

crm_store_sql::impl_email_repo!(crate::SqliteTx);
