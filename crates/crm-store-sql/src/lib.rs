//! What the SQLite and Postgres stores share, written once: row decoding and the column lists it
//! reads, the SQL text both backends accept, the encoding of stored JSON, and constraint
//! violations as the ports' business errors.
//!
//! The code is generic over sqlx's `Database`: [`Sql`] gathers the bind and decode bounds a
//! statement needs, and [`Unit`] is a store's unit of work as shared code drives it (run a
//! statement, lock rows, catch a uniqueness violation). Each store implements `Unit` for its own
//! `Tx` and keeps only what truly differs: its pool and transactions, locking, upsert syntax,
//! text search, advisory locks and worker claims. Generics rather than textual inclusion, so the
//! shared code is type-checked once and monomorphised per backend at no run-time cost. Both
//! backends take `$1`-style numbered parameters (sqlx's SQLite driver maps them to SQLite's own
//! `?NNN`), which is what lets most statements be one text. The port implementations
//! (`impl ContactRepo for ...`) stay in the store crates, one file per port, each forwarding to
//! the shared functions here where the statements are the same.
//!
//! This crate knows SQL and sqlx's generic API; it names neither backend's driver.

pub mod activities;
pub mod audit;
pub mod automations;
pub mod binds;
pub mod clauses;
pub mod deals;
pub mod email;
mod encoding;
pub mod erase;
mod errors;
pub mod exports;
pub mod history;
pub mod idempotency;
pub mod imports;
pub mod jobs;
pub mod keys;
pub mod merges;
pub mod pipelines;
pub mod plans;
mod port;
pub mod records;
pub mod registry;
pub mod rows;
pub mod secrets;
pub mod sequences;
pub mod sessions;
mod sql;
pub mod statements;
pub mod stored;
pub mod unique;
mod unit;
pub mod users;
pub mod webhooks;
pub mod workspaces;

/// What the `impl_*` macros name, reachable from any store crate.
#[doc(hidden)]
pub mod reexport {
    pub use async_trait::async_trait;
    pub use crm_app::{
        auth::{ApiKeyRecord, Workspace},
        idempotency::StoredReply,
        ports::{
            ActivityFilter, ActivityRepo, AuditFilter, AuditRepo, AutomationRepo, ClearedReference,
            CompanyRepo, DealRepo, DeliveryAttempt, DeliveryRecord, EmailFilter, EmailRepo,
            EraseRepo, Erasure, EventRepo, ExportRepo, HistoryRepo, IdempotencyRepo, ImportChunk,
            ImportError, ImportRepo, KeyRepo, KeyUse, MergeRepo, PipelineRepo, PlanRepo,
            RecordRepo, RefField, Referrer, RegistryRepo, RetentionRepo, RetentionSettings,
            RowLock, SequenceRepo, Session, SessionRepo, SignInLink, Slice, StageTotal, UniqueRepo,
            UserRepo, WebhookRepo, WorkspaceRepo,
        },
        secrets::{SecretRepo, StoredSecret},
        StoreError,
    };
    pub use crm_domain::{
        audit::AuditEntry, export::Export, history::Change, ids::DeliveryId, import::Import, mail,
        registry::FieldDef, rule, sequence, Activity, ActivityId, ApiKeyId, AutomationId, Company,
        CompanyId, ConnectionId, Contact, ContactId, Deal, DealId, Email, EmailId, EnrollmentId,
        Event, EventType, ExportId, ImportId, Mode, ObjectKind, ObjectType, Pipeline, PipelineId,
        Registry, SequenceId, StageType, TemplateId, Tenant, Timestamp, User, UserId, Webhook,
        WebhookId, WorkspaceId,
    };
}

pub use encoding::*;
pub use errors::*;
pub use sql::{Arg, Binds, Col, Decodes, PushArg, Sql, SqlQuery};
pub use unit::{Secrets, Unit};
