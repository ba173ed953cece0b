//! The contact body.

use crm_domain::{Contact, JsonMap};
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts, versioned};

/// A contact as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Contact")]
pub struct ContactBody {
    /// `con_` prefix.
    pub id: String,
    /// Always `contact`.
    pub object: &'static str,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub linkedin_url: Option<String>,
    pub company_id: Option<String>,
    #[serde(rename = "type")]
    pub contact_type: Option<String>,
    /// The `usr_` id of the user who owns it, or null.
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
    pub created_at: String,
    pub updated_at: String,
    /// Incremented on every change; send it back in `If-Match`.
    pub version: i64,
    pub deleted_at: Option<String>,
    /// Only on a tombstone: the contact this one was merged into (it is never listed, and writes to
    /// it answer 409 with that contact under `existing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<String>,
}

versioned!(ContactBody);

impl From<&Contact> for ContactBody {
    fn from(c: &Contact) -> Self {
        ContactBody {
            id: c.id.as_str().to_owned(),
            object: "contact",
            first_name: c.first_name.clone(),
            last_name: c.last_name.clone(),
            email: c.email.as_ref().map(|e| e.as_str().to_owned()),
            phone: c.phone.clone(),
            linkedin_url: c.linkedin_url.clone(),
            company_id: c.company_id.as_ref().map(|id| id.as_str().to_owned()),
            contact_type: c.contact_type.clone(),
            owner_id: c.owner_id.as_ref().map(|id| id.as_str().to_owned()),
            custom_fields: c.custom_fields.clone(),
            created_at: ts(c.created_at),
            updated_at: ts(c.updated_at),
            version: c.version,
            deleted_at: opt_ts(c.deleted_at),
            merged_into: c.merged_into.as_ref().map(|id| id.as_str().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{CompanyId, ContactDraft, ContactId, Email, Timestamp};
    use serde_json::json;

    #[test]
    fn serializes_as_the_contact_snapshot_did() {
        let mut c = Contact::create(
            ContactId::from_uuid(uuid::Uuid::from_u128(1)),
            Timestamp::from_millis(1_700_000_000_000),
            ContactDraft {
                first_name: Some("Ada".into()),
                ..Default::default()
            },
            &Default::default(),
        )
        .unwrap()
        .0;
        c.email = Email::parse("ada@example.com");
        c.company_id = Some(CompanyId::from_uuid(uuid::Uuid::from_u128(2)));
        c.custom_fields.insert("tier".into(), json!("gold"));
        c.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
        let expected = json!({
            "id": c.id.as_str(),
            "object": "contact",
            "first_name": "Ada",
            "last_name": null,
            "email": "ada@example.com",
            "phone": null,
            "linkedin_url": null,
            "company_id": c.company_id.as_ref().unwrap().as_str(),
            "type": null,
            "owner_id": null,
            "custom_fields": {"tier": "gold"},
            "created_at": "2023-11-14T22:13:20.000Z",
            "updated_at": "2023-11-14T22:13:20.000Z",
            "version": 1,
            "deleted_at": "2023-11-14T22:13:21.000Z",
        });
        crate::bodies::assert_same_json(&ContactBody::from(&c), &expected);
    }
}
