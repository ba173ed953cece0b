//! The use cases of the CRM and the ports they need.
//!
//! Every write is one transaction opened through the [`ports::Store`] port: the record, its
//! events (outbox) and the idempotency result commit together or not at all. This crate knows the
//! rules (through `crm-domain`) and the ports, and nothing of HTTP, JSON wire DTOs, SQL or any
//! particular database: adapters implement [`ports`], transports call [`App`]. Nor does it hold
//! the process's infrastructure (caches, usage counting, rate budgets, write grouping, tasks):
//! it reaches them through ports ([`Infrastructure`]), which `crm-runtime` implements.

pub mod activities;
pub mod audit;
pub mod auth;
pub mod automations;
pub mod batch;
mod cached_reads;
pub mod companies;
pub mod contacts;
pub mod create_groups;
pub mod deals;
pub mod dry_run;
pub mod emails;
pub mod erase;
pub mod error;
pub mod events;
pub mod export_filter;
pub mod export_run;
pub mod exports;
pub mod field_upserts;
pub mod history;
pub mod idempotency;
pub mod identity;
mod import_bulk;
pub mod import_run;
pub mod imports;
pub mod keys;
pub mod merges;
pub mod metering;
pub mod paging;
pub mod passwords;
pub mod pipelines;
pub mod plans;
pub mod ports;
pub mod registry;
pub mod related;
pub mod search;
pub mod secrets;
pub mod sequence_hooks;
pub mod sequence_sends;
pub mod sequences;
pub mod sessions;
pub mod store_error;
pub mod unique_fields;
pub mod upserts;
pub mod users;
pub mod views;
pub mod webhooks;
pub mod workspaces;
pub mod write;

use std::sync::Arc;

pub use auth::{Access, Caller, Origin, Scope, Scopes};
pub use crm_domain::history::Channel;
pub use error::AppError;
pub use identity::Principal;
pub use metering::{Admission, Refused};
pub use paging::{Page, PageParams};
pub use ports::{Clock, IdSource, RateLimiter, RateStatus, Store, StoreError, Tx};

/// The process's infrastructure, as the use cases reach it: built by an adapter (`crm-runtime`),
/// or by a test from fakes.
#[derive(Clone)]
pub struct Infrastructure {
    /// Keys, plans, registries and rules kept between requests.
    pub config: Arc<dyn ports::ConfigCache>,
    /// Usage counts and keys' uses, written in batches.
    pub meter: Arc<dyn ports::UsageMeter>,
    /// Per-minute request budgets.
    pub limiter: Arc<dyn RateLimiter>,
    /// Told when this process writes events.
    pub outbox: Arc<dyn ports::OutboxSignal>,
    /// Runs the retries that outlive a request.
    pub background: Arc<dyn ports::Background>,
}

/// The application: the ports it was built with. Cheap to clone.
#[derive(Clone)]
pub struct App {
    store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdSource>,
    /// Rate budgets of tenants.
    limiter: Arc<dyn RateLimiter>,
    /// Usage counts and key uses of this process.
    meter: Arc<dyn ports::UsageMeter>,
    /// The network for webhooks (resolving hosts at registration); none in CLI commands.
    pub outbound: Option<Arc<dyn webhooks::Outbound>>,
    /// Keys, plans, registries and rules kept between requests; empty until
    /// [`App::follow_config_changes`] runs (CLI commands never turn it on).
    config: Arc<dyn ports::ConfigCache>,
    /// Where contact creates are grouped, once the server turns grouping on (`create_groups`).
    create_groups: create_groups::CreateGroups,
    /// How records look to clients: event payloads and stored answers are built with it.
    pub(crate) views: Arc<dyn views::RecordViews>,
    /// Told when this process writes events, so that an idle fan-out loop looks again at once
    /// instead of after its idle wait ([`App::events_written`]).
    events_written: Arc<dyn ports::OutboxSignal>,
    /// Runs the retries that outlive a request.
    background: Arc<dyn ports::Background>,
    /// The recorder of a dry run ([`App::dry_run`]); `None` for real writes.
    dry_run: Option<Arc<dry_run::DryRun>>,
}

impl App {
    /// `views` renders records as clients see them (crm-api's bodies).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        views: Arc<dyn views::RecordViews>,
        infrastructure: Infrastructure,
    ) -> App {
        let Infrastructure {
            config,
            meter,
            limiter,
            outbox,
            background,
        } = infrastructure;
        App {
            store,
            clock,
            ids,
            limiter,
            meter,
            outbound: None,
            config,
            create_groups: create_groups::CreateGroups::default(),
            views,
            events_written: outbox,
            background,
            dry_run: None,
        }
    }

    /// Told (`notify_waiters`: nothing is stored for a loop not waiting yet) whenever this
    /// process writes events to the outbox, possibly before they commit (inside a transaction)
    /// or for a transaction that then rolls back: a fan-out loop that waits on it looks again
    /// soon. Events other processes write are found by polling.
    pub fn events_written(&self) -> &Arc<dyn ports::OutboxSignal> {
        &self.events_written
    }

    /// The same application with rate budgets kept by `limiter` (shared by several processes)
    /// instead of the one it was built with.
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> App {
        self.limiter = limiter;
        self
    }

    /// The same application with webhook hosts resolved (and deliveries sent) through `outbound`.
    pub fn with_outbound(mut self, outbound: Arc<dyn webhooks::Outbound>) -> App {
        self.outbound = Some(outbound);
        self
    }

    /// Keeps the configuration cache in step with the database for the life of the process;
    /// until it runs, nothing is cached.
    pub async fn follow_config_changes(&self) {
        self.store.follow_config_changes(self.config.clone()).await
    }

    /// Writes the usage counts and keys' uses gathered since the last flush (see
    /// [`ports::UsageMeter::flush`]); `last` at shutdown gives every reservation back.
    pub async fn flush_usage(&self, last: bool) {
        self.meter.flush(last).await
    }

    /// Whether the database answers.
    pub async fn ready(&self) -> Result<(), AppError> {
        Ok(self.store.ping().await?)
    }
}
