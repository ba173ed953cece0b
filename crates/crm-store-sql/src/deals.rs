//! Deals (`DealRepo`) and companies (`CompanyRepo`): reading one, inserting and the versioned
//! update are the same statements on both backends. Listing searches each backend's own way
//! (SQLite's FTS tables, Postgres's trigram indexes) and stays in the stores.
//!
//! The insert and update texts differ only in the cast after the custom fields (the backend's
//! `Unit::JSON`), so [`impl_deal_repo!`] and [`impl_company_repo!`] take that cast as a literal
//! and `concat!` each text at compile time: creating a deal or moving its stage formats nothing.

use crm_app::{ports::RowLock, StoreError};
use crm_domain::{Company, CompanyId, Deal, DealId, Tenant};

use crate::{
    binds::{bind_company, bind_deal},
    clauses::tenant_query,
    rows::{company, deal, COMPANY_COLUMNS, DEAL_COLUMNS},
    Arg, Unit,
};

/// A deal by id, locked for update in a write transaction.
pub async fn get_deal<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &DealId,
) -> Result<Option<Deal>, StoreError> {
    let sql = format!(
        "SELECT {DEAL_COLUMNS} FROM deals WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(RowLock::Update)
    );
    tx.optional(tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()), deal)
        .await
}

/// Inserts a deal with `sql`, the statement [`impl_deal_repo!`] writes.
pub async fn insert_deal<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    d: &Deal,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = bind_deal(tenant_query::<U::Db>(sql, tenant), d).arg(d.created_at.millis());
    tx.execute(q).await?;
    Ok(())
}

/// Updates a deal with `sql` if its stored version is the one before `d`'s; `Stale` if not.
/// Deals have no uniqueness rule beyond their id, so the plain `execute` (no savepoint) serves.
pub async fn update_deal<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    d: &Deal,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = bind_deal(tenant_query::<U::Db>(sql, tenant), d).arg(d.version - 1);
    match tx.execute(q).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

/// A company by id, locked for update in a write transaction.
pub async fn get_company<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &CompanyId,
) -> Result<Option<Company>, StoreError> {
    let sql = format!(
        "SELECT {COMPANY_COLUMNS} FROM companies WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(RowLock::Update)
    );
    tx.optional(
        tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()),
        company,
    )
    .await
}

/// Inserts a company with `sql`, the statement [`impl_company_repo!`] writes.
pub async fn insert_company<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    c: &Company,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(sql, tenant)
        .arg(c.id.as_str())
        .arg(c.created_at.millis());
    tx.execute(bind_company(q, c)).await?;
    Ok(())
}

/// Updates a company with `sql` if its stored version is the one before `c`'s; `Stale` if not.
/// Companies have no uniqueness rule beyond their id, so no savepoint is needed.
pub async fn update_company<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    c: &Company,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(sql, tenant)
        .arg(c.id.as_str())
        .arg(c.version - 1);
    match tx.execute(bind_company(q, c)).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

/// `impl DealRepo for $tx` with the statements above, `$json` being the backend's `Unit::JSON`
/// as a literal (`""` or `"::jsonb"`); the store's `list_deals` in the braces.
#[macro_export]
macro_rules! impl_deal_repo {
    ($tx:ty, json = $json:literal, { $($own:tt)* }) => {
        #[$crate::reexport::async_trait]
        impl $crate::reexport::DealRepo for $tx {
            async fn insert_deal(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                d: &$crate::reexport::Deal,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "INSERT INTO deals (workspace_id, mode, id, title, pipeline_id, pipeline_key, stage, stage_type, \
                     primary_contact_id, company_id, value_cents, currency, close_date, custom_fields, updated_at, \
                     version, deleted_at, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14", $json,
                    ", $15, $16, $17, $18)"
                );
                $crate::deals::insert_deal(self, tenant, d, SQL).await
            }

            async fn get_deal(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                id: &$crate::reexport::DealId,
            ) -> Result<Option<$crate::reexport::Deal>, $crate::reexport::StoreError> {
                $crate::deals::get_deal(self, tenant, id).await
            }

            async fn update_deal(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                d: &$crate::reexport::Deal,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "UPDATE deals SET title = $4, pipeline_id = $5, pipeline_key = $6, stage = $7, stage_type = $8, \
                     primary_contact_id = $9, company_id = $10, value_cents = $11, currency = $12, close_date = $13, \
                     custom_fields = $14", $json, ", updated_at = $15, version = $16, deleted_at = $17 \
                     WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $18"
                );
                $crate::deals::update_deal(self, tenant, d, SQL).await
            }

            $($own)*
        }
    };
}

/// `impl CompanyRepo for $tx` with the statements above, `$json` being the backend's
/// `Unit::JSON` as a literal; the store's `list_companies` in the braces.
#[macro_export]
macro_rules! impl_company_repo {
    ($tx:ty, json = $json:literal, { $($own:tt)* }) => {
        #[$crate::reexport::async_trait]
        impl $crate::reexport::CompanyRepo for $tx {
            async fn insert_company(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                c: &$crate::reexport::Company,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "INSERT INTO companies (workspace_id, mode, id, created_at, name, domain, custom_fields, \
                     updated_at, version, deleted_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7", $json, ", $8, $9, $10)"
                );
                $crate::deals::insert_company(self, tenant, c, SQL).await
            }

            async fn get_company(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                id: &$crate::reexport::CompanyId,
            ) -> Result<Option<$crate::reexport::Company>, $crate::reexport::StoreError> {
                $crate::deals::get_company(self, tenant, id).await
            }

            async fn update_company(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                c: &$crate::reexport::Company,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "UPDATE companies SET name = $5, domain = $6, custom_fields = $7", $json,
                    ", updated_at = $8, version = $9, deleted_at = $10 \
                     WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4"
                );
                $crate::deals::update_company(self, tenant, c, SQL).await
            }

            $($own)*
        }
    };
}
