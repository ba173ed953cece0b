//! Email: `/connections` (the workspace's own sending key), `/templates` and `/emails` (every
//! email sent or simulated). Decisions §3 and §13.

use crm_app::{emails::TemplatePatch, ports::EmailFilter, Scope};
use crm_domain::{
    mail::{ConnectionDraft, EmailStatus, TemplateDraft},
    ContactId, DealId,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{filter_value, handler};
use crate::{
    bodies::{ConnectionBody, DeletedBody, EmailBody, ListBody, TemplateBody},
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    schema::PatchField,
    Problem,
};

/// An email sending account of the workspace (spec, "Connection").
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = base_url_by_provider)]
pub struct ConnectionCreate {
    /// `email` (the default and only channel).
    #[schemars(extend("enum" = ["email", null]))]
    pub channel: Option<String>,
    /// resend, postmark, sendgrid or smtp.
    #[schemars(required, extend("enum" = ["resend", "postmark", "sendgrid", "smtp"]))]
    pub provider: Option<String>,
    /// The provider's sending key (SMTP: the password). Write-only: responses show `api_key_last4`.
    #[schemars(required, pattern(crate::schema::NON_BLANK))]
    pub api_key: Option<String>,
    /// The sender, `addr@example.com` or `Name <addr@example.com>`; the provider must allow it.
    #[schemars(required, pattern(crate::schema::SENDER))]
    pub from: Option<String>,
    /// Overrides the provider's API host (e.g. a regional endpoint). For smtp, required:
    /// `smtp://[user@]host[:port]` (add `?tls=required` for STARTTLS) or `smtps://[user@]host[:port]`.
    pub base_url: Option<String>,
}

/// `base_url` by provider (`crm_domain::mail::Connection::create`): smtp needs an smtp(s) URL,
/// the HTTP providers take an http(s) URL or none (blank is none).
fn base_url_by_provider(schema: &mut schemars::Schema) {
    schema.insert(
        "anyOf".into(),
        serde_json::json!([
            {"required": ["base_url"], "properties": {
                "provider": {"const": "smtp"},
                "base_url": {"type": "string", "pattern": crate::schema::SMTP_URL},
            }},
            {"properties": {
                "provider": {"enum": ["resend", "postmark", "sendgrid"]},
                "base_url": {"type": ["string", "null"], "pattern": crate::schema::HTTP_URL_OR_BLANK},
            }},
        ]),
    );
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TemplateCreate {
    #[schemars(required, length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// `{{field}}` placeholders allowed.
    #[schemars(required, length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub subject: Option<String>,
    /// The HTML part; placeholders are filled HTML-escaped.
    // Length and shape as two subschemas: with both on one string of up to 100,000
    // characters, schemathesis's coverage phase builds no valid body and sends a non-object one.
    #[schemars(required, length(max = 100000), extend("allOf" = [{"pattern": crate::schema::NON_BLANK}]))]
    pub body: Option<String>,
    /// A plain-text part; derived from `body` when absent.
    #[schemars(length(max = 100000))]
    pub text: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TemplateUpdate {
    #[schemars(length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    #[schemars(length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub subject: Option<String>,
    // Length and shape as two subschemas: with both on one string of up to 100,000
    // characters, schemathesis's coverage phase builds no valid body and sends a non-object one.
    #[schemars(length(max = 100000), extend("allOf" = [{"pattern": crate::schema::NON_BLANK}]))]
    pub body: Option<String>,
    /// null removes the text part (it is then derived from `body`).
    #[serde(default)]
    #[schemars(length(max = 100000))]
    pub text: PatchField<String>,
}

const PAGE_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

const EMAIL_QUERY: &[QueryParam] = &[
    QueryParam::id_filter(
        "contact_id",
        crm_domain::ContactId::PATTERN,
        "Emails to or logged on this contact.",
    ),
    QueryParam::id_filter(
        "deal_id",
        crm_domain::DealId::PATTERN,
        "Emails about this deal.",
    ),
    QueryParam::string("status", "simulated, queued, sent or failed."),
    LIMIT,
    CURSOR,
];

handler!(list_connections(api, caller, input) {
    let page = api.app.list_connections(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<ConnectionBody>::of(page)))
});

handler!(create_connection(api, caller, input) {
    let c: ConnectionCreate = body::parse(input.body.as_ref(), None)?;
    let draft = ConnectionDraft { channel: c.channel, provider: c.provider, api_key: c.api_key, from: c.from, base_url: c.base_url };
    let connection = api.app.create_connection(caller, draft).await?;
    Ok(Reply::serialized(&ConnectionBody::from(&connection)))
});

handler!(get_connection(api, caller, input) {
    let connection = api.app.get_connection(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&ConnectionBody::from(&connection)))
});

handler!(delete_connection(api, caller, input) {
    let id = api.app.delete_connection(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(id.as_str(), "connection")))
});

handler!(list_templates(api, caller, input) {
    let page = api.app.list_templates(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<TemplateBody>::of(page)))
});

handler!(create_template(api, caller, input) {
    let c: TemplateCreate = body::parse(input.body.as_ref(), None)?;
    let template = api.app.create_template(caller, TemplateDraft { name: c.name, subject: c.subject, body: c.body, text: c.text }).await?;
    Ok(Reply::versioned(&TemplateBody::from(&template)))
});

handler!(get_template(api, caller, input) {
    let template = api.app.get_template(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&TemplateBody::from(&template)))
});

handler!(update_template(api, caller, input) {
    let u: TemplateUpdate = body::parse(input.body.as_ref(), None)?;
    let text = u.text.into_patch();
    let clear_text = matches!(text, crm_domain::Patch::Null);
    let text = match text {
        crm_domain::Patch::Value(t) => Some(t),
        _ => None,
    };
    let patch = TemplatePatch { draft: TemplateDraft { name: u.name, subject: u.subject, body: u.body, text }, clear_text };
    let template = api.app.update_template(caller, input.path_param("id"), patch).await?;
    Ok(Reply::versioned(&TemplateBody::from(&template)))
});

handler!(delete_template(api, caller, input) {
    let id = api.app.delete_template(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(id.as_str(), "template")))
});

handler!(list_emails(api, caller, input) {
    let contact_id = match filter_value(&input, "contact_id") {
        Some(raw) => Some(ContactId::parse(&raw).map_err(|e| Problem::validation("contact_id", e.to_string()))?),
        None => None,
    };
    let deal_id = match filter_value(&input, "deal_id") {
        Some(raw) => Some(DealId::parse(&raw).map_err(|e| Problem::validation("deal_id", e.to_string()))?),
        None => None,
    };
    let status = match filter_value(&input, "status") {
        Some(raw) => Some(EmailStatus::parse(&raw).ok_or_else(|| {
            Problem::from(crm_domain::ValidationError::UnknownValue {
                field: "status".into(),
                value: raw.clone(),
                valid_options: EmailStatus::ALL.iter().map(|s| s.as_str().to_owned()).collect(),
            })
        })?),
        None => None,
    };
    let page = api.app.list_emails(caller, EmailFilter { contact_id, deal_id, status }, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<EmailBody>::of(page)))
});

handler!(get_email(api, caller, input) {
    let email = api.app.get_email(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&EmailBody::from(&email)))
});

#[allow(clippy::too_many_arguments)]
fn op(
    name: &'static str,
    method: Method,
    path: &'static str,
    summary: &'static str,
    description: &'static str,
    scope: Scope,
    query: &'static [QueryParam],
    body: Option<Output>,
    output: Output,
    handler: crate::operation::Handler,
) -> Operation {
    let (success_status, hints) = match method {
        Method::Get => (200, Hints::READ),
        Method::Post => (201, Hints::CREATE),
        Method::Patch => (200, Hints::UPDATE),
        Method::Delete => (200, Hints::DELETE),
    };
    // A connection holds a provider's key: a secret, so no dry run (decisions §24).
    let hints = if path.starts_with("/connections") {
        hints.no_dry_run()
    } else {
        hints
    };
    Operation {
        name,
        method,
        path,
        summary,
        description,
        scope,
        idempotency_key: false,
        if_match: false,
        success_status,
        query,
        body,
        output,
        hints,
        handler,
    }
}

pub fn operations() -> Vec<Operation> {
    let (conn_read, conn_write) = (Scope::read("connections"), Scope::write("connections"));
    let (tpl_read, tpl_write) = (Scope::read("templates"), Scope::write("templates"));
    let emails_read = Scope::read("emails");
    vec![
        op("svc_list_connections", Method::Get, "/connections", "List connections",
            "Email connections of this mode; the newest one sends.",
            conn_read, PAGE_QUERY, None, Output::of::<ListBody<ConnectionBody>>(), list_connections),
        op("svc_create_connection", Method::Post, "/connections", "Connect an email provider",
            "Connects the workspace's email account (resend, postmark, sendgrid or smtp). Live sends use the newest connection; test mode never delivers.",
            conn_write, &[], Some(Output::of::<ConnectionCreate>()), Output::of::<ConnectionBody>(), create_connection),
        op("svc_get_connection", Method::Get, "/connections/{id}", "Get a connection",
            "One connection, without its key.",
            conn_read, &[], None, Output::of::<ConnectionBody>(), get_connection),
        op("svc_delete_connection", Method::Delete, "/connections/{id}", "Delete a connection",
            "Deletes a connection; queued live emails wait for another.",
            conn_write, &[], None, Output::of::<DeletedBody>(), delete_connection),
        op("svc_list_templates", Method::Get, "/templates", "List templates",
            "Email templates.",
            tpl_read, PAGE_QUERY, None, Output::of::<ListBody<TemplateBody>>(), list_templates),
        op("svc_create_template", Method::Post, "/templates", "Create a template",
            "Creates an email template with `{{field}}` placeholders, for send_email actions and sequence steps.",
            tpl_write, &[], Some(Output::of::<TemplateCreate>()), Output::of::<TemplateBody>(), create_template),
        op("svc_get_template", Method::Get, "/templates/{id}", "Get a template",
            "One email template.",
            tpl_read, &[], None, Output::of::<TemplateBody>(), get_template),
        op("svc_update_template", Method::Patch, "/templates/{id}", "Update a template",
            "Sets the fields sent; `text: null` removes the text part.",
            tpl_write, &[], Some(Output::of::<TemplateUpdate>()), Output::of::<TemplateBody>(), update_template),
        op("svc_delete_template", Method::Delete, "/templates/{id}", "Delete a template",
            "Deletes a template; rules still naming it fail when they run.",
            tpl_write, &[], None, Output::of::<DeletedBody>(), delete_template),
        op("svc_list_emails", Method::Get, "/emails", "List emails",
            "Emails sent (live) or simulated (test), newest first, with status and source.",
            emails_read, EMAIL_QUERY, None, Output::of::<ListBody<EmailBody>>(), list_emails),
        op("svc_get_email", Method::Get, "/emails/{id}", "Get an email",
            "One email.",
            emails_read, &[], None, Output::of::<EmailBody>(), get_email),
    ]
}
