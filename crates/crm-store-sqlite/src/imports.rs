//! Bulk imports (`ImportRepo`): the shared statements.

use crate::tx::SqliteTx;

crm_store_sql::impl_import_repo!(SqliteTx);
