//! The ports: what the use cases need from the outside world. Adapters implement them; every
//! method documents its contract, and the conformance suite (`crm-store-conformance`) checks it.

use std::sync::Arc;

use async_trait::async_trait;
use crm_domain::{
    ids::DeliveryId, DeliveryStatus, EventId, EventType, Subscription, Webhook, WebhookId,
};
use crm_domain::{
    Activity, ActivityId, ApiKeyId, Company, CompanyId, Contact, ContactId, Deal, DealId, Email,
    Event, FieldDef, ObjectKind, ObjectType, Pipeline, PipelineId, Registry, StageType, Tenant,
    Timestamp, WorkspaceId,
};
use uuid::Uuid;

pub use crate::automation_ports::AutomationRepo;
pub use crate::mail_ports::{EmailFilter, EmailRepo, EmailSender, SendFailure};
pub use crate::sequence_ports::{ClaimedEnrollment, SequenceRepo};
use crate::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::{IdemRecord, StoredReply},
};

/// Failures of a store. Business meaning is carried by `Duplicate`; `Unavailable` is a 503 the
/// client may retry; everything else is unexpected and becomes a 500 with the details logged,
/// never shown.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was hit. The transaction is still usable.
    #[error("duplicate")]
    Duplicate,
    /// An optimistic update found the row at another version than expected.
    #[error("stale version")]
    Stale,
    /// The write names a record that does not exist: the `usize` is its index in the write's
    /// list of [`Reference`]s. Nothing was written; the transaction is still usable.
    #[error("missing reference")]
    MissingReference(usize),
    /// The database cannot be reached: no connection could be made or kept (refused, timed out,
    /// dropped, the server shutting down or not yet accepting connections). A store MUST report
    /// these as `Unavailable` and nothing else (a busy SQLite file, a failed statement, a
    /// constraint are `Backend`), so that a client is told to retry only when retrying can help.
    #[error("database unavailable: {0}")]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    #[error("store: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;

    /// The time to within a clock tick (a few milliseconds, never ahead of [`Clock::now`]), for
    /// the checks every request makes: a key's expiry, the billing period, a reservation's
    /// lease. The system clock answers this one without reading the time-stamp counter (`now`
    /// was 4 % of a cached request's CPU, `perf`). Where a tick could change the answer (within
    /// [`COARSE_SLACK_MS`] of an expiry or a period's end) the caller asks [`Clock::now`] too.
    fn now_coarse(&self) -> Timestamp {
        self.now()
    }
}

/// How far [`Clock::now_coarse`] may be behind [`Clock::now`], with room to spare (a tick is
/// 1 to 10 ms).
pub const COARSE_SLACK_MS: i64 = 1_000;

pub trait IdSource: Send + Sync {
    /// A fresh, time-ordered UUID (v7).
    fn new_uuid(&self) -> Uuid;
}

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
    /// idempotency record reacts to. Either both are written or, on any error, neither. The
    /// default is a transaction of its own; a store overrides it where one statement can do
    /// both (Postgres: no `BEGIN` and `COMMIT` round trips around it).
    async fn insert_contact_alone(
        &self,
        tenant: &Tenant,
        contact: &Contact,
        refs: &[Reference<'_>],
        event: &Event,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        tx.insert_contact(tenant, contact, refs).await?;
        tx.insert_events(tenant, std::slice::from_ref(event))
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

/// Where a store reports changes to what processes cache about a workspace (its API keys, plan
/// and settings, registry, automations and sequences): see `crate::config_cache`.
pub trait ConfigEvents: Send + Sync {
    /// A transaction that changed `workspace`'s configuration committed.
    fn changed(&self, workspace: &WorkspaceId);
    /// Some workspace's configuration changed; which is not known.
    fn changed_unknown(&self);
    /// From now on every change is reported.
    fn connected(&self);
    /// Changes may be missed until the next `connected`.
    fn disconnected(&self);
}

/// What a write transaction marked with [`Tx::mark_config_changed`], for stores to announce at
/// commit: to other processes by their own means, to this one through [`ConfigMarks::committed`].
#[derive(Default)]
pub struct ConfigMarks {
    workspaces: Vec<WorkspaceId>,
    local: Option<Arc<dyn ConfigEvents>>,
}

impl ConfigMarks {
    /// `local`: this process's listener, once [`Store::follow_config_changes`] runs.
    pub fn new(local: Option<Arc<dyn ConfigEvents>>) -> ConfigMarks {
        ConfigMarks {
            workspaces: Vec::new(),
            local,
        }
    }

    pub fn mark(&mut self, workspace: &WorkspaceId) {
        if !self.workspaces.contains(workspace) {
            self.workspaces.push(workspace.clone());
        }
    }

    pub fn workspaces(&self) -> &[WorkspaceId] {
        &self.workspaces
    }

    /// Tells this process, after the transaction committed.
    pub fn committed(self) {
        if let Some(local) = self.local {
            for ws in &self.workspaces {
                local.changed(ws);
            }
        }
    }
}

/// The outcome of taking one request from a rate budget (GCRA: `limit` per minute, bursts of up
/// to `limit`), with what the `RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateStatus {
    pub allowed: bool,
    /// Requests per minute.
    pub limit: u32,
    /// Requests that could be sent right now.
    pub remaining: u32,
    /// Seconds until the budget is whole again.
    pub reset_secs: u64,
    /// When refused: seconds until one request would be admitted.
    pub retry_after_secs: u64,
}

/// Per-minute request budgets, one per tenant (workspace and mode). One process keeps them in
/// memory; several processes share them through an adapter (Redis).
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes one request from `tenant`'s budget of `per_minute` (the limit may change between
    /// calls: a plan change applies at once). A refused request takes nothing.
    async fn acquire(&self, tenant: &Tenant, per_minute: u32) -> RateStatus;

    /// The same, answered at once when the budget is in this process's memory, without a future
    /// to allocate and poll on every request; `None` when it must be asked of a shared store
    /// (then call [`RateLimiter::acquire`]).
    fn acquire_now(&self, _tenant: &Tenant, _per_minute: u32) -> Option<RateStatus> {
        None
    }
}

/// Filters of the contact list. All present filters must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContactFilter {
    /// Case-insensitive substring of first or last name, email, phone or LinkedIn URL.
    pub q: Option<String>,
    pub email: Option<Email>,
    pub company_id: Option<CompanyId>,
    pub contact_type: Option<String>,
    /// Equality on custom fields, sorted by key (the order is part of the cursor's fingerprint).
    pub custom_fields: Vec<FieldFilter>,
    pub include_deleted: bool,
}

/// `custom_fields.<key> = value`: the record's value equals `value` (a JSON string, number or
/// boolean as the registry normalises it), or, for an array (multiselect), holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldFilter {
    pub key: String,
    pub value: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompanyFilter {
    /// Case-insensitive substring of name or domain.
    pub q: Option<String>,
    pub domain: Option<String>,
    pub include_deleted: bool,
}

/// Filters of the deal list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DealFilter {
    /// Case-insensitive substring of the title.
    pub q: Option<String>,
    pub pipeline_id: Option<PipelineId>,
    pub stage: Option<String>,
    pub company_id: Option<CompanyId>,
    pub primary_contact_id: Option<ContactId>,
    pub include_deleted: bool,
}

/// Filters of the activity list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivityFilter {
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
    pub activity_type: Option<String>,
}

/// A slice of a newest-first list: records with an id below `before` (all when `None`), at most
/// `limit` of them, ordered by id descending (ids are time-ordered). Activities are ordered by
/// `(occurred_at, id)` descending instead, and their `before` is `"<occurred_at ms>:<id>"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub before: Option<String>,
    pub limit: u32,
}

#[async_trait]
pub trait WorkspaceRepo {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError>;
    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError>;
    /// Whether any workspace exists (first-start bootstrap).
    async fn has_workspaces(&mut self) -> Result<bool, StoreError>;
    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError>;
    /// The key with this SHA-256 hash, revoked or not, with its workspace.
    async fn find_api_key(
        &mut self,
        hash: &str,
    ) -> Result<Option<(ApiKeyRecord, Workspace)>, StoreError>;
    async fn get_api_key(
        &mut self,
        tenant: &Tenant,
        id: &ApiKeyId,
    ) -> Result<Option<ApiKeyRecord>, StoreError>;
}

#[async_trait]
pub trait RegistryRepo {
    /// The custom fields of `object` and every enum group with its values, in registration order.
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError>;
    /// Creates an enum group if absent; returns whether it was created.
    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Adds a value to a group (creating the group) if absent; returns whether it was added.
    async fn insert_enum_value(
        &mut self,
        tenant: &Tenant,
        group: &str,
        value: &str,
        label: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Registers a custom field unless its object already has one with that key; returns whether
    /// it did. An existing field MUST be left exactly as it is (re-registration keeps the original
    /// data type). A new field comes after every field its object already has, also when two
    /// transactions register fields at once (registration order).
    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The custom fields of every object, each object's in registration order.
    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError>;
    /// Adds a custom object type unless one with its key exists (which is left as it is); returns
    /// whether it did.
    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        object_type: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The custom object types in registration order.
    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError>;
}

/// A record a write points at, which must exist (as [`RecordRepo::record_exists`] says) for the
/// write to happen. Handing these to the insert instead of checking them first lets a networked
/// store check them in the INSERT itself: one round trip fewer per create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference<'a> {
    pub object: ObjectKind,
    pub id: &'a str,
}

#[async_trait]
pub trait ContactRepo {
    /// Inserts `contact` if every record in `refs` exists. MUST return `MissingReference` (of the
    /// first missing one) when one does not, before considering the email, and `Duplicate` when
    /// the email is taken in the tenant (soft-deleted contacts included); either leaves the
    /// transaction usable and nothing written.
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        contact: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError>;
    /// Inserts, in their order, each of `contacts` that [`ContactRepo::insert_contact`] would
    /// insert with its company (when it names one) as its only reference, and returns the ids of
    /// those it inserted. One whose company does not exist or whose email is taken (by a stored
    /// contact or by an earlier one of `contacts`) is skipped, writing nothing and leaving the
    /// transaction usable. The caller MUST NOT pass a contact with any other reference (a
    /// reference-typed custom field): those go through `insert_contact`. Stores override the
    /// default, one `insert_contact` each, with a multi-row statement (coalesced creates).
    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        let mut inserted = Vec::with_capacity(contacts.len());
        for c in contacts {
            let company = c.company_id.as_ref().map(|id| Reference {
                object: ObjectKind::Company,
                id: id.as_str(),
            });
            match self.insert_contact(tenant, c, company.as_slice()).await {
                Ok(()) => inserted.push(c.id.clone()),
                Err(StoreError::Duplicate | StoreError::MissingReference(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(inserted)
    }
    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError>;
    async fn get_contact_by_email(
        &mut self,
        tenant: &Tenant,
        email: &Email,
    ) -> Result<Option<Contact>, StoreError>;
    /// Writes every field of `contact`, expecting the stored row at `contact.version - 1`; MUST
    /// return `Stale` otherwise and `Duplicate` when the new email is taken.
    async fn update_contact(
        &mut self,
        tenant: &Tenant,
        contact: &Contact,
    ) -> Result<(), StoreError>;
    async fn list_contacts(
        &mut self,
        tenant: &Tenant,
        filter: &ContactFilter,
        slice: &Slice,
    ) -> Result<Vec<Contact>, StoreError>;
}

#[async_trait]
pub trait CompanyRepo {
    async fn insert_company(
        &mut self,
        tenant: &Tenant,
        company: &Company,
    ) -> Result<(), StoreError>;
    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError>;
    /// Same contract as `update_contact` (`Stale` on a version mismatch).
    async fn update_company(
        &mut self,
        tenant: &Tenant,
        company: &Company,
    ) -> Result<(), StoreError>;
    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError>;
}

/// How a write transaction holds a row it read, where the store has row locks (Postgres; SQLite's
/// single writer serializes writes anyway). Read units of work never lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowLock {
    /// The row cannot change until this transaction ends; other readers are not blocked. For
    /// records used as a reference (a deal's pipeline and its stages).
    Share,
    /// This transaction will change the row: concurrent writers of it wait.
    Update,
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

#[async_trait]
pub trait DealRepo {
    async fn insert_deal(&mut self, tenant: &Tenant, deal: &Deal) -> Result<(), StoreError>;
    async fn get_deal(&mut self, tenant: &Tenant, id: &DealId) -> Result<Option<Deal>, StoreError>;
    /// Same contract as `update_contact` (`Stale` on a version mismatch).
    async fn update_deal(&mut self, tenant: &Tenant, deal: &Deal) -> Result<(), StoreError>;
    async fn list_deals(
        &mut self,
        tenant: &Tenant,
        filter: &DealFilter,
        slice: &Slice,
    ) -> Result<Vec<Deal>, StoreError>;
}

#[async_trait]
pub trait ActivityRepo {
    async fn insert_activity(
        &mut self,
        tenant: &Tenant,
        activity: &Activity,
    ) -> Result<(), StoreError>;
    async fn get_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<Option<Activity>, StoreError>;
    /// `Stale` unless the row is at `version - 1`.
    async fn update_activity(
        &mut self,
        tenant: &Tenant,
        activity: &Activity,
    ) -> Result<(), StoreError>;
    async fn delete_activity(&mut self, tenant: &Tenant, id: &ActivityId)
        -> Result<(), StoreError>;
    /// Newest first by `(occurred_at, id)`.
    async fn list_activities(
        &mut self,
        tenant: &Tenant,
        filter: &ActivityFilter,
        slice: &Slice,
    ) -> Result<Vec<Activity>, StoreError>;
}

#[async_trait]
pub trait RecordRepo {
    /// Whether a record of `object` with this id exists in the tenant (soft-deleted ones count:
    /// they can be restored, and references to them stay valid).
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError>;
}

#[async_trait]
pub trait EventRepo {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError>;
    /// [`EventRepo::insert_event`] for each of `events`; stores override it with one statement.
    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        for event in events {
            self.insert_event(tenant, event).await?;
        }
        Ok(())
    }
    /// Newest first, optionally of one type.
    async fn list_events(
        &mut self,
        tenant: &Tenant,
        event_type: Option<&str>,
        slice: &Slice,
    ) -> Result<Vec<Event>, StoreError>;
}

/// Idempotency records (decisions §9). A record without a reply is a claim: a request is running
/// under its key. A claim belongs to the process that wrote it, through a database session (or,
/// on SQLite, a lock) that lives exactly as long as that process, so that a retry after the
/// process died need not wait out the claim's lease.
#[async_trait]
pub trait IdempotencyRepo {
    /// Inserts a new in-flight record unless one exists for (tenant, key); returns whether it did.
    /// The record MUST name this process as its owner (`record.owner_alive` is ignored).
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        record: &IdemRecord,
    ) -> Result<bool, StoreError>;
    /// The record for (tenant, key). In a write transaction it MUST lock the record against
    /// other writers until commit, so that two requests never both take over one claim.
    ///
    /// `owner_alive` MUST be false once the process that wrote a claim is gone, however it ended
    /// (`SIGKILL` included), within a second and without waiting for the claim's lease; it MUST
    /// be true while that process runs, whichever process asks (several processes sharing one
    /// database included). Where a store cannot tell (a record written before owners were
    /// recorded), it is true and the lease decides.
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError>;
    /// Replaces the record for (tenant, record.key), this process becoming its owner.
    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        record: &IdemRecord,
    ) -> Result<(), StoreError>;
    async fn delete_idempotency(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError>;
    /// Stores the outcome of the request holding `key` and marks it finished.
    async fn finish_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
        reply: &StoredReply,
    ) -> Result<(), StoreError>;
}

#[async_trait]
pub trait KeyRepo {
    /// The tenant's keys (revoked and expired ones too), newest first.
    async fn list_api_keys(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<ApiKeyRecord>, StoreError>;
    /// Writes `revoked_at` and `expires_at` of the key `key.id` in `key`'s tenant; returns whether
    /// the key exists.
    async fn update_api_key_state(&mut self, key: &ApiKeyRecord) -> Result<bool, StoreError>;
    /// Raises each key's `last_used_at` to the instant given, never lowering it (touches from
    /// several processes may arrive out of order). Keys that do not exist are skipped.
    async fn touch_api_keys(&mut self, uses: &[KeyUse]) -> Result<(), StoreError>;
}

/// A key seen in use at an instant (batched `last_used_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyUse {
    pub tenant: Tenant,
    pub id: ApiKeyId,
    pub at: Timestamp,
}

/// The usage counter of one tenant's billing period, read under its lock (see [`PlanRepo::lock_usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageLock {
    /// Requests counted durably in the period.
    pub used: u64,
    /// Allowance reserved by unexpired leases of other holders (processes).
    pub others_reserved: u64,
    /// Allowance reserved by the caller's own lease, expired or not.
    pub own_reserved: u64,
}

/// How many objects under a plan cap the tenant has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanCounts {
    pub active_automations: u64,
    pub sequences: u64,
}

/// Plans, settings and usage metering. Requests are counted per tenant and billing period (keyed
/// by the period's start). A process that must not let a capped allowance overshoot *reserves*
/// part of it under a lease (holder = a process id, with an expiry it renews), hands the
/// reservation out in memory, and moves what it used from its lease to `used` when it flushes.
#[async_trait]
pub trait PlanRepo {
    /// Writes the plan, the overrides and `overage_cap_usd` of `ws.id`; returns whether it exists.
    async fn update_workspace(&mut self, ws: &Workspace) -> Result<bool, StoreError>;
    /// Creates the tenant's counter for the period at 0 if absent and locks it until the
    /// transaction ends (so reservations of several processes queue), then reads it. Leases of
    /// other holders that expired by `now` are dropped. MUST be called before any lease of the
    /// tenant's period is written in the transaction.
    async fn lock_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        holder: &str,
        now: Timestamp,
    ) -> Result<UsageLock, StoreError>;
    /// Adds `counted` to the period's `used` (creating the counter), and sets the holder's lease
    /// to `reserved` (0 deletes it) until `lease_until`. The counter row is written first, so it
    /// takes the same lock as `lock_usage`.
    async fn record_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        counted: u64,
        holder: &str,
        reserved: u64,
        lease_until: Timestamp,
    ) -> Result<(), StoreError>;
    /// Requests counted durably in the period (0 when none).
    async fn get_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
    ) -> Result<u64, StoreError>;
    /// The tenant's active automations and sequences.
    async fn count_plan_objects(&mut self, tenant: &Tenant) -> Result<PlanCounts, StoreError>;
}

// ---- Webhooks: subscriptions, fan-out of events into deliveries, claimed delivery ----

/// An event waiting for fan-out, with one enabled webhook of its tenant created no later than
/// it (or `None` when its tenant has none: the event is still marked dispatched).
#[derive(Debug, Clone, PartialEq)]
pub struct FanOutRow {
    pub tenant: Tenant,
    pub event_id: EventId,
    pub event_type: EventType,
    pub webhook: Option<(WebhookId, Subscription)>,
}

/// A delivery to create: one per (event, webhook).
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    pub tenant: Tenant,
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub created_at: Timestamp,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub status: DeliveryStatus,
    /// Attempts recorded so far.
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A delivery claimed by a worker, with what sending it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedDelivery {
    pub tenant: Tenant,
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    /// Attempts recorded before this one.
    pub attempts: u32,
    pub url: String,
    pub secret: String,
    /// The event as stored (its snapshot JSON): the exact body to send.
    pub body: String,
    pub claim_token: String,
}

/// One attempt, logged; the `status` is the delivery's after it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryAttempt {
    /// Orders the log (time-ordered, unique).
    pub seq: String,
    pub webhook_id: WebhookId,
    pub delivery_id: DeliveryId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub attempt: u32,
    pub status: DeliveryStatus,
    pub response_status: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// The outcome of an attempt on a claimed delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptOutcome {
    pub tenant: Tenant,
    pub delivery_id: DeliveryId,
    pub claim_token: String,
    /// The delivery's new state; `next_attempt_at` is when it comes due again (`Retrying`).
    pub status: DeliveryStatus,
    pub next_attempt_at: Option<Timestamp>,
    pub attempt: DeliveryAttempt,
}

#[async_trait]
pub trait WebhookRepo {
    async fn insert_webhook(
        &mut self,
        tenant: &Tenant,
        webhook: &Webhook,
    ) -> Result<(), StoreError>;
    async fn get_webhook(
        &mut self,
        tenant: &Tenant,
        id: &WebhookId,
    ) -> Result<Option<Webhook>, StoreError>;
    /// Newest first.
    async fn list_webhooks(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Webhook>, StoreError>;
    /// Writes url, events, description, enabled, secret, updated_at and version; `Stale` unless
    /// the row is at `version - 1`.
    async fn update_webhook(
        &mut self,
        tenant: &Tenant,
        webhook: &Webhook,
    ) -> Result<(), StoreError>;
    /// Deletes the webhook with its deliveries and their attempts; returns whether it existed.
    async fn delete_webhook(&mut self, tenant: &Tenant, id: &WebhookId)
        -> Result<bool, StoreError>;

    /// Takes up to `limit` undispatched events of every tenant, oldest first, and locks them
    /// (`FOR UPDATE SKIP LOCKED` on Postgres: concurrent dispatchers take disjoint batches).
    /// Returns one row per (event, enabled webhook of its tenant and mode created no later than
    /// the event), and one row with `webhook: None` for an event that has no such webhook. Write
    /// transactions only.
    async fn take_events_to_dispatch(&mut self, limit: u32) -> Result<Vec<FanOutRow>, StoreError>;
    /// Inserts the deliveries (status `pending`, due at their `created_at`) in one statement,
    /// skipping any (event, webhook) pair that already has one; returns how many were inserted.
    async fn insert_deliveries(&mut self, deliveries: &[NewDelivery]) -> Result<u64, StoreError>;
    /// Marks events as dispatched: `take_events_to_dispatch` returns them no more.
    async fn mark_events_dispatched(
        &mut self,
        events: &[(Tenant, EventId)],
    ) -> Result<(), StoreError>;

    /// Claims up to `limit` deliveries of enabled webhooks due by `now` (pending or retrying),
    /// earliest due first: each gets `claim_token` and comes due again at `lease_until`, so a
    /// claim that is never recorded expires and the delivery is claimed again. Two concurrent
    /// claims never return the same delivery (`FOR UPDATE SKIP LOCKED` on Postgres; the single
    /// writer on SQLite). Write transactions only.
    async fn claim_deliveries(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError>;
    /// Records attempts: for each outcome whose delivery still holds its `claim_token`, sets
    /// status, `attempts` (= the attempt's number), `next_attempt_at` (the attempt's end when
    /// none) and clears the token, and logs the attempt. Outcomes whose claim was lost (lease
    /// expired and re-claimed) are skipped, and so are outcomes whose attempt names another
    /// webhook or event than its delivery's. Returns how many were recorded.
    async fn record_attempts(&mut self, outcomes: &[AttemptOutcome]) -> Result<u64, StoreError>;
    async fn get_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
    ) -> Result<Option<DeliveryRecord>, StoreError>;
    /// Makes a dead-lettered delivery pending again, due at `now`; returns whether it was
    /// dead-lettered (otherwise nothing changes).
    async fn requeue_dead_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The webhook's attempt log, newest first (`before` is a `seq`).
    async fn list_delivery_attempts(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        slice: &Slice,
    ) -> Result<Vec<DeliveryAttempt>, StoreError>;
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
    + IdempotencyRepo
    + KeyRepo
    + PlanRepo
    + WebhookRepo
    + AutomationRepo
    + EmailRepo
    + SequenceRepo
    + crate::secrets::SecretRepo
    + Send
{
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;
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
