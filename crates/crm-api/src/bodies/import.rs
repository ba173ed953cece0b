//! The import body (decisions §20, §24) and its row errors.

use crm_app::ports::ImportError;
use crm_domain::import::Import;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::{opt_ts, ts};

/// A bulk import: its settings, progress and counts.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Import")]
pub struct ImportBody {
    /// `imp_` prefix.
    pub id: String,
    /// `import`.
    pub object: &'static str,
    /// `queued`, `running`, `completed`, `failed`, `cancelled`, or `validated` (a dry run's end).
    pub status: &'static str,
    /// `contact`, `company` or `deal`.
    pub object_type: &'static str,
    /// `skip`, `update` or `error`.
    pub on_duplicate: &'static str,
    /// Validates every row and writes none.
    pub dry_run: bool,
    /// CSV records after the header.
    pub rows_total: i64,
    pub rows_done: i64,
    pub created: i64,
    pub updated: i64,
    pub skipped: i64,
    pub failed: i64,
    /// Why a `failed` import stopped (a problem document naming the row), else null.
    pub error: Option<Value>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

/// A problem document as stored (without `type`), with its `type` URL again.
pub(crate) fn with_type(mut problem: Value, errors_base_url: &str) -> Value {
    if let Value::Object(map) = &mut problem {
        let code = map
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("internal_error")
            .to_owned();
        let mut doc = serde_json::Map::new();
        doc.insert("type".into(), format!("{errors_base_url}/{code}").into());
        doc.extend(std::mem::take(map));
        *map = doc;
    }
    problem
}

impl ImportBody {
    pub fn new(i: &Import, errors_base_url: &str) -> ImportBody {
        ImportBody {
            id: i.id.as_str().to_owned(),
            object: "import",
            status: i.status.as_str(),
            object_type: i.object.as_str(),
            on_duplicate: i.on_duplicate.as_str(),
            dry_run: i.dry_run,
            rows_total: i.counts.rows_total,
            rows_done: i.counts.rows_done,
            created: i.counts.created,
            updated: i.counts.updated,
            skipped: i.counts.skipped,
            failed: i.counts.failed,
            error: i.error.clone().map(|e| with_type(e, errors_base_url)),
            created_at: ts(i.created_at),
            finished_at: opt_ts(i.finished_at),
        }
    }
}

/// A row that failed: its CSV record number (the header is row 1) and its problem document.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "ImportError")]
pub struct ImportErrorBody {
    pub row: i64,
    pub problem: Value,
}

impl ImportErrorBody {
    pub fn new(e: &ImportError, errors_base_url: &str) -> ImportErrorBody {
        ImportErrorBody {
            row: e.row,
            problem: with_type(e.problem.clone(), errors_base_url),
        }
    }
}
