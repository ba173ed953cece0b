//! The deal body.

use crm_domain::{Deal, JsonMap};
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts, versioned};

/// A deal as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Deal")]
pub struct DealBody {
    /// `deal_` prefix.
    pub id: String,
    pub object: &'static str,
    pub title: String,
    /// Pipeline key.
    pub pipeline: String,
    pub pipeline_id: String,
    pub stage: String,
    /// `open`, `won` or `lost`.
    pub stage_type: &'static str,
    pub primary_contact_id: Option<String>,
    pub company_id: Option<String>,
    pub value_cents: Option<i64>,
    pub currency: Option<String>,
    pub close_date: Option<String>,
    /// The `usr_` id of the user who owns it, or null.
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
    pub deleted_at: Option<String>,
}

versioned!(DealBody);

impl From<&Deal> for DealBody {
    fn from(d: &Deal) -> Self {
        DealBody {
            id: d.id.as_str().to_owned(),
            object: "deal",
            title: d.title.clone(),
            pipeline: d.pipeline_key.clone(),
            pipeline_id: d.pipeline_id.as_str().to_owned(),
            stage: d.stage.clone(),
            stage_type: d.stage_type.as_str(),
            primary_contact_id: d
                .primary_contact_id
                .as_ref()
                .map(|id| id.as_str().to_owned()),
            company_id: d.company_id.as_ref().map(|id| id.as_str().to_owned()),
            value_cents: d.value_cents,
            currency: d.currency.clone(),
            close_date: d.close_date.map(|date| date.to_string()),
            owner_id: d.owner_id.as_ref().map(|id| id.as_str().to_owned()),
            custom_fields: d.custom_fields.clone(),
            created_at: ts(d.created_at),
            updated_at: ts(d.updated_at),
            version: d.version,
            deleted_at: opt_ts(d.deleted_at),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crm_domain::{CompanyId, ContactId, Date, DealId, PipelineId, StageType, Timestamp};
    use serde_json::{json, Value};

    /// The domain's `Deal::snapshot()`, which this body replaces.
    fn old_snapshot(x: &Deal) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "deal",
            "title": x.title,
            "pipeline": x.pipeline_key,
            "pipeline_id": x.pipeline_id.as_str(),
            "stage": x.stage,
            "stage_type": x.stage_type.as_str(),
            "primary_contact_id": x.primary_contact_id.as_ref().map(ContactId::as_str),
            "company_id": x.company_id.as_ref().map(CompanyId::as_str),
            "value_cents": x.value_cents,
            "currency": x.currency,
            "close_date": x.close_date.map(|d| d.to_string()),
            "owner_id": x.owner_id.as_ref().map(|id| id.as_str()),
            "custom_fields": x.custom_fields,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
            "deleted_at": x.deleted_at.map(|t| t.to_string()),
        })
    }

    pub(crate) fn deal() -> Deal {
        let mut custom_fields = JsonMap::new();
        custom_fields.insert("tags".into(), json!(["a", "b"]));
        Deal {
            id: DealId::from_uuid(uuid::Uuid::from_u128(9)),
            title: "Big one".into(),
            pipeline_id: PipelineId::from_uuid(uuid::Uuid::from_u128(10)),
            pipeline_key: "sales".into(),
            stage: "won".into(),
            stage_type: StageType::Won,
            primary_contact_id: Some(ContactId::from_uuid(uuid::Uuid::from_u128(11))),
            company_id: Some(CompanyId::from_uuid(uuid::Uuid::from_u128(12))),
            value_cents: Some(12_500),
            currency: Some("EUR".into()),
            close_date: Date::parse("2026-01-02"),
            owner_id: None,
            custom_fields,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_001),
            version: 3,
            deleted_at: Some(Timestamp::from_millis(1_700_000_000_002)),
        }
    }

    #[test]
    fn serializes_as_the_deal_snapshot_did() {
        let d = deal();
        crate::bodies::assert_same_json(&DealBody::from(&d), &old_snapshot(&d));
        let mut open = d.clone();
        (open.primary_contact_id, open.company_id, open.close_date) = (None, None, None);
        open.stage_type = StageType::Open;
        crate::bodies::assert_same_json(&DealBody::from(&open), &old_snapshot(&open));
    }
}
