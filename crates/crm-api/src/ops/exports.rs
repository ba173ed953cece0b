//! Exports: `/exports` and `/contacts/{id}/export` (decisions §25).

use std::sync::OnceLock;

use futures::StreamExt;

use crm_app::{export_filter::ExportQuery, exports::ExportRequest, Scope};
use crm_domain::{export::ExportFormat, ObjectKind};
use schemars::JsonSchema;
use serde_json::{json, Value};

use super::handler;
use crate::{
    bodies::{ActivityBody, CompanyBody, ContactBody, ContactExportBody, DealBody, ExportBody},
    operation::{Hints, Input, Method, Operation, Output, ParamKind, QueryParam, Reply},
    reply_body::{FileReply, ReplyBody},
    schema::schema_of,
    Problem,
};

/// The filters each object's export takes: its list's (decisions §25).
const FILTERS: &[(ObjectKind, &[&str])] = &[
    (
        ObjectKind::Contact,
        &[
            "q",
            "email",
            "company_id",
            "type",
            "owner_id",
            "custom_fields",
            "include_deleted",
        ],
    ),
    (
        ObjectKind::Company,
        &["q", "domain", "owner_id", "include_deleted"],
    ),
    (
        ObjectKind::Deal,
        &[
            "q",
            "pipeline",
            "pipeline_id",
            "stage",
            "company_id",
            "primary_contact_id",
            "owner_id",
            "include_deleted",
        ],
    ),
    (ObjectKind::Activity, &["contact_id", "deal_id", "type"]),
];

const CREATE_QUERY: &[QueryParam] = &[
    QueryParam {
        name: "object",
        kind: ParamKind::Pattern("^(contact|company|deal|activity)$"),
        required: true,
        description: "contact, company, deal or activity.",
    },
    QueryParam::pattern("format", "^(csv|jsonl)?$", "csv (default) or jsonl."),
    QueryParam::string("q", "Contacts, companies, deals: as the object's list."),
    QueryParam::pattern(
        "email",
        crate::schema::EMAIL_OR_BLANK,
        "Contacts: exact email (case-insensitive); blank is no filter.",
    ),
    QueryParam::id_filter(
        "company_id",
        crm_domain::CompanyId::PATTERN,
        "Contacts, deals: `cmp_` id.",
    ),
    QueryParam::string("type", "Contacts, activities: a registered type."),
    QueryParam::id_filter(
        "owner_id",
        crm_domain::UserId::PATTERN,
        "The owner's `usr_` id.",
    ),
    QueryParam {
        name: "custom_fields",
        kind: ParamKind::FieldMap,
        required: false,
        description: "Contacts: `custom_fields.<key>=<value>` equality.",
    },
    QueryParam {
        name: "include_deleted",
        kind: ParamKind::Boolean,
        required: false,
        description: "Contacts, companies, deals: include soft-deleted records.",
    },
    QueryParam::string("domain", "Companies: domain."),
    QueryParam::string("pipeline", "Deals: pipeline key or id."),
    QueryParam::string("pipeline_id", "Deals: `pl_` id."),
    QueryParam::string("stage", "Deals: stage key."),
    QueryParam::id_filter(
        "primary_contact_id",
        crm_domain::ContactId::PATTERN,
        "Deals: `con_` id.",
    ),
    QueryParam::id_filter(
        "contact_id",
        crm_domain::ContactId::PATTERN,
        "Activities: `con_` id.",
    ),
    QueryParam::id_filter(
        "deal_id",
        crm_domain::DealId::PATTERN,
        "Activities: `deal_` id.",
    ),
];

/// The members of `object`'s list body, in order (the CSV columns), read from its schema once.
fn body_fields(object: ObjectKind) -> Vec<String> {
    static FIELDS: OnceLock<[Vec<String>; 4]> = OnceLock::new();
    let all = FIELDS.get_or_init(|| {
        let names = |schema: Value| -> Vec<String> {
            schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        };
        [
            names(schema_of::<ContactBody>()),
            names(schema_of::<CompanyBody>()),
            names(schema_of::<DealBody>()),
            names(schema_of::<ActivityBody>()),
        ]
    });
    let at = match object {
        ObjectKind::Contact => 0,
        ObjectKind::Company => 1,
        ObjectKind::Deal => 2,
        ObjectKind::Activity => 3,
    };
    all[at].clone()
}

/// Refuses a filter that `object`'s list does not take (422 naming it).
fn only_filters_of(object: ObjectKind, input: &Input) -> Result<(), Problem> {
    let allowed = FILTERS
        .iter()
        .find(|(o, _)| *o == object)
        .map_or(&[][..], |(_, f)| *f);
    for (name, value) in &input.query {
        let base = name.split(['.', '[']).next().unwrap_or(name);
        if matches!(base, "object" | "format") || value.trim().is_empty() {
            continue;
        }
        if !allowed.contains(&base) {
            return Err(Problem::validation(
                base,
                format!(
                    "`{base}` is not a filter of the {} list; it takes {}",
                    object.as_str(),
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

handler!(create(api, caller, input) {
    let object = ObjectKind::parse_input("object", input.query_str("object").unwrap_or_default())?;
    let format = match input.query_str("format") {
        None | Some("") => ExportFormat::Csv,
        Some(raw) => ExportFormat::parse(raw).ok_or_else(|| {
            Problem::validation("format", "format must be csv or jsonl")
                .with("valid_options", vec!["csv", "jsonl"])
        })?,
    };
    only_filters_of(object, &input)?;
    // The object's own scope first, so a key that may not read it learns that before any
    // filter is checked against its registry.
    caller.require(crm_app::exports::read_scope(object))?;
    let query = match object {
        ObjectKind::Contact => ExportQuery::Contact(super::contacts::filter(api, caller, &input).await?),
        ObjectKind::Company => ExportQuery::Company(super::companies::filter(&input)?),
        ObjectKind::Deal => ExportQuery::Deal(super::deals::query(&input)?),
        ObjectKind::Activity => ExportQuery::Activity(super::activities::filter(&input)?),
    };
    let request = ExportRequest { format, query, fields: body_fields(object) };
    let export = api.app.create_export(caller, request).await?;
    Ok(Reply::serialized(&ExportBody::new(&export, &api.errors_base_url)))
});

handler!(get(api, caller, input) {
    let export = api.app.get_export(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&ExportBody::new(&export, &api.errors_base_url)))
});

handler!(file(api, caller, input) {
    let file = api.app.export_file(caller, input.path_param("id")).await?;
    let export = &file.export;
    let notice = json!({
        "id": export.id.as_str(),
        "object": "export_file",
        "content_type": export.format.content_type(),
        "detail": format!("the file is served over REST: GET /v1/exports/{}/file", export.id),
    });
    let filename = format!("{}.{}", export.id, export.format.as_str());
    let content_type = export.format.content_type();
    let app = api.app.clone();
    // The next chunk is read from the database while the current one is sent.
    let pieces = futures::stream::iter(0..file.chunks)
        .map(move |seq| {
            let (app, file) = (app.clone(), file.clone());
            async move { app.export_chunk(&file, seq).await.map_err(Problem::from) }
        })
        .buffered(2);
    let body = ReplyBody::File(FileReply::new(content_type, filename, notice, Box::pin(pieces)));
    Ok(Reply { body, ..Reply::new(Value::Null) })
});

handler!(contact(api, caller, input) {
    let dossier = api.app.export_contact(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&ContactExportBody::from(&dossier)))
});

/// What MCP and A2A answer for the file: where REST serves it.
#[derive(JsonSchema)]
#[allow(dead_code)] // a schema only
struct FileNotice {
    id: String,
    /// `export_file`.
    object: String,
    content_type: String,
    detail: String,
}

pub fn operations() -> Vec<Operation> {
    vec![
        Operation {
            name: "svc_create_export",
            method: Method::Post,
            path: "/exports",
            summary: "Export a list",
            description: "Queues a CSV or JSON lines export of one object's list, with its list filters (202); a filter of another object's list is refused (422).",
            scope: Scope::PER_RECORD,
            idempotency_key: false,
            if_match: false,
            success_status: 202,
            query: CREATE_QUERY,
            body: None,
            output: Output::of::<ExportBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: create,
        },
        Operation {
            name: "svc_get_export",
            method: Method::Get,
            path: "/exports/{id}",
            summary: "Get an export",
            description: "An export's status and progress.",
            scope: Scope::PER_RECORD,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<ExportBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_get_export_file",
            method: Method::Get,
            path: "/exports/{id}/file",
            summary: "Download an export's file",
            description: "The completed file, over REST; 409 before completion.",
            scope: Scope::PER_RECORD,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<FileNotice>(),
            hints: Hints::READ,
            handler: file,
        },
        Operation {
            name: "svc_export_contact",
            method: Method::Get,
            path: "/contacts/{id}/export",
            summary: "Export everything held about a contact",
            description: "A contact with its activities, emails, history, enrollments and deals.",
            scope: Scope::read("contacts"),
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<ContactExportBody>(),
            hints: Hints::READ,
            handler: contact,
        },
    ]
}
