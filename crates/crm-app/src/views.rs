//! The port through which the use cases see a record as its readers do.
//!
//! Inside a write's transaction the use cases need a record as the outside world sees it: the
//! event payload's `data` (what webhooks deliver, and what automation and sequence conditions
//! read), the stored answer an `Idempotency-Key` replays, a batch's per-operation results, the
//! `existing` record of a conflict, and the record merge tags are filled from. That shape is
//! the API's response body, which is crm-api's to define; this crate declares the port and
//! crm-api implements it, so the dependency still points inward.

use crm_domain::{
    export::{csv_cells, ExportFormat},
    rule::{AutomationDef, AutomationDraft},
    sequence::{SequenceDef, SequenceDraft},
    Activity, Company, Contact, Deal, Pipeline, Stage,
};
use serde_json::Value;

use crate::{export_filter::ExportPage, AppError};

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
    /// Appends `page` to an export's file in `format`: one JSON line per record, or one CSV
    /// row per record of the cells `columns` name ([`csv_cells`] of its body). An
    /// implementation MUST write the bytes [`write_export_page_as_values`], the default, writes
    /// (crm-api writes them from its typed bodies, without building each body as a [`Value`]).
    fn write_export_page(
        &self,
        page: &ExportPage,
        format: ExportFormat,
        columns: &[String],
        out: &mut Vec<u8>,
    ) -> Result<(), AppError> {
        write_export_page_as_values(self, page, format, columns, out)
    }
}

/// [`RecordViews::write_export_page`] through each record's body as a [`Value`].
pub fn write_export_page_as_values<V: RecordViews + ?Sized>(
    views: &V,
    page: &ExportPage,
    format: ExportFormat,
    columns: &[String],
    out: &mut Vec<u8>,
) -> Result<(), AppError> {
    let bodies: Vec<Value> = match page {
        ExportPage::Contacts(r) => r.iter().map(|c| views.contact(c)).collect(),
        ExportPage::Companies(r) => r.iter().map(|c| views.company(c)).collect(),
        ExportPage::Deals(r) => r.iter().map(|d| views.deal(d)).collect(),
        ExportPage::Activities(r) => r.iter().map(|a| views.activity(a)).collect(),
    };
    match format {
        ExportFormat::Jsonl => {
            for body in &bodies {
                write_json_line(out, body)?;
            }
            Ok(())
        }
        ExportFormat::Csv => {
            write_csv_rows(out, bodies.iter().map(|body| csv_cells(body, columns)))
        }
    }
}

/// Appends `body` to `out` as one JSON line.
fn write_json_line(out: &mut Vec<u8>, body: &Value) -> Result<(), AppError> {
    serde_json::to_writer(&mut *out, body)
        .map_err(|e| AppError::Internal(format!("writing a JSON line: {e}")))?;
    out.push(b'\n');
    Ok(())
}

/// Appends one CSV row per item of `rows` to `out`.
pub fn write_csv_rows<R, C>(
    out: &mut Vec<u8>,
    rows: impl IntoIterator<Item = R>,
) -> Result<(), AppError>
where
    R: IntoIterator<Item = C>,
    C: AsRef<[u8]>,
{
    let mut writer = csv::Writer::from_writer(&mut *out);
    for row in rows {
        writer
            .write_record(row)
            .map_err(|e| AppError::Internal(format!("writing a CSV row: {e}")))?;
    }
    writer
        .flush()
        .map_err(|e| AppError::Internal(format!("writing a CSV row: {e}")))
}
