//! The store: a database holding every workspace's data, opened as units of work ([`Tx`]) that
//! are every repository at once.

use std::sync::Arc;

use async_trait::async_trait;
use crm_domain::{history::Change, Contact, Event, Tenant, WorkspaceId};

use super::{
    ActivityRepo, AuditRepo, AutomationRepo, CompanyRepo, ConfigEvents, ContactRepo, DealRepo,
    EmailRepo, EraseRepo, EventRepo, ExportRepo, HistoryRepo, IdempotencyRepo, ImportRepo, KeyRepo,
    MergeRepo, PipelineRepo, PlanRepo, RecordRepo, Reference, RegistryRepo, RetentionRepo,
    SecretRepo, SequenceRepo, SessionRepo, StoreError, UniqueRepo, UserRepo, WebhookRepo,
    WorkspaceRepo,
};

/// A database holding every workspace's data.
#[async_trait]
pub trait Store: Send + Sync {
    /// Opens a transaction that may write. It holds the write lock where the backend has one
    /// (SQLite), and locks rows it reads for update (Postgres). Dropped without `commit`, it
    /// rolls back.
    async fn begin_write(&self) -> Result<Box<dyn Tx>, StoreError>;
    /// Opens a read-only unit of work. Writes through it are a programming error.
    async fn begin_read(&self) -> Result<Box<dyn Tx>, StoreError>;
    /// Inserts `contact` (as [`ContactRepo::insert_contact`] does, with the same errors) and its
    /// `event` (queued for fan-out, as [`EventRepo::insert_events`] does) as one atomic write
    /// with nothing else in it: the create of a contact that no automation, sequence or
    /// idempotency record reacts to, with its history entry `change` (as
    /// [`HistoryRepo::insert_changes`] does). Either all are written or, on any error, none. The
    /// default is a transaction of its own; a store overrides it where one statement can do
    /// all (Postgres: no `BEGIN` and `COMMIT` round trips around it).
    async fn insert_contact_alone(
        &self,
        tenant: &Tenant,
        contact: &Contact,
        refs: &[Reference<'_>],
        event: &Event,
        change: &Change,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        tx.insert_contact(tenant, contact, refs).await?;
        tx.insert_events_and_changes(
            tenant,
            std::slice::from_ref(event),
            std::slice::from_ref(change),
        )
        .await?;
        tx.commit().await
    }
    /// Whether the database answers a trivial query.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Runs for the life of the process, telling `events` of every committed transaction that
    /// called [`Tx::mark_config_changed`]: this process's own before their `commit` returns, other
    /// processes' as the backend learns of them. Calls `connected` once it can see every change
    /// from then on, and `disconnected` (then `connected` again) when it may have missed some.
    async fn follow_config_changes(&self, events: Arc<dyn ConfigEvents>);
    /// Erases what rows rewritten since the store opened left behind in the database's files
    /// (free pages, the write-ahead log), where the backend keeps it there and can erase it;
    /// run after secrets were sealed or re-sealed (`crate::secrets`). Slow: an operator's step.
    async fn scrub_freed_space(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// One unit of work on the store.
#[async_trait]
pub trait Tx:
    WorkspaceRepo
    + RegistryRepo
    + ContactRepo
    + CompanyRepo
    + PipelineRepo
    + DealRepo
    + ActivityRepo
    + RecordRepo
    + EventRepo
    + HistoryRepo
    + MergeRepo
    + UniqueRepo
    + AuditRepo
    + EraseRepo
    + RetentionRepo
    + IdempotencyRepo
    + ImportRepo
    + ExportRepo
    + KeyRepo
    + PlanRepo
    + WebhookRepo
    + AutomationRepo
    + EmailRepo
    + SequenceRepo
    + SecretRepo
    + UserRepo
    + SessionRepo
    + Send
{
    /// Ends the transaction: commits it, or, once [`Tx::roll_back_at_commit`] was called, rolls
    /// it back and announces no configuration change.
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;
    /// Makes this write transaction a dry run's (decisions §18, §24): everything runs as usual,
    /// but [`Tx::commit`] rolls it all back. MUST be honoured by every store: a dry run that
    /// committed would persist what it promised not to.
    fn roll_back_at_commit(&mut self);
    /// Holds a lock on `key` in the tenant until the transaction ends, so that writes keyed by
    /// it (upserts of one normalised email or domain) run one after the other. The default does
    /// nothing: a store whose write transactions hold its one writer lock (SQLite) is already
    /// serialized.
    async fn lock_key(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError> {
        let _ = (tenant, key);
        Ok(())
    }
    /// [`EventRepo::insert_events`] and [`HistoryRepo::insert_changes`]: what every write ends
    /// with. Stores override it where one statement can do both (Postgres: one round trip).
    async fn insert_events_and_changes(
        &mut self,
        tenant: &Tenant,
        events: &[Event],
        changes: &[Change],
    ) -> Result<(), StoreError> {
        self.insert_events(tenant, events).await?;
        if changes.is_empty() {
            return Ok(());
        }
        self.insert_changes(tenant, changes).await
    }
    /// Records that this transaction changes what processes cache about `workspace` (keys, plan,
    /// settings, registry, automations, sequences); at commit every process is told
    /// ([`Store::follow_config_changes`]).
    fn mark_config_changed(&mut self, workspace: &WorkspaceId);
    /// Whether [`Tx::mark_config_changed`] was called: reads of configuration in this transaction
    /// must then come from it, not from a cache.
    fn config_changed(&self) -> bool;
    /// Marks a point the transaction can return to (`SAVEPOINT`), so one part of a batch can
    /// fail without undoing the others.
    async fn savepoint(&mut self, name: &str) -> Result<(), StoreError>;
    async fn release_savepoint(&mut self, name: &str) -> Result<(), StoreError>;
    async fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), StoreError>;
}
