//! Pipelines and their stages, with the moves of deals between stages.

use async_trait::async_trait;
use crm_domain::{Pipeline, PipelineId, StageType, Tenant, Timestamp};

use super::StoreError;

/// How a write transaction holds a row it read, where the store has row locks (Postgres; SQLite's
/// single writer serializes writes anyway). Read units of work never lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowLock {
    /// The row cannot change until this transaction ends; other readers are not blocked. For
    /// records used as a reference (a deal's pipeline and its stages).
    Share,
    /// This transaction will change the row: concurrent writers of it wait.
    Update,
    /// The row cannot be deleted (nor its key changed) until this transaction ends; updates of
    /// its other columns are not blocked. For a user named as a record's owner.
    KeyShare,
    /// No lock: a first look, to learn which rows to lock and in which order.
    Unlocked,
}

#[async_trait]
pub trait PipelineRepo {
    /// MUST return `Duplicate`, leaving the transaction usable, when the key is taken in the tenant.
    async fn insert_pipeline(
        &mut self,
        tenant: &Tenant,
        pipeline: &Pipeline,
    ) -> Result<(), StoreError>;
    async fn get_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError>;
    async fn get_pipeline_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError>;
    /// Share-locked in a write transaction.
    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError>;
    /// Every pipeline of the tenant, oldest first.
    async fn list_pipelines(&mut self, tenant: &Tenant) -> Result<Vec<Pipeline>, StoreError>;
    /// Writes name, default flag, stages and version; `Stale` unless the row is at `version - 1`.
    async fn update_pipeline(
        &mut self,
        tenant: &Tenant,
        pipeline: &Pipeline,
    ) -> Result<(), StoreError>;
    /// Clears the default flag of every pipeline of the tenant but `keep`.
    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError>;
    async fn delete_pipeline(&mut self, tenant: &Tenant, id: &PipelineId)
        -> Result<(), StoreError>;
    /// Deals (soft-deleted ones included) in the pipeline, or in one of its stages.
    async fn count_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: Option<&str>,
    ) -> Result<i64, StoreError>;
    /// Locks every deal of a stage for update (where the store has row locks). A change to a
    /// stage's deals takes their locks before its pipeline's, the order a deal update takes
    /// them in (the deal, then its pipeline): the other order can deadlock.
    async fn lock_stage_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
    ) -> Result<(), StoreError>;
    /// Moves every deal of a stage to another stage of the same pipeline (bumping versions).
    async fn move_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        from: &str,
        to: &str,
        to_type: StageType,
        now: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Keeps deals' `stage_type` in step after a stage's type changed.
    async fn set_deals_stage_type(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
        stage_type: StageType,
    ) -> Result<(), StoreError>;
}
