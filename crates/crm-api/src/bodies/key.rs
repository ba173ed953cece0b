//! API key bodies.

use crm_app::{auth::ApiKeyRecord, keys::NewKey};
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts};

/// An API key as the API returns it. The secret is not part of it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Key")]
pub struct KeyBody {
    /// `key_` prefix.
    pub id: String,
    /// Always `key`.
    pub object: &'static str,
    pub name: String,
    /// `test` or `live`, from the key's prefix.
    pub mode: &'static str,
    pub scopes: Vec<String>,
    pub created_at: String,
    /// Updated in batches, about once a second.
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    /// Set on a key that was rolled: when its secret stops working.
    pub expires_at: Option<String>,
}

impl From<&ApiKeyRecord> for KeyBody {
    fn from(k: &ApiKeyRecord) -> Self {
        KeyBody {
            id: k.id.as_str().to_owned(),
            object: "key",
            name: k.name.clone(),
            mode: k.mode.as_str(),
            scopes: k.scopes.clone(),
            created_at: ts(k.created_at),
            last_used_at: opt_ts(k.last_used_at),
            revoked_at: opt_ts(k.revoked_at),
            expires_at: opt_ts(k.expires_at),
        }
    }
}

/// A key just created or rolled, with its secret: shown this once, store it now.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "KeyWithSecret")]
pub struct KeyWithSecretBody {
    #[serde(flatten)]
    pub key: KeyBody,
    /// The whole key (`svc_test_…` or `svc_live_…`), for `Authorization: Bearer`.
    pub secret: String,
}

impl From<&NewKey> for KeyWithSecretBody {
    fn from(new: &NewKey) -> Self {
        KeyWithSecretBody {
            key: (&new.key).into(),
            secret: new.secret.clone(),
        }
    }
}
