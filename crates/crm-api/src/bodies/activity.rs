//! The activity body.

use crm_domain::{Activity, JsonMap};
use schemars::JsonSchema;
use serde::Serialize;

use super::{ts, versioned};

/// An activity as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Activity")]
pub struct ActivityBody {
    /// `act_` prefix.
    pub id: String,
    pub object: &'static str,
    #[serde(rename = "type")]
    pub activity_type: String,
    pub contact_id: Option<String>,
    pub deal_id: Option<String>,
    pub body: Option<String>,
    pub occurred_at: String,
    pub custom_fields: JsonMap,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(ActivityBody);

impl From<&Activity> for ActivityBody {
    fn from(a: &Activity) -> Self {
        ActivityBody {
            id: a.id.as_str().to_owned(),
            object: "activity",
            activity_type: a.activity_type.clone(),
            contact_id: a.contact_id.as_ref().map(|id| id.as_str().to_owned()),
            deal_id: a.deal_id.as_ref().map(|id| id.as_str().to_owned()),
            body: a.body.clone(),
            occurred_at: ts(a.occurred_at),
            custom_fields: a.custom_fields.clone(),
            created_at: ts(a.created_at),
            updated_at: ts(a.updated_at),
            version: a.version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{ActivityId, ContactId, DealId, Timestamp};
    use serde_json::{json, Value};

    /// The domain's `Activity::snapshot()`, which this body replaces.
    fn old_snapshot(x: &Activity) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "activity",
            "type": x.activity_type,
            "contact_id": x.contact_id.as_ref().map(ContactId::as_str),
            "deal_id": x.deal_id.as_ref().map(DealId::as_str),
            "body": x.body,
            "occurred_at": x.occurred_at.to_string(),
            "custom_fields": x.custom_fields,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
        })
    }

    #[test]
    fn serializes_as_the_activity_snapshot_did() {
        let a = Activity {
            id: ActivityId::from_uuid(uuid::Uuid::from_u128(3)),
            activity_type: "call".into(),
            contact_id: Some(ContactId::from_uuid(uuid::Uuid::from_u128(4))),
            deal_id: None,
            body: Some("Called <b>".into()),
            occurred_at: Timestamp::from_millis(1_600_000_000_000),
            custom_fields: JsonMap::new(),
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_000),
            version: 1,
        };
        crate::bodies::assert_same_json(&ActivityBody::from(&a), &old_snapshot(&a));
    }
}
