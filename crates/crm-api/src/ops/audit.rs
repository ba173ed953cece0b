//! The audit log: `GET /audit` (decisions §25).

use crm_app::{ports::AuditFilter, Scope};

use super::handler;
use crate::{
    bodies::{AuditEntryBody, ListBody},
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
};

const LIST_QUERY: &[QueryParam] = &[
    LIMIT,
    CURSOR,
    QueryParam::string("action", "Only this action, e.g. key.created."),
    QueryParam::string("target_id", "Only entries about this id."),
    QueryParam::string("actor_id", "Only entries by this actor id."),
];

handler!(list(api, caller, input) {
    let text = |name: &str| input.query_str(name).filter(|v| !v.is_empty()).map(str::to_owned);
    let filter = AuditFilter {
        action: text("action"),
        target_id: text("target_id"),
        actor_id: text("actor_id"),
    };
    let page = api.app.list_audit(caller, filter, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<AuditEntryBody>::of(page)))
});

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_list_audit",
        method: Method::Get,
        path: "/audit",
        summary: "List the audit log",
        description: "Changes to keys, webhooks, connections, templates, automations, sequences, pipelines, registry, settings, plans and erasures, newest first; secrets redacted.",
        scope: Scope::read("audit"),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: LIST_QUERY,
        body: None,
        output: Output::of::<ListBody<AuditEntryBody>>(),
        hints: Hints::READ,
        handler: list,
    }]
}
