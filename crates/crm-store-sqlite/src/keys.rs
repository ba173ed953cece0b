//! API keys listed, revoked and touched (`KeyRepo`): the statements both stores share
//! (`crm_store_sql::keys`).

crm_store_sql::impl_key_repo!(crate::SqliteTx);
