//! Bulk imports (`ImportRepo`): the shared statements.

use crate::tx::PostgresTx;

crm_store_sql::impl_import_repo!(PostgresTx);
