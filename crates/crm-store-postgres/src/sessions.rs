//! Console sessions and failed sign-ins (`SessionRepo`): the statements both stores share
//! (`crm_store_sql::sessions`).

crm_store_sql::impl_session_repo!(crate::PostgresTx);
