//! The port through which the use cases see a record as its readers do.
//!
//! Inside a write's transaction the use cases need a record as the outside world sees it: the
//! event payload's `data` (what webhooks deliver, and what automation and sequence conditions
//! read), the stored answer an `Idempotency-Key` replays, a batch's per-operation results, the
//! `existing` record of a conflict, and the record merge tags are filled from. That shape is
//! the API's response body, which is crm-api's to define; this crate declares the port and
//! crm-api implements it, so the dependency still points inward.

use crm_domain::{
    rule::{AutomationDef, AutomationDraft},
    sequence::{SequenceDef, SequenceDraft},
    Activity, Company, Contact, Deal, Pipeline, Stage,
};
use serde_json::Value;

/// The records as clients see them.
///
/// Each method MUST return the JSON body the API answers with for that record (the same keys,
/// values and order), so that an event's `data`, a replayed answer and a live answer agree, and
/// conditions see the fields clients see. It MUST NOT fail: every record has a body.
pub trait RecordViews: Send + Sync {
    fn contact(&self, contact: &Contact) -> Value;
    fn company(&self, company: &Company) -> Value;
    fn deal(&self, deal: &Deal) -> Value;
    fn activity(&self, activity: &Activity) -> Value;
    fn pipeline(&self, pipeline: &Pipeline) -> Value;
    fn stage(&self, stage: &Stage) -> Value;
    /// What a delete of the record `id` of kind `object` (`contact`, `deal`) answers.
    fn deleted(&self, id: &str, object: &'static str) -> Value;
    /// A rule's definition as a client writes it, which a PATCH overlays: every member set, and
    /// `conditions` and `actions` as the API shows them. It MUST parse back, against the same
    /// registry and pipelines, to an equal definition.
    fn automation_draft(&self, def: &AutomationDef) -> AutomationDraft;
    /// A sequence's definition as a client writes it (`trigger` null when there is none), with
    /// the same contract.
    fn sequence_draft(&self, def: &SequenceDef) -> SequenceDraft;
    /// The problem document (RFC 9457) the API answers for `error`, without its `type` URL,
    /// which depends on where the API is served: an import's row errors are kept so. The
    /// default, for use-case tests, holds the detail only.
    fn problem(&self, error: crate::AppError) -> Value {
        serde_json::json!({ "detail": error.to_string() })
    }
}
