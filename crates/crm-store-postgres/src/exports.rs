//! Exports (`ExportRepo`): the shared statements.

use crate::tx::PostgresTx;

crm_store_sql::impl_export_repo!(PostgresTx);
