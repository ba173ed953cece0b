//! Webhooks: `/webhooks`, their secret (shown at creation and when rolled), and the log of their
//! delivery attempts (spec "Webhook", "Events"; decisions §3, §11).

use crm_app::{webhooks::WebhookPatch, Scope};
use crm_domain::{Patch, Subscription};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{handler, if_match};
use crate::{
    bodies::{
        DeletedBody, DeliveryAttemptBody, DeliveryBody, ListBody, WebhookBody,
        WebhookWithSecretBody,
    },
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    schema::{items_enum, PatchField},
};

/// The names `events` takes, from the domain's list: `*` or an event type.
fn event_names(schema: &mut schemars::Schema) {
    items_enum(schema, &Subscription::valid_options());
    // `*` subscribes to everything and must stand alone.
    schema.insert(
        "not".into(),
        serde_json::json!({"type": "array", "contains": {"const": "*"}, "minItems": 2}),
    );
}

/// A webhook to register.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebhookCreate {
    /// Where deliveries are POSTed. Live mode: a public `https` URL (hosts that are or resolve to
    /// loopback, private, link-local, unique-local, CGNAT, multicast or cloud-metadata addresses
    /// are refused). Test mode may also use `http` and loopback (`http://127.0.0.1:9000/hook`).
    #[schemars(required, length(max = 2048), pattern(crate::schema::WEBHOOK_URL))]
    pub url: Option<String>,
    /// Event types to receive: any of `contact.created`, `contact.updated`, `deal.created`,
    /// `deal.updated`, `deal.stage_changed`; or `["*"]` for all.
    #[schemars(required, transform = event_names, length(min = 1))]
    pub events: Option<Vec<String>>,
    /// What the webhook is for (at most 500 characters).
    pub description: Option<String>,
}

/// Changes to a webhook; fields not sent stay as they are.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebhookUpdate {
    #[schemars(length(max = 2048), pattern(crate::schema::WEBHOOK_URL))]
    pub url: Option<String>,
    #[schemars(transform = event_names, length(min = 1))]
    pub events: Option<Vec<String>>,
    /// `null` clears it.
    #[serde(default)]
    pub description: PatchField<String>,
    /// A disabled webhook gets no new deliveries, and its pending ones wait until it is enabled.
    pub enabled: Option<bool>,
}

handler!(list(api, caller, input) {
    let page = api.app.list_webhooks(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<WebhookBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: WebhookCreate = body::parse(input.body.as_ref(), None)?;
    let hook = api.app.create_webhook(caller, c.url, c.events, c.description).await?;
    Ok(Reply::versioned(&WebhookWithSecretBody::from(&hook)))
});

handler!(get(api, caller, input) {
    let hook = api.app.get_webhook(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&WebhookBody::from(&hook)))
});

handler!(update(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let u: WebhookUpdate = body::parse(input.body.as_ref(), None)?;
    let description = match u.description.into_patch() {
        Patch::Absent => None,
        Patch::Null => Some(None),
        Patch::Value(v) => Some(Some(v)),
    };
    let patch = WebhookPatch { url: u.url, events: u.events, description, enabled: u.enabled };
    let hook = api.app.update_webhook(caller, input.path_param("id"), patch, expected).await?;
    Ok(Reply::versioned(&WebhookBody::from(&hook)))
});

handler!(delete(api, caller, input) {
    let id = api.app.delete_webhook(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(id.as_str(), "webhook")))
});

handler!(roll_secret(api, caller, input) {
    let hook = api.app.roll_webhook_secret(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&WebhookWithSecretBody::from(&hook)))
});

handler!(list_deliveries(api, caller, input) {
    let page = api.app.list_webhook_deliveries(caller, input.path_param("id"), input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<DeliveryAttemptBody>::of(page)))
});

handler!(retry_delivery(api, caller, input) {
    let d = api.app.retry_webhook_delivery(caller, input.path_param("id"), input.path_param("dlv_id")).await?;
    Ok(Reply::serialized(&DeliveryBody::from(&d)))
});

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("webhooks");
    let write = Scope::write("webhooks");
    vec![
        Operation {
            name: "svc_list_webhooks",
            method: Method::Get,
            path: "/webhooks",
            summary: "List webhooks",
            description: "Webhooks of this mode, without secrets.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<WebhookBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_webhook",
            method: Method::Post,
            path: "/webhooks",
            summary: "Create a webhook",
            description: "Sends `events` of this mode to `url`, signed with the `secret` shown once (Svc-Signature: HMAC-SHA256 of \"t.body\"). Failures retry for about 9 hours, then dead-letter.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<WebhookCreate>()),
            output: Output::of::<WebhookWithSecretBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_get_webhook",
            method: Method::Get,
            path: "/webhooks/{id}",
            summary: "Get a webhook",
            description: "One webhook, without its secret.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<WebhookBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_webhook",
            method: Method::Patch,
            path: "/webhooks/{id}",
            summary: "Update a webhook",
            description: "Sets the fields sent; a disabled webhook gets no deliveries.",
            scope: write,
            idempotency_key: false,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<WebhookUpdate>()),
            output: Output::of::<WebhookBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_webhook",
            method: Method::Delete,
            path: "/webhooks/{id}",
            summary: "Delete a webhook",
            description: "Deletes a webhook for good, with its pending deliveries.",
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
            name: "svc_roll_webhook_secret",
            method: Method::Post,
            path: "/webhooks/{id}/roll-secret",
            summary: "Roll a webhook's signing secret",
            description: "Replaces the signing secret; the new one is shown once.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<WebhookWithSecretBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: roll_secret,
        },
        Operation {
            name: "svc_list_webhook_deliveries",
            method: Method::Get,
            path: "/webhooks/{id}/deliveries",
            summary: "List a webhook's delivery attempts",
            description: "Every delivery attempt of the webhook, newest first, with its status and response.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<DeliveryAttemptBody>>(),
            hints: Hints::READ,
            handler: list_deliveries,
        },
        Operation {
            name: "svc_retry_webhook_delivery",
            method: Method::Post,
            path: "/webhooks/{id}/deliveries/{dlv_id}/retry",
            summary: "Retry a dead-lettered delivery",
            description: "Queues a dead-lettered delivery for one more attempt now.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 202,
            query: &[],
            body: None,
            output: Output::of::<DeliveryBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: retry_delivery,
        },
    ]
}
