//! The ports: what the use cases need from the outside world, one file per port. Adapters
//! implement them; every method documents its contract, and the conformance suite
//! (`crm-store-conformance`) checks the store's.
//!
//! Beside the outside world's services, the process's own infrastructure is reached through
//! ports too ([`ConfigCache`], [`UsageMeter`], [`RateLimiter`], [`WriteGrouping`],
//! [`OutboxSignal`]), implemented in `crm-runtime`: the use cases hold no caches, locks or tasks.
//!
//! The ports know no use case: they depend on `crm-domain` and on the leaf modules of shared
//! types ([`crate::identity`], [`crate::store_error`]) only, so a use case may import any port
//! and no port imports back.

mod activity;
mod audit;
mod automation;
mod background;
mod clock;
mod company;
mod config_cache;
mod config_feed;
mod contact;
mod deal;
mod email_sender;
mod erase;
mod event;
mod export;
mod history;
mod idempotency;
mod import;
mod key;
mod mail;
mod merge;
mod outbox_signal;
mod pipeline;
mod plan;
mod rate_limiter;
mod record;
mod registry;
mod retention;
mod secret;
mod sequence;
mod session;
mod slice;
mod store;
mod unique;
mod usage_meter;
mod user;
mod webhook;
mod workspace;
mod write_grouping;

pub use crate::store_error::StoreError;
pub use activity::{ActivityFilter, ActivityRepo};
pub use audit::{AuditFilter, AuditRepo};
pub use automation::AutomationRepo;
pub use background::{Background, Check, Checked, NoBackground, Task};
pub use clock::{Clock, IdSource, COARSE_SLACK_MS};
pub use company::{CompanyFilter, CompanyRepo};
pub use config_cache::{ConfigCache, Generation, NoConfigCache};
pub use config_feed::{ConfigEvents, ConfigMarks};
pub use contact::{ContactFilter, ContactRepo, FieldFilter};
pub use deal::{DealFilter, DealRepo, StageTotal};
pub use email_sender::{EmailSender, SendFailure};
pub use erase::{ClearedReference, EraseRepo, Erasure};
pub use event::EventRepo;
pub use export::ExportRepo;
pub use history::HistoryRepo;
pub use idempotency::{IdemRecord, IdempotencyRepo, StoredReply};
pub use import::{ImportChunk, ImportError, ImportRepo};
pub use key::{KeyRepo, KeyUse};
pub use mail::{EmailFilter, EmailRepo};
pub use merge::{MergeRepo, RefField, Referrer};
pub use outbox_signal::{NoOutboxSignal, OutboxSignal};
pub use pipeline::{PipelineRepo, RowLock};
pub use plan::{PlanCounts, PlanRepo, UsageLock};
pub use rate_limiter::{RateLimiter, RateStatus};
pub use record::{RecordRepo, Reference, Referent};
pub use registry::RegistryRepo;
pub use retention::{RetentionRepo, RetentionSettings};
pub use secret::{SecretRepo, StoredSecret};
pub use sequence::{ClaimedEnrollment, SequenceRepo};
pub use session::{Session, SessionRepo};
pub use slice::Slice;
pub use store::{Store, Tx};
pub use unique::UniqueRepo;
pub use usage_meter::UsageMeter;
pub use user::{SignInLink, UserRepo};
pub use webhook::{
    AttemptOutcome, ClaimedDelivery, DeliveryAttempt, DeliveryRecord, FanOutRow, NewDelivery,
    WebhookRepo,
};
pub use workspace::WorkspaceRepo;
pub use write_grouping::{GroupedWrites, WriteGrouping};
