//! Workspaces and the API keys that authenticate into them (`WorkspaceRepo`): the statements
//! both stores share (`crm_store_sql::workspaces`).

crm_store_sql::impl_workspace_repo!(crate::PostgresTx);
