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

/// Every operation of the service.
pub fn catalog() -> &'static [Operation] {
    static CATALOG: OnceLock<Vec<Operation>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        [
            ops::contacts::operations(),
            ops::companies::operations(),
            ops::pipelines::operations(),
            ops::deals::operations(),
            ops::activities::operations(),
            ops::search::operations(),
            ops::batch::operations(),
            ops::events::operations(),
            ops::history::operations(),
            ops::registry::operations(),
            ops::discovery::operations(),
            ops::keys::operations(),
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

    #[test]
    fn idempotency_keys_only_on_creates() {
        for op in catalog() {
            if op.idempotency_key {
                assert_eq!(op.method, Method::Post, "{}", op.name);
            }
        }
    }
}
