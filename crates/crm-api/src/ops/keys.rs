//! API keys: `/keys` (decisions §7). A key sees and manages the keys of its own mode; secrets
//! are returned once, by create and roll, and never again.

use crm_app::Scope;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::handler;
use crate::{
    bodies::{KeyBody, KeyWithSecretBody, ListBody},
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    schema::items_enum,
    Problem,
};

/// `*` and every `<resource>:read` and `<resource>:write`.
fn scope_names(schema: &mut schemars::Schema) {
    items_enum(schema, &crm_app::Scopes::options());
}

/// A key to create, in the mode of the calling key.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct KeyCreate {
    /// What the key is for, e.g. `ci` or `billing agent`.
    #[schemars(required, pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// `*`, or any of `<resource>:read` / `<resource>:write` (write implies read) for resources
    /// contacts, companies, deals, activities, pipelines, registry, automations, sequences,
    /// webhooks, connections, templates, settings, usage, events, emails, keys, audit, erase, users. Only scopes the
    /// calling key holds itself can be granted.
    #[schemars(required, transform = scope_names, length(min = 1))]
    pub scopes: Option<Vec<String>>,
}

/// A key's new name.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct KeyUpdate {
    /// The key's new name.
    #[schemars(required, pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
}

/// How to roll a key.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct KeyRoll {
    /// How long the old secret keeps working, 0 (default: it stops at once) to 604800 (7 days).
    #[schemars(with = "Option<u64>", range(max = crm_app::keys::MAX_EXPIRE_OLD_AFTER_SECONDS))]
    pub expire_old_after_seconds: Option<f64>,
}

/// Whole seconds given as any JSON number without a fraction (decisions §17).
fn whole_seconds(v: Option<f64>) -> Result<Option<u64>, Problem> {
    match v {
        None => Ok(None),
        Some(n) if n.fract() == 0.0 && n >= 0.0 && n <= u64::MAX as f64 => Ok(Some(n as u64)),
        Some(_) => Err(Problem::validation(
            "expire_old_after_seconds",
            "expire_old_after_seconds must be a whole number of seconds ≥ 0",
        )),
    }
}

handler!(list(api, caller, input) {
    let page = api.app.list_keys(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<KeyBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: KeyCreate = body::parse(input.body.as_ref(), None)?;
    let new = api.app.create_key(caller, c.name, c.scopes).await?;
    Ok(Reply::serialized(&KeyWithSecretBody::from(&new)))
});

handler!(get(api, caller, input) {
    let key = api.app.get_key(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&KeyBody::from(&key)))
});

handler!(update(api, caller, input) {
    let u: KeyUpdate = body::parse(input.body.as_ref(), None)?;
    let key = api.app.rename_key(caller, input.path_param("id"), u.name).await?;
    Ok(Reply::serialized(&KeyBody::from(&key)))
});

handler!(revoke(api, caller, input) {
    let key = api.app.revoke_key(caller, input.path_param("id")).await?;
    let revoked_at = key.revoked_at.map(|t| t.to_string());
    Ok(Reply::new(json!({"id": key.id.as_str(), "object": "key", "deleted": true, "revoked_at": revoked_at})))
});

handler!(roll(api, caller, input) {
    let r: KeyRoll = body::parse(input.body.as_ref(), None)?;
    let new = api.app.roll_key(caller, input.path_param("id"), whole_seconds(r.expire_old_after_seconds)?).await?;
    Ok(Reply::serialized(&KeyWithSecretBody::from(&new)))
});

fn revoked_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "key"},
            "deleted": {"const": true},
            "revoked_at": {"type": "string"},
        },
        "required": ["id", "object", "deleted", "revoked_at"],
    })
}

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("keys");
    let write = Scope::write("keys");
    vec![
        Operation {
            name: "svc_list_keys",
            method: Method::Get,
            path: "/keys",
            summary: "List API keys",
            description: "API keys of this mode, revoked ones included, without secrets.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<KeyBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_key",
            method: Method::Post,
            path: "/keys",
            summary: "Create an API key",
            description: "Creates an API key; its `secret` is shown once. A key grants only scopes it holds itself.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<KeyCreate>()),
            output: Output::of::<KeyWithSecretBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: create,
        },
        Operation {
            name: "svc_get_key",
            method: Method::Get,
            path: "/keys/{id}",
            summary: "Get an API key",
            description: "One API key, without its secret.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<KeyBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_key",
            method: Method::Patch,
            path: "/keys/{id}",
            summary: "Rename an API key",
            description: "Renames a key (`name`); its secret and scopes stay.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<KeyUpdate>()),
            output: Output::of::<KeyBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_revoke_key",
            method: Method::Delete,
            path: "/keys/{id}",
            summary: "Revoke an API key",
            description: "Revokes a key at once, on every server.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::written(revoked_schema),
            hints: Hints::DELETE.no_dry_run(),
            handler: revoke,
        },
        Operation {
            name: "svc_roll_key",
            method: Method::Post,
            path: "/keys/{id}/roll",
            summary: "Roll an API key",
            description: "Replaces a key with a new one (new secret shown once); the old one expires after `expire_old_after_seconds`.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<KeyRoll>()),
            output: Output::of::<KeyWithSecretBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: roll,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_app::{auth::ApiKeyRecord, keys::NewKey};

    #[test]
    fn the_output_schemas_describe_the_rendered_key() {
        let key = ApiKeyRecord {
            id: crm_domain::ApiKeyId::from_uuid(uuid::Uuid::nil()),
            workspace_id: crm_domain::WorkspaceId::from_uuid(uuid::Uuid::nil()),
            mode: crm_domain::Mode::Test,
            name: "n".into(),
            scopes: vec!["*".into()],
            key_hash: "h".into(),
            created_at: crm_domain::Timestamp::from_millis(0),
            last_used_at: None,
            revoked_at: None,
            expires_at: None,
        };
        crate::bodies::assert_schema_describes(&KeyBody::from(&key));
        let new = NewKey {
            key,
            secret: "svc_test_x".into(),
        };
        crate::bodies::assert_schema_describes(&KeyWithSecretBody::from(&new));
    }

    #[test]
    fn seconds_accept_whole_numbers_only() {
        assert_eq!(whole_seconds(Some(3.0)).unwrap(), Some(3));
        assert_eq!(whole_seconds(None).unwrap(), None);
        assert!(whole_seconds(Some(3.5)).is_err());
        assert!(whole_seconds(Some(-1.0)).is_err());
    }
}
