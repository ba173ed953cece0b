//! Users and their sign-in links (`UserRepo`): the statements both stores share
//! (`crm_store_sql::users`).

crm_store_sql::impl_user_repo!(crate::PostgresTx);
