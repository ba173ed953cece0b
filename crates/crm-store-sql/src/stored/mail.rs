//! An email's `source` column: what sent it.

use crm_domain::{mail::EmailSource, AutomationId};
use serde_json::{json, Value};

pub fn source_json(source: &EmailSource) -> String {
    match source {
        EmailSource::Automation { automation_id } => {
            json!({"type": "automation", "automation_id": automation_id.as_str()})
        }
        EmailSource::Sequence { sequence_id, step } => {
            json!({"type": "sequence", "sequence_id": sequence_id, "step": step})
        }
    }
    .to_string()
}

pub fn source_from_json(v: &Value) -> Option<EmailSource> {
    match v.get("type")?.as_str()? {
        "automation" => Some(EmailSource::Automation {
            automation_id: AutomationId::from_trusted(v.get("automation_id")?.as_str()?.to_owned()),
        }),
        "sequence" => Some(EmailSource::Sequence {
            sequence_id: v.get("sequence_id")?.as_str()?.to_owned(),
            step: u32::try_from(v.get("step")?.as_u64()?).ok()?,
        }),
        _ => None,
    }
}
