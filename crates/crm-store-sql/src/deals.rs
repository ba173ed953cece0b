//! Deals (`DealRepo`) and companies (`CompanyRepo`): reading one, inserting and the versioned
//! update are the same statements on both backends. Listing searches each backend's own way
//! (SQLite's FTS tables, Postgres's trigram indexes) and stays in the stores.
//! The insert and update texts are the store's [`Statements`].

use crm_app::{
    ports::{DealFilter, RowLock, StageTotal},
    StoreError,
};
use crm_domain::{Company, CompanyId, Deal, DealId, PipelineId, Tenant, UserId};

use crate::{
    binds::{bind_company, bind_deal},
    clauses::tenant_query,
    rows::{company, deal, COMPANY_COLUMNS, DEAL_COLUMNS},
    sql::Col,
    statements::Statements,
    Arg, Unit,
};

/// Whether a deal list filters on a column with an index of its own: such a list keeps one
/// statement even when it also searches text, since that index serves it better than a search
/// page's walk of the newest rows.
pub fn filtered_by_index(filter: &DealFilter) -> bool {
    filter.pipeline_id.is_some()
        || filter.stage.is_some()
        || filter.company_id.is_some()
        || filter.primary_contact_id.is_some()
        || filter.owner_id.is_some()
}

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

/// The pipeline's active deals per stage and currency (the board's column totals), by the
/// `deals_stage` index; only `owner`'s when given.
pub async fn stage_totals<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    pipeline: &PipelineId,
    owner: Option<&UserId>,
) -> Result<Vec<StageTotal>, StoreError> {
    // Two texts rather than `($4 IS NULL OR owner_id = $4)`, so each keeps a plan of its own.
    let sql = match owner {
        None => {
            "SELECT stage, currency, COUNT(*) AS deals, \
             CAST(COALESCE(SUM(value_cents), 0) AS BIGINT) AS value_cents \
             FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 \
             AND deleted_at IS NULL GROUP BY stage, currency ORDER BY stage, currency"
        }
        Some(_) => {
            "SELECT stage, currency, COUNT(*) AS deals, \
             CAST(COALESCE(SUM(value_cents), 0) AS BIGINT) AS value_cents \
             FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 \
             AND deleted_at IS NULL AND owner_id = $4 GROUP BY stage, currency ORDER BY stage, currency"
        }
    };
    let mut q = tenant_query::<U::Db>(sql, tenant).arg(pipeline.as_str());
    if let Some(owner) = owner {
        q = q.arg(owner.as_str());
    }
    tx.all(q, |r| {
        Ok(StageTotal {
            stage: r.col("stage")?,
            currency: r.col("currency")?,
            deals: u64::try_from(r.col::<i64>("deals")?).unwrap_or(0),
            value_cents: r.col("value_cents")?,
        })
    })
    .await
}

/// Inserts a deal.
pub async fn insert_deal<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    d: &Deal,
) -> Result<(), StoreError> {
    let q = bind_deal(tenant_query::<U::Db>(U::INSERT_DEAL, tenant), d).arg(d.created_at.millis());
    tx.execute(q).await?;
    Ok(())
}

/// Updates a deal if its stored version is the one before `d`'s; `Stale` if not.
/// Deals have no uniqueness rule beyond their id, so the plain `execute` (no savepoint) serves.
pub async fn update_deal<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    d: &Deal,
) -> Result<(), StoreError> {
    let q = bind_deal(tenant_query::<U::Db>(U::UPDATE_DEAL, tenant), d).arg(d.version - 1);
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

/// Inserts a company.
pub async fn insert_company<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    c: &Company,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(U::INSERT_COMPANY, tenant)
        .arg(c.id.as_str())
        .arg(c.created_at.millis());
    tx.execute(bind_company(q, c)).await?;
    Ok(())
}

/// Updates a company if its stored version is the one before `c`'s; `Stale` if not.
/// Companies have no uniqueness rule beyond their id, so no savepoint is needed.
pub async fn update_company<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    c: &Company,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(U::UPDATE_COMPANY, tenant)
        .arg(c.id.as_str())
        .arg(c.version - 1);
    match tx.execute(bind_company(q, c)).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

/// `impl DealRepo for $tx` with the statements above (`$tx` implements [`Statements`]); the
/// store's `list_deals` in the braces.
#[macro_export]
macro_rules! impl_deal_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::DealRepo, $tx, deals, [
            fn insert_deal(tenant: &$crate::reexport::Tenant, d: &$crate::reexport::Deal) -> Result<(), $crate::reexport::StoreError>;
            fn get_deal(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::DealId) -> Result<Option<$crate::reexport::Deal>, $crate::reexport::StoreError>;
            fn update_deal(tenant: &$crate::reexport::Tenant, d: &$crate::reexport::Deal) -> Result<(), $crate::reexport::StoreError>;
            fn stage_totals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, owner: Option<&$crate::reexport::UserId>) -> Result<Vec<$crate::reexport::StageTotal>, $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}

/// `impl CompanyRepo for $tx` with the statements above (`$tx` implements [`Statements`]); the
/// store's `list_companies` in the braces.
#[macro_export]
macro_rules! impl_company_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::CompanyRepo, $tx, deals, [
            fn insert_company(tenant: &$crate::reexport::Tenant, c: &$crate::reexport::Company) -> Result<(), $crate::reexport::StoreError>;
            fn get_company(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::CompanyId) -> Result<Option<$crate::reexport::Company>, $crate::reexport::StoreError>;
            fn update_company(tenant: &$crate::reexport::Tenant, c: &$crate::reexport::Company) -> Result<(), $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
