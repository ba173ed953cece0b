//! Automations and their runs (`AutomationRepo`): the statements both stores share
//! (`crm_store_sql::automations`).

crm_store_sql::impl_automation_repo!(crate::SqliteTx);
