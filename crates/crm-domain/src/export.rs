//! Exports (decisions §25): a list of one object, as its list endpoint filters it, written out
//! as CSV or JSON lines by a background job and kept for a day. How records become cells is
//! here; reading them and storing the file are crm-app's.

use serde_json::Value;

use crate::{history::Author, ids::ExportId, registry::ObjectKind, time::Timestamp};

/// How long a finished export's file is kept (decisions §25: 24 hours).
pub const KEPT_MS: i64 = 24 * 3_600_000;

/// The objects an export may list.
pub const EXPORT_OBJECTS: [ObjectKind; 4] = [
    ObjectKind::Contact,
    ObjectKind::Company,
    ObjectKind::Deal,
    ObjectKind::Activity,
];

/// The file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// A header row, then one row per record (RFC 4180, as the `csv` crate writes it).
    Csv,
    /// One record body per line, as the list endpoint renders it.
    Jsonl,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 2] = [ExportFormat::Csv, ExportFormat::Jsonl];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Jsonl => "jsonl",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The file's media type.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Csv => "text/csv; charset=utf-8",
            ExportFormat::Jsonl => "application/x-ndjson",
        }
    }
}

/// Where an export is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportStatus {
    Queued,
    Running,
    Completed,
    Failed,
}

impl ExportStatus {
    pub const ALL: [ExportStatus; 4] = [
        ExportStatus::Queued,
        ExportStatus::Running,
        ExportStatus::Completed,
        ExportStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportStatus::Queued => "queued",
            ExportStatus::Running => "running",
            ExportStatus::Completed => "completed",
            ExportStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn is_finished(self) -> bool {
        matches!(self, ExportStatus::Completed | ExportStatus::Failed)
    }
}

/// One export. Its file is stored in numbered chunks (`chunks_total` of them); the job resumes
/// after the last record written (`resume_after`, the list's keyset position).
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub id: ExportId,
    pub object: ObjectKind,
    pub format: ExportFormat,
    pub status: ExportStatus,
    /// The list filters, as crm-app encodes them.
    pub filter: Value,
    /// The CSV columns, in order (empty for JSON lines).
    pub columns: Vec<String>,
    /// Known once the export completes (the filters are read as the job goes).
    pub rows_total: Option<i64>,
    pub rows_done: i64,
    /// The list position after the last record written: where the next chunk starts.
    pub resume_after: Option<String>,
    pub chunks_total: i64,
    pub author: Author,
    /// Why it failed (a problem document without its `type` URL), when it did.
    pub error: Option<Value>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// When the file stops being served: [`KEPT_MS`] after the export ended.
    pub expires_at: Option<Timestamp>,
}

impl Export {
    /// A new export, queued.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: ExportId,
        object: ObjectKind,
        format: ExportFormat,
        filter: Value,
        columns: Vec<String>,
        author: Author,
        now: Timestamp,
    ) -> Export {
        Export {
            id,
            object,
            format,
            status: ExportStatus::Queued,
            filter,
            columns,
            rows_total: None,
            rows_done: 0,
            resume_after: None,
            chunks_total: 0,
            author,
            error: None,
            created_at: now,
            finished_at: None,
            expires_at: None,
        }
    }

    /// Ends the export at `now` with `status`; its file is kept [`KEPT_MS`] from then.
    pub fn finish(&mut self, status: ExportStatus, now: Timestamp) {
        self.status = status;
        self.finished_at = Some(now);
        self.expires_at = Some(Timestamp::from_millis(now.millis() + KEPT_MS));
        if status == ExportStatus::Completed {
            self.rows_total = Some(self.rows_done);
        }
    }

    /// Whether the export is gone for its readers at `now` (its file expired).
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// The CSV columns of an object's export: the list body's members (`fields`, in order, its
/// `custom_fields` member replaced by) one `custom_fields.<key>` column per registered key —
/// the names imports take for the writable ones.
pub fn csv_columns<S: AsRef<str>>(fields: &[S], custom_keys: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(fields.len() + custom_keys.len());
    for field in fields {
        let field = field.as_ref();
        if field == "custom_fields" {
            out.extend(custom_keys.iter().map(|k| format!("custom_fields.{k}")));
        } else {
            out.push(field.to_owned());
        }
    }
    out
}

/// One record body's cells under `columns`: text as it is, numbers and booleans as JSON writes
/// them, null or absent as an empty cell, arrays and objects as their JSON text.
pub fn csv_cells(body: &Value, columns: &[String]) -> Vec<String> {
    columns
        .iter()
        .map(|column| {
            let value = match column.strip_prefix("custom_fields.") {
                Some(key) => body.get("custom_fields").and_then(|c| c.get(key)),
                None => body.get(column),
            };
            match value {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn custom_fields_become_one_column_per_key_in_place() {
        let columns = csv_columns(
            &["id", "email", "custom_fields", "created_at"],
            &["score".into(), "tier".into()],
        );
        assert_eq!(
            columns,
            [
                "id",
                "email",
                "custom_fields.score",
                "custom_fields.tier",
                "created_at"
            ]
        );
    }

    #[test]
    fn cells_render_text_numbers_nulls_and_arrays() {
        let body = json!({
            "id": "con_1", "email": null, "version": 3, "archived": false,
            "custom_fields": {"score": 4.5, "tags": ["a", "b"]}
        });
        let columns: Vec<String> = [
            "id",
            "email",
            "version",
            "archived",
            "custom_fields.score",
            "custom_fields.tags",
            "custom_fields.absent",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            csv_cells(&body, &columns),
            ["con_1", "", "3", "false", "4.5", r#"["a","b"]"#, ""]
        );
    }

    #[test]
    fn a_finished_export_expires_a_day_later() {
        let mut export = Export::new(
            ExportId::from_uuid(uuid::Uuid::from_u128(1)),
            ObjectKind::Contact,
            ExportFormat::Csv,
            Value::Null,
            Vec::new(),
            Author::system(),
            Timestamp::from_millis(1_000),
        );
        export.rows_done = 7;
        export.finish(ExportStatus::Completed, Timestamp::from_millis(2_000));
        assert_eq!(export.rows_total, Some(7));
        assert!(!export.is_expired(Timestamp::from_millis(2_000 + KEPT_MS - 1)));
        assert!(export.is_expired(Timestamp::from_millis(2_000 + KEPT_MS)));
    }
}
