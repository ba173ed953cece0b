//! Connections, templates and emails (`EmailRepo`): the statements both stores share
//! (`crm_store_sql::email`); claims skip rows other workers hold (`FOR UPDATE SKIP LOCKED`).

crm_store_sql::impl_email_repo!(crate::PostgresTx);
