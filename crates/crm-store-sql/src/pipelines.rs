//! Pipelines and their stages (`PipelineRepo`): the statements, the same on both backends. What
//! differs is whether a concurrent writer can change the default pipeline under a statement
//! (Postgres under READ COMMITTED; not SQLite's single writer), which each store answers with
//! [`DefaultGuard`].

use std::future::Future;

use crm_app::{ports::RowLock, StoreError};
use crm_domain::{Pipeline, PipelineId, StageType, Tenant, Timestamp};

use crate::{
    clauses::tenant_query,
    rows::{pipeline, PIPELINE_COLUMNS},
    sql::Col,
    statements::Statements,
    stored::stage::stages_json,
    Arg, Sql, SqlQuery, Unit,
};

/// A pipeline's writable fields, name to version (five arguments), as its insert and its update
/// take them.
fn bind_pipeline<'q, DB: Sql>(q: SqlQuery<'q, DB>, p: &'q Pipeline) -> SqlQuery<'q, DB> {
    q.arg(p.name.as_str())
        .arg(p.is_default)
        .arg(stages_json(&p.stages))
        .arg(p.updated_at.millis())
        .arg(p.version)
}

/// Inserts a pipeline: `Duplicate` when
/// its key is taken. ON CONFLICT, unlike a failed INSERT, leaves the transaction usable, and a
/// concurrent insert of the same key makes this one wait for its outcome, then report the clash.
pub async fn insert_pipeline<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    p: &Pipeline,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(U::INSERT_PIPELINE, tenant)
        .arg(p.id.as_str())
        .arg(p.key.as_str())
        .arg(p.created_at.millis());
    let q = bind_pipeline(q, p);
    match tx.execute(q).await? {
        0 => Err(StoreError::Duplicate),
        _ => Ok(()),
    }
}

/// A pipeline by id, locked as `lock` asks.
pub async fn get_pipeline<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &PipelineId,
    lock: RowLock,
) -> Result<Option<Pipeline>, StoreError> {
    let sql = format!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(lock)
    );
    tx.optional(
        tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()),
        pipeline,
    )
    .await
}

/// A pipeline by key, locked as `lock` asks.
pub async fn get_pipeline_by_key<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    key: &str,
    lock: RowLock,
) -> Result<Option<Pipeline>, StoreError> {
    let sql = format!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND key = $3{}",
        tx.locking(lock)
    );
    tx.optional(tenant_query::<U::Db>(&sql, tenant).arg(key), pipeline)
        .await
}

/// How often a statement is repeated when a concurrent transaction changed the default
/// pipeline under it (each repetition needs another such commit to be needed; see
/// [`clear_default_pipeline`]).
const DEFAULT_ROUNDS: usize = 32;

/// A store's answer to whether a statement on the default pipeline saw the last word.
pub trait DefaultGuard: Unit {
    /// Whether the statement just run can be trusted: no default pipeline other than `except`
    /// has appeared that it could not see (always, where a single writer runs).
    fn default_settled(
        &mut self,
        tenant: &Tenant,
        except: Option<&PipelineId>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// The tenant's default pipeline as one statement sees it, share-locked in a write transaction:
/// a deal created in the default pipeline must not land in a stage a concurrent transaction is
/// removing.
async fn read_default_pipeline<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Option<Pipeline>, StoreError> {
    let sql = format!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND is_default LIMIT 1{}",
        tx.locking(RowLock::Share)
    );
    tx.optional(tenant_query::<U::Db>(&sql, tenant), pipeline)
        .await
}

/// Every pipeline of the tenant, oldest first (ids are time-ordered).
pub async fn list_pipelines<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Vec<Pipeline>, StoreError> {
    let sql = format!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE workspace_id = $1 AND mode = $2 ORDER BY id"
    );
    tx.all(tenant_query::<U::Db>(&sql, tenant), pipeline).await
}

/// Updates a pipeline if its stored version is the one before `p`'s; `Stale` if not.
pub async fn update_pipeline<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    p: &Pipeline,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(U::UPDATE_PIPELINE, tenant)
        .arg(p.id.as_str())
        .arg(p.version - 1);
    let q = bind_pipeline(q, p);
    match tx.execute(q).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

/// The tenant's default pipeline. A row lock waits for the current holder and then re-checks
/// `is_default`; when that transaction moved the default elsewhere the row no longer qualifies
/// and the new default was invisible to the statement, so the lookup is repeated rather than
/// answering "no default".
pub async fn default_pipeline<U: DefaultGuard>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Option<Pipeline>, StoreError> {
    for _ in 0..DEFAULT_ROUNDS {
        if let Some(p) = read_default_pipeline(tx, tenant).await? {
            return Ok(Some(p));
        }
        if tx.default_settled(tenant, None).await? {
            return Ok(None);
        }
    }
    Err(StoreError::Backend(
        "the default pipeline kept changing while being read".into(),
    ))
}

/// Clears the default flag of every pipeline but `keep`. One UPDATE is not enough under READ
/// COMMITTED. Two transactions making pipelines A and B the default both clear the old default
/// C; the second waits for the first's lock on C, then finds C cleared and skips it, but A,
/// which the first made the default, was not the default in the second UPDATE's snapshot, so it
/// would keep its flag and the tenant would end with two defaults. So after clearing, a fresh
/// statement looks again, and clears again while another default has appeared. Every change of
/// default locks the current default row (clearing it, or editing it), so a transaction that
/// commits a new default before this one finishes is always one this one waited for, and seen.
pub async fn clear_default_pipeline<U: DefaultGuard>(
    tx: &mut U,
    tenant: &Tenant,
    keep: &PipelineId,
    now: Timestamp,
) -> Result<(), StoreError> {
    for _ in 0..DEFAULT_ROUNDS {
        clear_other_defaults(tx, tenant, keep, now).await?;
        if tx.default_settled(tenant, Some(keep)).await? {
            return Ok(());
        }
    }
    Err(StoreError::Backend(
        "the default pipeline kept changing while being cleared".into(),
    ))
}

/// One statement clearing the default flag of every pipeline but `keep`.
async fn clear_other_defaults<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    keep: &PipelineId,
    now: Timestamp,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE pipelines SET is_default = FALSE, updated_at = $4, version = version + 1
         WHERE workspace_id = $1 AND mode = $2 AND is_default AND id <> $3",
        tenant,
    )
    .arg(keep.as_str())
    .arg(now.millis());
    tx.execute(q).await?;
    Ok(())
}

pub async fn delete_pipeline<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &PipelineId,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    tx.execute(q).await?;
    Ok(())
}

/// How many deals stand in the pipeline, or in one of its stages. (`CAST` gives the stage
/// parameter a type where it is compared with NULL; Postgres cannot infer one there.)
pub async fn count_deals<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    pipeline: &PipelineId,
    stage: Option<&str>,
) -> Result<i64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT COUNT(*) AS n FROM deals
         WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND (CAST($4 AS TEXT) IS NULL OR stage = $4)",
        tenant,
    )
    .arg(pipeline.as_str())
    .arg(stage);
    Ok(tx.optional(q, |r| r.col::<i64>("n")).await?.unwrap_or(0))
}

/// Locks a stage's deals for update, so that none is moved into it or changed while the stage
/// is removed or retyped; no statement where the unit of work locks nothing (a single writer,
/// or a read).
pub async fn lock_stage_deals<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    pipeline: &PipelineId,
    stage: &str,
) -> Result<(), StoreError> {
    let lock = tx.locking(RowLock::Update);
    if lock.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT id FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4 ORDER BY id{lock}"
    );
    let q = tenant_query::<U::Db>(&sql, tenant)
        .arg(pipeline.as_str())
        .arg(stage);
    tx.all(q, |_| Ok(())).await?;
    Ok(())
}

/// Moves every deal of a stage to another; answers how many moved.
pub async fn move_deals<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    pipeline: &PipelineId,
    from: &str,
    to: &str,
    to_type: StageType,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE deals SET stage = $5, stage_type = $6, updated_at = $7, version = version + 1
         WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
        tenant,
    )
    .arg(pipeline.as_str())
    .arg(from)
    .arg(to)
    .arg(to_type.as_str())
    .arg(now.millis());
    tx.execute(q).await
}

pub async fn set_deals_stage_type<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    pipeline: &PipelineId,
    stage: &str,
    stage_type: StageType,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE deals SET stage_type = $5 WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
        tenant,
    )
    .arg(pipeline.as_str())
    .arg(stage)
    .arg(stage_type.as_str());
    tx.execute(q).await?;
    Ok(())
}

/// `impl PipelineRepo for $tx` with the statements above; `$tx` implements [`Statements`] and
/// [`DefaultGuard`].
#[macro_export]
macro_rules! impl_pipeline_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::PipelineRepo, $tx, pipelines, [
            fn insert_pipeline(tenant: &$crate::reexport::Tenant, p: &$crate::reexport::Pipeline) -> Result<(), $crate::reexport::StoreError>;
            fn get_pipeline(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::PipelineId, lock: $crate::reexport::RowLock) -> Result<Option<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn get_pipeline_by_key(tenant: &$crate::reexport::Tenant, key: &str, lock: $crate::reexport::RowLock) -> Result<Option<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn default_pipeline(tenant: &$crate::reexport::Tenant) -> Result<Option<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn list_pipelines(tenant: &$crate::reexport::Tenant) -> Result<Vec<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn update_pipeline(tenant: &$crate::reexport::Tenant, p: &$crate::reexport::Pipeline) -> Result<(), $crate::reexport::StoreError>;
            fn clear_default_pipeline(tenant: &$crate::reexport::Tenant, keep: &$crate::reexport::PipelineId, now: $crate::reexport::Timestamp) -> Result<(), $crate::reexport::StoreError>;
            fn delete_pipeline(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::PipelineId) -> Result<(), $crate::reexport::StoreError>;
            fn count_deals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, stage: Option<&str>) -> Result<i64, $crate::reexport::StoreError>;
            fn lock_stage_deals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, stage: &str) -> Result<(), $crate::reexport::StoreError>;
            fn move_deals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, from: &str, to: &str, to_type: $crate::reexport::StageType, now: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn set_deals_stage_type(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, stage: &str, stage_type: $crate::reexport::StageType) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
