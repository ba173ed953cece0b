//! The export body (decisions §25) and the one-contact export (a subject access request).

use crm_app::exports::ContactDossier;
use crm_domain::export::Export;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::{
    import::with_type, opt_ts, ts, ActivityBody, ChangeBody, ContactBody, DealBody, EmailBody,
    EnrollmentBody,
};

/// An export: its settings and progress. Its file is `GET /exports/{id}/file` once `completed`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Export")]
pub struct ExportBody {
    /// `exp_` prefix.
    pub id: String,
    /// `export`.
    pub object: &'static str,
    /// `queued`, `running`, `completed` or `failed`.
    pub status: &'static str,
    /// `contact`, `company`, `deal` or `activity`.
    pub object_type: &'static str,
    /// `csv` or `jsonl`.
    pub format: &'static str,
    /// Records in the file; null until the export completes.
    pub rows_total: Option<i64>,
    pub rows_done: i64,
    /// Why a `failed` export stopped (a problem document), else null.
    pub error: Option<Value>,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// When the file stops being served (a day after the export ended); null until then.
    pub expires_at: Option<String>,
}

impl ExportBody {
    pub fn new(e: &Export, errors_base_url: &str) -> ExportBody {
        ExportBody {
            id: e.id.as_str().to_owned(),
            object: "export",
            status: e.status.as_str(),
            object_type: e.object.as_str(),
            format: e.format.as_str(),
            rows_total: e.rows_total,
            rows_done: e.rows_done,
            error: e.error.clone().map(|p| with_type(p, errors_base_url)),
            created_at: ts(e.created_at),
            finished_at: opt_ts(e.finished_at),
            expires_at: opt_ts(e.expires_at),
        }
    }
}

/// Everything held about one contact, each list newest first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "ContactExport")]
pub struct ContactExportBody {
    /// `contact_export`.
    pub object: &'static str,
    pub contact: ContactBody,
    pub activities: Vec<ActivityBody>,
    pub emails: Vec<EmailBody>,
    /// Its field history.
    pub history: Vec<ChangeBody>,
    /// Its sequence enrollments, in any state.
    pub enrollments: Vec<EnrollmentBody>,
    /// Deals naming it as their primary contact, soft-deleted ones included.
    pub deals: Vec<DealBody>,
}

impl From<&ContactDossier> for ContactExportBody {
    fn from(d: &ContactDossier) -> Self {
        ContactExportBody {
            object: "contact_export",
            contact: ContactBody::from(&d.contact),
            activities: d.activities.iter().map(ActivityBody::from).collect(),
            emails: d.emails.iter().map(EmailBody::from).collect(),
            history: d.history.iter().map(ChangeBody::from).collect(),
            enrollments: d.enrollments.iter().map(EnrollmentBody::from).collect(),
            deals: d.deals.iter().map(DealBody::from).collect(),
        }
    }
}
