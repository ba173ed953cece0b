//! The operation catalog: every operation of the service, declared once. The REST router, the
//! OpenAPI document, the MCP tool list and the A2A skills are all derived from [`catalog`].
//!
//! The types an operation is declared with live in [`crate::operation`], re-exported here.

use std::sync::OnceLock;

pub use crate::operation::{
    Alias, Handler, HandlerFuture, Hints, Input, Method, Operation, ParamKind, QueryParam, Reply,
    ReplyBody, StaticBody, CURSOR, INCLUDE_DELETED, LIMIT, MAX_FIELD_FILTERS,
};
use crate::ops;

/// The second routes of operations ([`Alias`]).
pub const ALIASES: &[Alias] = &[
    Alias {
        operation: "svc_manage_stage",
        method: Method::Patch,
        path: "/pipelines/{pipeline}/stages/{key}",
        action: "update",
        query: &[],
        fields: &["label", "type", "position"],
    },
    Alias {
        operation: "svc_manage_stage",
        method: Method::Delete,
        path: "/pipelines/{pipeline}/stages/{key}",
        action: "remove",
        query: &[QueryParam::string("move_to", "The stage to move the removed stage's deals to; needed while deals sit in it (else 409 conflict).")],
        fields: &[],
    },
];

/// The toolsets of decisions §23: named groups of tools an agent may narrow its MCP tool list to
/// (`/mcp?toolsets=records,pipelines`), each by the scope resources of its operations. An
/// operation whose scope is decided per record (search, batch) is a `records` tool.
pub const TOOLSETS: &[(&str, &[&str])] = &[
    (
        "records",
        &["contacts", "companies", "deals", "activities", "imports"],
    ),
    ("pipelines", &["pipelines"]),
    ("registry", &["registry"]),
    ("automations", &["automations"]),
    (
        "sequences",
        &["sequences", "templates", "emails", "connections"],
    ),
    ("webhooks", &["webhooks", "events"]),
    ("admin", &["keys", "users", "settings", "usage", "audit"]),
];

/// The toolset `op` belongs to.
pub fn toolset_of(op: &Operation) -> &'static str {
    if op.scope == crm_app::Scope::PER_RECORD {
        return "records";
    }
    TOOLSETS
        .iter()
        .find(|(_, resources)| resources.contains(&op.scope.resource))
        .map_or("admin", |(name, _)| name)
}

/// Every toolset with the names of its tools, in catalog order (`GET /schema` lists these).
pub fn toolsets() -> Vec<(&'static str, Vec<&'static str>)> {
    TOOLSETS
        .iter()
        .map(|(name, _)| {
            let tools = catalog()
                .iter()
                .filter(|op| toolset_of(op) == *name)
                .map(|op| op.name)
                .collect();
            (*name, tools)
        })
        .collect()
}

/// The toolsets a comma-separated `raw` names (blanks dropped, each once), or 400 `bad_request`
/// with the valid names.
pub fn parse_toolsets(raw: &str) -> Result<Vec<&'static str>, crate::Problem> {
    let mut named = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some((known, _)) = TOOLSETS.iter().find(|(t, _)| *t == name) else {
            let valid: Vec<&str> = TOOLSETS.iter().map(|(t, _)| *t).collect();
            let mut p = crate::Problem::bad_request(format!("unknown toolset `{name}`"))
                .with("field", "toolsets")
                .with("valid_options", valid.clone());
            if let Some(s) = crm_domain::suggest::closest(name, valid) {
                p = p.with("suggestion", format!("did you mean `{s}`?"));
            }
            return Err(p);
        };
        if !named.contains(known) {
            named.push(*known);
        }
    }
    Ok(named)
}

/// Whether a key holding `scopes` may call `op`, so that an agent is shown it (decisions §19,
/// §23): its scope, or for an operation whose scope is decided per record the matching access to
/// any of contacts, companies and deals (search needs a read of one, batch a write).
pub fn allowed(op: &Operation, scopes: &crm_app::Scopes) -> bool {
    if op.scope != crm_app::Scope::PER_RECORD {
        return scopes.allows(op.scope);
    }
    let scope = if op.hints.read_only {
        crm_app::Scope::read
    } else {
        crm_app::Scope::write
    };
    ["contacts", "companies", "deals"]
        .into_iter()
        .any(|resource| scopes.allows(scope(resource)))
}

/// Every operation of the service.
pub fn catalog() -> &'static [Operation] {
    static CATALOG: OnceLock<Vec<Operation>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        [
            ops::contacts::operations(),
            ops::companies::operations(),
            ops::merges::operations(),
            ops::pipelines::operations(),
            ops::pipeline_totals::operations(),
            ops::deals::operations(),
            ops::activities::operations(),
            ops::search::operations(),
            ops::batch::operations(),
            ops::imports::operations(),
            ops::exports::operations(),
            ops::events::operations(),
            ops::history::operations(),
            ops::erase::operations(),
            ops::registry::operations(),
            ops::discovery::operations(),
            ops::keys::operations(),
            ops::users::operations(),
            ops::audit::operations(),
            ops::usage::operations(),
            ops::webhooks::operations(),
            ops::automations::operations(),
            ops::email::operations(),
            ops::sequences::operations(),
        ]
        .into_iter()
        .flatten()
        .collect()
    })
}

pub fn find(name: &str) -> Option<&'static Operation> {
    catalog().iter().find(|op| op.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_pattern_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for op in catalog() {
            assert!(
                op.name.starts_with("svc_") && op.name.split('_').count() >= 3,
                "{}",
                op.name
            );
            assert!(seen.insert(op.name), "duplicate {}", op.name);
            assert!(
                seen.insert(Box::leak(
                    format!("{} {}", op.method.as_str(), op.path).into_boxed_str()
                )),
                "duplicate route {}",
                op.path
            );
            assert!(!op.description.is_empty() && !op.summary.is_empty());
        }
    }

    #[test]
    fn extra_success_statuses_name_operations() {
        for (name, _) in crate::operation::ALSO_SUCCESS {
            assert!(find(name).is_some(), "{name}");
        }
    }

    /// An alias's query and body never carry what its route sets: the path parameters and `action`.
    #[test]
    fn aliases_take_their_own_fields_only() {
        for alias in ALIASES {
            let op = find(alias.operation).unwrap();
            let op_fields =
                crate::schema::property_names(&op.body.map(|b| b()).unwrap_or_default());
            let taken = alias
                .query
                .iter()
                .map(|q| q.name)
                .chain(alias.fields.iter().copied());
            for name in taken {
                assert!(
                    name != "action" && !alias.path_params().contains(&name),
                    "{} {}: {name}",
                    alias.method.as_str(),
                    alias.path
                );
                assert!(
                    op_fields.iter().any(|f| f == name),
                    "{} {}: {name} is not a field of {}",
                    alias.method.as_str(),
                    alias.path,
                    op.name
                );
            }
        }
    }

    /// Decisions §4, §19: every list endpoint pages with `limit` and `cursor`.
    #[test]
    fn every_list_takes_limit_and_cursor() {
        for op in catalog() {
            if (op.output)()["properties"]["object"]["const"] == "list" {
                for param in ["limit", "cursor"] {
                    assert!(
                        op.query.iter().any(|q| q.name == param),
                        "{} answers a list without `{param}`",
                        op.name
                    );
                }
            }
        }
    }

    /// Every tool is in a declared toolset by its scope, not by the fallback.
    #[test]
    fn every_operation_has_a_declared_toolset() {
        for op in catalog() {
            assert!(
                op.scope == crm_app::Scope::PER_RECORD
                    || TOOLSETS
                        .iter()
                        .any(|(_, resources)| resources.contains(&op.scope.resource)),
                "{} (scope {}) is in no toolset",
                op.name,
                op.scope
            );
        }
        let sets = toolsets();
        assert_eq!(
            sets.iter().map(|(_, tools)| tools.len()).sum::<usize>(),
            catalog().len()
        );
        assert!(sets[1].1.contains(&"svc_list_pipelines"));
    }

    #[test]
    fn toolsets_parse_and_unknown_ones_list_the_valid() {
        assert_eq!(
            parse_toolsets("pipelines, records,pipelines,").unwrap(),
            ["pipelines", "records"]
        );
        let p = parse_toolsets("records,pipeline").unwrap_err();
        assert_eq!(p.code, crate::ErrorCode::BadRequest);
        assert_eq!(
            p.extra["valid_options"].as_array().unwrap().len(),
            TOOLSETS.len()
        );
    }

    #[test]
    fn a_read_only_key_is_allowed_no_write() {
        let scopes = crm_app::Scopes(vec!["contacts:read".to_owned()]);
        let allowed: Vec<&str> = catalog()
            .iter()
            .filter(|op| allowed(op, &scopes))
            .map(|op| op.name)
            .collect();
        assert!(allowed.contains(&"svc_search_records"));
        assert!(allowed.contains(&"svc_get_contact"));
        assert!(!allowed.contains(&"svc_write_batch"));
        assert!(!allowed.contains(&"svc_list_deals"));
        for name in allowed {
            assert!(find(name).unwrap().hints.read_only, "{name}");
        }
    }

    #[test]
    fn idempotency_keys_only_on_creates() {
        for op in catalog() {
            if op.idempotency_key {
                assert_eq!(op.method, Method::Post, "{}", op.name);
            }
        }
    }
}
