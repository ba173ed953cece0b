//! The pipeline body and its stages.

use crm_domain::{Pipeline, Stage};
use schemars::JsonSchema;
use serde::Serialize;

use super::{ts, versioned};

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Stage")]
pub struct StageBody {
    pub id: String,
    pub key: String,
    pub label: String,
    #[serde(rename = "type")]
    pub stage_type: &'static str,
    pub ordinal: u32,
}

impl From<&Stage> for StageBody {
    fn from(s: &Stage) -> Self {
        StageBody {
            id: s.id.as_str().to_owned(),
            key: s.key.clone(),
            label: s.label.clone(),
            stage_type: s.stage_type.as_str(),
            ordinal: s.ordinal,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Pipeline")]
pub struct PipelineBody {
    /// `pl_` prefix.
    pub id: String,
    pub object: &'static str,
    pub key: String,
    pub name: String,
    pub is_default: bool,
    pub stages: Vec<StageBody>,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(PipelineBody);

impl From<&Pipeline> for PipelineBody {
    fn from(p: &Pipeline) -> Self {
        PipelineBody {
            id: p.id.as_str().to_owned(),
            object: "pipeline",
            key: p.key.clone(),
            name: p.name.clone(),
            is_default: p.is_default,
            stages: p.stages.iter().map(StageBody::from).collect(),
            created_at: ts(p.created_at),
            updated_at: ts(p.updated_at),
            version: p.version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{PipelineId, StageId, StageType, Timestamp};
    use serde_json::{json, Value};

    /// The domain's `Pipeline::snapshot()`, which this body replaces.
    fn old_snapshot(x: &Pipeline) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "pipeline",
            "key": x.key,
            "name": x.name,
            "is_default": x.is_default,
            "stages": x.stages.iter().map(|s| json!({
                "id": s.id.as_str(), "key": s.key, "label": s.label,
                "type": s.stage_type.as_str(), "ordinal": s.ordinal,
            })).collect::<Vec<_>>(),
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
        })
    }

    #[test]
    fn serializes_as_the_pipeline_snapshot_did() {
        let stage = |n: u128, key: &str, stage_type, ordinal| Stage {
            id: StageId::from_uuid(uuid::Uuid::from_u128(n)),
            key: key.into(),
            label: key.to_uppercase(),
            stage_type,
            ordinal,
        };
        let p = Pipeline {
            id: PipelineId::from_uuid(uuid::Uuid::from_u128(1)),
            key: "sales".into(),
            name: "Sales".into(),
            is_default: true,
            stages: vec![
                stage(2, "new", StageType::Open, 0),
                stage(3, "won", StageType::Won, 1),
                stage(4, "lost", StageType::Lost, 2),
            ],
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_000),
            version: 4,
        };
        crate::bodies::assert_same_json(&PipelineBody::from(&p), &old_snapshot(&p));
    }
}
