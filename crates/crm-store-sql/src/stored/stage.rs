//! A pipeline's `stages` column.

use crm_app::StoreError;
use crm_domain::{Stage, StageId, StageType};

use crate::corrupt;

/// A pipeline's stages as its `stages` column holds them: a JSON array of
/// `{id, key, label, type, ordinal}` objects.
pub fn stages_json(stages: &[Stage]) -> String {
    serde_json::Value::Array(
        stages
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id.as_str(),
                    "key": s.key,
                    "label": s.label,
                    "type": s.stage_type.as_str(),
                    "ordinal": s.ordinal,
                })
            })
            .collect(),
    )
    .to_string()
}

/// A `stages` column read back.
pub fn stages_from_json(text: &str) -> Result<Vec<Stage>, StoreError> {
    let values: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|_| corrupt("stages"))?;
    values
        .iter()
        .map(|v| {
            let s = |k: &str| {
                v.get(k)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| corrupt("stage"))
            };
            let ordinal = v
                .get("ordinal")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| corrupt("stage ordinal"))?;
            Ok(Stage {
                id: StageId::from_trusted(s("id")?),
                key: s("key")?,
                label: s("label")?,
                stage_type: StageType::parse(&s("type")?).ok_or_else(|| corrupt("stage type"))?,
                ordinal: u32::try_from(ordinal).map_err(|_| corrupt("stage ordinal"))?,
            })
        })
        .collect()
}
