//! The company body.

use crm_domain::{Company, JsonMap};
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts, versioned};

/// A company as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Company")]
pub struct CompanyBody {
    /// `cmp_` prefix.
    pub id: String,
    /// Always `company`.
    pub object: &'static str,
    pub name: String,
    pub domain: Option<String>,
    /// The `usr_` id of the user who owns it, or null.
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
    pub deleted_at: Option<String>,
    /// Only on a tombstone: the company this one was merged into (it is never listed, and writes to
    /// it answer 409 with that company under `existing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<String>,
}

versioned!(CompanyBody);

impl From<&Company> for CompanyBody {
    fn from(c: &Company) -> Self {
        CompanyBody {
            id: c.id.as_str().to_owned(),
            object: "company",
            name: c.name.clone(),
            domain: c.domain.clone(),
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
pub(crate) mod tests {
    use super::*;
    use crm_domain::{CompanyId, Timestamp};
    use serde_json::{json, Value};

    /// The domain's `Company::snapshot()`, which this body replaces.
    fn old_snapshot(x: &Company) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "company",
            "name": x.name,
            "domain": x.domain,
            "owner_id": x.owner_id.as_ref().map(|id| id.as_str()),
            "custom_fields": x.custom_fields,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
            "deleted_at": x.deleted_at.map(|t| t.to_string()),
        })
    }

    pub(crate) fn company() -> Company {
        let mut custom_fields = JsonMap::new();
        custom_fields.insert("size".into(), json!(12));
        Company {
            id: CompanyId::from_uuid(uuid::Uuid::from_u128(5)),
            name: "Acme".into(),
            domain: Some("acme.test".into()),
            owner_id: None,
            custom_fields,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_500),
            version: 2,
            deleted_at: None,
            merged_into: None,
        }
    }

    #[test]
    fn serializes_as_the_company_snapshot_did() {
        let c = company();
        crate::bodies::assert_same_json(&CompanyBody::from(&c), &old_snapshot(&c));
    }
}
