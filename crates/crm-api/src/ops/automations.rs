//! Automations: `/automations` and `/automations/{id}/runs` (spec, "Automation"; decisions §12).

use crm_app::{automations::AutomationPatch, Scope};
use crm_domain::rule::AutomationDraft;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::handler;
use crate::{
    bodies::{ActionBody, AutomationBody, AutomationRunBody, ConditionBody, DeletedBody, ListBody},
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
};

/// A rule to create.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AutomationCreate {
    #[schemars(required, pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// contact.created, contact.updated, deal.created, deal.updated or deal.stage_changed.
    #[schemars(required, extend("enum" = ["contact.created", "contact.updated", "deal.created", "deal.updated", "deal.stage_changed"]))]
    pub trigger_event: Option<String>,
    /// Conditions combined with AND (default: none, the rule fires on every such event).
    #[schemars(with = "Option<Vec<ConditionBody>>", length(max = crm_domain::rule::MAX_CONDITIONS))]
    pub conditions: Option<Value>,
    /// One or more actions, run in order.
    #[schemars(with = "Option<Vec<ActionBody>>", required, length(min = 1, max = crm_domain::rule::MAX_ACTIONS))]
    pub actions: Option<Value>,
    /// Default true. An enabled rule counts against the plan's active-automation cap.
    pub enabled: Option<bool>,
}

/// Fields to change; the rule that results is validated like a new one.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AutomationUpdate {
    #[schemars(pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    pub trigger_event: Option<String>,
    #[schemars(with = "Option<Vec<ConditionBody>>", length(max = crm_domain::rule::MAX_CONDITIONS))]
    pub conditions: Option<Value>,
    #[schemars(with = "Option<Vec<ActionBody>>", length(min = 1, max = crm_domain::rule::MAX_ACTIONS))]
    pub actions: Option<Value>,
    /// Enabling a disabled rule checks the plan's cap again.
    pub enabled: Option<bool>,
}

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

handler!(list(api, caller, input) {
    let page = api.app.list_automations(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<AutomationBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: AutomationCreate = body::parse(input.body.as_ref(), None)?;
    let draft = AutomationDraft { name: c.name, trigger_event: c.trigger_event, conditions: c.conditions, actions: c.actions };
    let automation = api.app.create_automation(caller, draft, c.enabled.unwrap_or(true)).await?;
    Ok(Reply::versioned(&AutomationBody::from(&automation)))
});

handler!(get(api, caller, input) {
    let automation = api.app.get_automation(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&AutomationBody::from(&automation)))
});

handler!(update(api, caller, input) {
    let u: AutomationUpdate = body::parse(input.body.as_ref(), None)?;
    let patch = AutomationPatch { name: u.name, trigger_event: u.trigger_event, conditions: u.conditions, actions: u.actions, enabled: u.enabled };
    let automation = api.app.update_automation(caller, input.path_param("id"), patch).await?;
    Ok(Reply::versioned(&AutomationBody::from(&automation)))
});

handler!(delete(api, caller, input) {
    let id = api.app.delete_automation(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(id.as_str(), "automation")))
});

handler!(runs(api, caller, input) {
    let page = api.app.list_automation_runs(caller, input.path_param("id"), input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<AutomationRunBody>::of(page)))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("automations");
    let write = Scope::write("automations");
    vec![
        Operation {
            name: "svc_list_automations",
            method: Method::Get,
            path: "/automations",
            summary: "List automations",
            description: "Automation rules of this mode.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<AutomationBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_automation",
            method: Method::Post,
            path: "/automations",
            summary: "Create an automation",
            description: "Installs a rule: on `trigger_event`, when every condition holds, its actions run inside the triggering write. See svc_get_automation_capabilities. A retry installs a second copy: list first.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<AutomationCreate>()),
            output: Output::of::<AutomationBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_get_automation",
            method: Method::Get,
            path: "/automations/{id}",
            summary: "Get an automation",
            description: "One automation rule.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<AutomationBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_automation",
            method: Method::Patch,
            path: "/automations/{id}",
            summary: "Update an automation",
            description: "Sets the fields sent, checked as on create; `enabled` pauses or resumes the rule.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<AutomationUpdate>()),
            output: Output::of::<AutomationBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_automation",
            method: Method::Delete,
            path: "/automations/{id}",
            summary: "Delete an automation",
            description: "Deletes a rule and its runs for good.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<DeletedBody>(),
            hints: Hints::DELETE,
            handler: delete,
        },
        Operation {
            name: "svc_list_automation_runs",
            method: Method::Get,
            path: "/automations/{id}/runs",
            summary: "List an automation's runs",
            description: "The rule's evaluations, newest first: whether it matched and each action's outcome.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<AutomationRunBody>>(),
            hints: Hints::READ,
            handler: runs,
        },
    ]
}
