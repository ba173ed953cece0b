//! Activities: `/activities`, newest first by `occurred_at`.

use crm_app::{ports::ActivityFilter, Scope};
use crm_domain::{ActivityDraft, ActivityPatch, ContactId, DealId, JsonMap};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{filter_value, handler, if_match};
use crate::view::{self, Shape};
use crate::{
    bodies::{ActivityBody, DeletedBody, ListBody},
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    schema::PatchField,
    Problem,
};

const REGISTER_HINT: &str =
    "custom fields go under `custom_fields`; register the key first with POST /fields";

/// An activity to record.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ActivityCreate {
    /// A registered `activity.type` value: note, call, email, task, or one added with POST /enums.
    #[serde(rename = "type")]
    #[schemars(required, pattern(crate::schema::NON_BLANK))]
    pub activity_type: Option<String>,
    #[schemars(pattern(crm_domain::ContactId::PATTERN))]
    pub contact_id: Option<String>,
    #[schemars(pattern(crm_domain::DealId::PATTERN))]
    pub deal_id: Option<String>,
    #[schemars(length(max = 100000))]
    pub body: Option<String>,
    /// When it happened (RFC 3339); defaults to now, may be in the past.
    #[schemars(extend("anyOf" = [{"format": "date-time"}, {"pattern": crate::schema::BLANK}]))]
    pub occurred_at: Option<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ActivityUpdate {
    #[serde(default, rename = "type")]
    #[schemars(with = "String", pattern(crate::schema::NON_BLANK))]
    pub activity_type: PatchField<String>,
    #[serde(default)]
    #[schemars(pattern(crm_domain::ContactId::PATTERN))]
    pub contact_id: PatchField<String>,
    #[serde(default)]
    #[schemars(pattern(crm_domain::DealId::PATTERN))]
    pub deal_id: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = 100000))]
    pub body: PatchField<String>,
    #[serde(default)]
    #[schemars(with = "String", extend("format" = "date-time"))]
    // null is refused: an activity always has a time
    pub occurred_at: PatchField<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// What a get of one record takes: its shape (decisions §19).
const GET_QUERY: &[QueryParam] = &[view::ACTIVITY_FIELDS, view::ACTIVITY_EXPAND];

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::id_filter(
        "contact_id",
        crm_domain::ContactId::PATTERN,
        "Activities of this contact.",
    ),
    QueryParam::id_filter(
        "deal_id",
        crm_domain::DealId::PATTERN,
        "Activities of this deal.",
    ),
    QueryParam::string("type", "A registered `activity.type` value."),
    LIMIT,
    CURSOR,
    view::ACTIVITY_FIELDS,
    view::ACTIVITY_EXPAND,
];

/// The activity list's filters as `input` sends them (the list and exports read them alike).
pub(crate) fn filter(input: &crate::operation::Input) -> Result<ActivityFilter, Problem> {
    let contact_id = match filter_value(input, "contact_id") {
        Some(raw) => Some(
            ContactId::parse(&raw).map_err(|e| Problem::validation("contact_id", e.to_string()))?,
        ),
        None => None,
    };
    let deal_id = match filter_value(input, "deal_id") {
        Some(raw) => {
            Some(DealId::parse(&raw).map_err(|e| Problem::validation("deal_id", e.to_string()))?)
        }
        None => None,
    };
    Ok(ActivityFilter {
        contact_id,
        deal_id,
        activity_type: filter_value(input, "type"),
    })
}

handler!(list(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::ACTIVITY).await?;
    let filter = filter(&input)?;
    let page = api.app.list_activities(caller, filter, input.page()?).await?;
    let list = ListBody::<ActivityBody>::of(page);
    match shape {
        None => Ok(Reply::serialized(&list)),
        Some(shape) => shape.page(api, caller, list).await,
    }
});

handler!(create(api, caller, input) {
    let c: ActivityCreate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let draft = ActivityDraft {
        activity_type: c.activity_type,
        contact_id: c.contact_id,
        deal_id: c.deal_id,
        body: c.body,
        occurred_at: c.occurred_at,
        custom_fields: c.custom_fields.unwrap_or_default(),
    };
    let activity = api.app.create_activity(caller, draft, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&ActivityBody::from(&activity)))
});

handler!(get(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::ACTIVITY).await?;
    let activity = api.app.get_activity(caller, input.path_param("id")).await?;
    let body = ActivityBody::from(&activity);
    match shape {
        None => Ok(Reply::versioned(&body)),
        Some(shape) => shape.one(api, caller, &body).await,
    }
});

handler!(update(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let u: ActivityUpdate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let patch = ActivityPatch {
        activity_type: u.activity_type.into_patch(),
        contact_id: u.contact_id.into_patch(),
        deal_id: u.deal_id.into_patch(),
        body: u.body.into_patch(),
        occurred_at: u.occurred_at.into_patch(),
        custom_fields: u.custom_fields,
    };
    let activity = api.app.update_activity(caller, input.path_param("id"), patch, expected).await?;
    Ok(Reply::versioned(&ActivityBody::from(&activity)))
});

handler!(delete(api, caller, input) {
    let activity = api.app.delete_activity(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(activity.id.as_str(), "activity")))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("activities");
    let write = Scope::write("activities");
    vec![
        Operation {
            name: "svc_list_activities",
            method: Method::Get,
            path: "/activities",
            summary: "List activities",
            description: "Activities newest first by `occurred_at`.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<ActivityBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_activity",
            method: Method::Post,
            path: "/activities",
            summary: "Record an activity",
            description: "Records a note, call, email or task on a contact and/or deal; `type` is a registered activity.type value.",
            scope: write,
            idempotency_key: true,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<ActivityCreate>()),
            output: Output::of::<ActivityBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_get_activity",
            method: Method::Get,
            path: "/activities/{id}",
            summary: "Get an activity",
            description: "One activity.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: GET_QUERY,
            body: None,
            output: Output::of::<ActivityBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_activity",
            method: Method::Patch,
            path: "/activities/{id}",
            summary: "Update an activity",
            description: "Sets the fields sent; null clears one.",
            scope: write,
            idempotency_key: false,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<ActivityUpdate>()),
            output: Output::of::<ActivityBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_activity",
            method: Method::Delete,
            path: "/activities/{id}",
            summary: "Delete an activity",
            description: "Deletes an activity for good.",
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
    ]
}
