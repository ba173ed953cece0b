//! Exports (`ExportRepo`): the shared statements.

use crate::tx::SqliteTx;

crm_store_sql::impl_export_repo!(SqliteTx);
