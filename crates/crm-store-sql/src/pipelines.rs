//! Pipelines and their stages (`PipelineRepo`): the statements, the same on both backends. What
//! differs is how each keeps one default pipeline per tenant under concurrent writers and how it
//! locks a stage's deals (Postgres repeats and locks, SQLite's single writer needs neither), so
//! `default_pipeline`, `clear_default_pipeline` and `lock_stage_deals` stay in the stores, built
//! on [`read_default_pipeline`] and [`clear_other_defaults`].

use crm_app::{ports::RowLock, StoreError};
use crm_domain::{Pipeline, PipelineId, StageType, Tenant, Timestamp};

use crate::{
    clauses::tenant_query,
    rows::{pipeline, PIPELINE_COLUMNS},
    sql::Col,
    stages_json, Arg, Unit,
};

/// Inserts a pipeline with `sql`, the statement [`impl_pipeline_repo!`] writes: `Duplicate` when
/// its key is taken. ON CONFLICT, unlike a failed INSERT, leaves the transaction usable, and a
/// concurrent insert of the same key makes this one wait for its outcome, then report the clash.
pub async fn insert_pipeline<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    p: &Pipeline,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(sql, tenant)
        .arg(p.id.as_str())
        .arg(p.key.as_str())
        .arg(p.name.as_str())
        .arg(p.is_default)
        .arg(stages_json(&p.stages))
        .arg(p.created_at.millis())
        .arg(p.updated_at.millis())
        .arg(p.version);
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

/// The tenant's default pipeline as one statement sees it, share-locked in a write transaction:
/// a deal created in the default pipeline must not land in a stage a concurrent transaction is
/// removing.
pub async fn read_default_pipeline<U: Unit>(
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

/// Updates a pipeline with `sql` if its stored version is the one before `p`'s; `Stale` if not.
pub async fn update_pipeline<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    p: &Pipeline,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(sql, tenant)
        .arg(p.id.as_str())
        .arg(p.name.as_str())
        .arg(p.is_default)
        .arg(stages_json(&p.stages))
        .arg(p.updated_at.millis())
        .arg(p.version)
        .arg(p.version - 1);
    match tx.execute(q).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

/// One statement clearing the default flag of every pipeline but `keep`.
pub async fn clear_other_defaults<U: Unit>(
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

/// `impl PipelineRepo for $tx` with the statements above, `$json` being the backend's
/// `Unit::JSON` as a literal (`""` or `"::jsonb"`); the store's `default_pipeline`,
/// `clear_default_pipeline` and `lock_stage_deals` in the braces.
#[macro_export]
macro_rules! impl_pipeline_repo {
    ($tx:ty, json = $json:literal, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::PipelineRepo, $tx, pipelines, [
            fn get_pipeline(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::PipelineId, lock: $crate::reexport::RowLock) -> Result<Option<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn get_pipeline_by_key(tenant: &$crate::reexport::Tenant, key: &str, lock: $crate::reexport::RowLock) -> Result<Option<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn list_pipelines(tenant: &$crate::reexport::Tenant) -> Result<Vec<$crate::reexport::Pipeline>, $crate::reexport::StoreError>;
            fn delete_pipeline(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::PipelineId) -> Result<(), $crate::reexport::StoreError>;
            fn count_deals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, stage: Option<&str>) -> Result<i64, $crate::reexport::StoreError>;
            fn move_deals(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, from: &str, to: &str, to_type: $crate::reexport::StageType, now: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn set_deals_stage_type(tenant: &$crate::reexport::Tenant, pipeline: &$crate::reexport::PipelineId, stage: &str, stage_type: $crate::reexport::StageType) -> Result<(), $crate::reexport::StoreError>;
        ], [
            async fn insert_pipeline(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                p: &$crate::reexport::Pipeline,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "INSERT INTO pipelines (workspace_id, mode, id, key, name, is_default, stages, created_at, \
                     updated_at, version) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7", $json, ", $8, $9, $10) ON CONFLICT DO NOTHING"
                );
                $crate::pipelines::insert_pipeline(self, tenant, p, SQL).await
            }

            async fn update_pipeline(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                p: &$crate::reexport::Pipeline,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "UPDATE pipelines SET name = $4, is_default = $5, stages = $6", $json,
                    ", updated_at = $7, version = $8 \
                     WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9"
                );
                $crate::pipelines::update_pipeline(self, tenant, p, SQL).await
            }

            $($own)*
        ]);
    };
}
