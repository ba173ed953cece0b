//! Bulk imports: `/imports` (decisions §20, §23, §24).

use std::collections::BTreeMap;

use crm_app::{
    imports::{ImportSettings, Received},
    Scope,
};
use crm_domain::{import::OnDuplicate, ObjectKind};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;

use super::handler;
use crate::{
    bodies::{ImportBody, ImportErrorBody, ListBody},
    body,
    operation::{
        Hints, Input, Method, Operation, Output, ParamKind, QueryParam, Reply, CURSOR, LIMIT,
    },
    Problem,
};

/// An import's file for agents: the CSV as one string (REST sends it as the `text/csv` body).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ImportCsv {
    /// The CSV text, header row first.
    pub csv: String,
}

/// The objects an import fills (`crm_domain::import::IMPORT_OBJECTS`), and what a taken key does
/// (`OnDuplicate`, blank for the default), as the document states them.
const OBJECT_PATTERN: &str = "^(contact|company|deal)$";
const ON_DUPLICATE_PATTERN: &str = "^(skip|update|error)?$";

const CREATE_QUERY: &[QueryParam] = &[
    QueryParam {
        name: "object",
        kind: ParamKind::Pattern(OBJECT_PATTERN),
        required: true,
        description: "contact, company or deal.",
    },
    QueryParam::pattern(
        "on_duplicate",
        ON_DUPLICATE_PATTERN,
        "Taken email or domain: skip, update or error (default).",
    ),
    QueryParam {
        name: "mapping",
        kind: ParamKind::Json(mapping_schema),
        required: false,
        description: "JSON object: CSV column to field.",
    },
    QueryParam {
        name: "dry_run",
        kind: ParamKind::Boolean,
        required: false,
        description: "Check every row, write none.",
    },
];

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

/// What `mapping` holds: CSV column names to the fields they fill.
fn mapping_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}})
}

/// `mapping`: a JSON object of strings.
fn mapping(raw: Option<&str>) -> Result<BTreeMap<String, String>, Problem> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_str(raw).map_err(|_| {
        Problem::validation(
            "mapping",
            "mapping must be a JSON object of CSV column names to target fields",
        )
    })
}

/// What the idempotency fingerprint takes of the request besides the file: the route and the
/// query, sorted (decisions §24).
fn request_fingerprint(input: &Input) -> String {
    let mut query: Vec<String> = input
        .query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    query.sort();
    format!("POST /imports?{}", query.join("&"))
}

handler!(create(api, caller, input) {
    let object = ObjectKind::parse_input("object", input.query_str("object").unwrap_or_default())?;
    let on_duplicate = match input.query_str("on_duplicate") {
        None | Some("") => OnDuplicate::default(),
        Some(raw) => OnDuplicate::parse_input("on_duplicate", raw)?,
    };
    let settings = ImportSettings {
        object,
        on_duplicate,
        dry_run: input.query_bool("dry_run")?,
        mapping: mapping(input.query_str("mapping"))?,
        idempotency_key: input.idempotency_key.clone(),
        request_fingerprint: request_fingerprint(&input),
    };
    let mut upload = api.app.start_import(caller, settings)?;
    match input.stream {
        Some(stream) => {
            let mut pieces = stream.into_stream();
            while let Some(piece) = pieces.next().await {
                let pushed = match piece {
                    Ok(bytes) => upload.push(&bytes).await.map_err(Problem::from),
                    Err(problem) => Err(problem),
                };
                if let Err(problem) = pushed {
                    upload.abort().await;
                    return Err(problem);
                }
            }
        }
        None => {
            let file: ImportCsv = body::parse(input.body.as_ref(), None)?;
            if let Err(e) = upload.push(file.csv.as_bytes()).await {
                upload.abort().await;
                return Err(e.into());
            }
        }
    }
    Ok(match upload.finish().await? {
        Received::New(import) => Reply::serialized(&ImportBody::new(&import, &api.errors_base_url)),
        Received::Replayed(import) => Reply::replay(
            202,
            serde_json::to_value(ImportBody::new(&import, &api.errors_base_url)).unwrap_or_default(),
        ),
    })
});

handler!(list(api, caller, input) {
    let page = api.app.list_imports(caller, input.page()?).await?;
    let base = &api.errors_base_url;
    Ok(Reply::serialized(&ListBody {
        object: "list",
        data: page.data.iter().map(|i| ImportBody::new(i, base)).collect(),
        has_more: page.has_more,
        next_cursor: page.next_cursor,
    }))
});

handler!(get(api, caller, input) {
    let import = api.app.get_import(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&ImportBody::new(&import, &api.errors_base_url)))
});

handler!(errors(api, caller, input) {
    let page = api.app.list_import_errors(caller, input.path_param("id"), input.page()?).await?;
    let base = &api.errors_base_url;
    Ok(Reply::serialized(&ListBody {
        object: "list",
        data: page.data.iter().map(|e| ImportErrorBody::new(e, base)).collect(),
        has_more: page.has_more,
        next_cursor: page.next_cursor,
    }))
});

handler!(cancel(api, caller, input) {
    let import = api.app.cancel_import(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&ImportBody::new(&import, &api.errors_base_url)))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("imports");
    let write = Scope::write("imports");
    vec![
        Operation {
            name: "svc_create_import",
            method: Method::Post,
            path: "/imports",
            summary: "Import a CSV file",
            description: "Queues a CSV import (202); header: field names, `custom_fields.<key>`, `company.domain`. Needs the object's write scope. Unknown column: 422.",
            scope: write,
            idempotency_key: true,
            if_match: false,
            success_status: 202,
            query: CREATE_QUERY,
            body: Some(Output::of::<ImportCsv>()),
            output: Output::of::<ImportBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_list_imports",
            method: Method::Get,
            path: "/imports",
            summary: "List imports",
            description: "Imports newest first.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<ImportBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_get_import",
            method: Method::Get,
            path: "/imports/{id}",
            summary: "Get an import",
            description: "An import's status and counts.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<ImportBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_list_import_errors",
            method: Method::Get,
            path: "/imports/{id}/errors",
            summary: "List an import's row errors",
            description: "Failed rows (the header is row 1) with their problems.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<ImportErrorBody>>(),
            hints: Hints::READ,
            handler: errors,
        },
        Operation {
            name: "svc_cancel_import",
            method: Method::Delete,
            path: "/imports/{id}",
            summary: "Cancel an import",
            description: "Stops a queued or running import; 409 once it ended.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<ImportBody>(),
            hints: Hints::DELETE,
            handler: cancel,
        },
    ]
}

#[cfg(test)]
mod tests {
    use crm_domain::import::{OnDuplicate, IMPORT_OBJECTS};

    use super::*;

    /// The patterns the document shows spell the domain's own value sets.
    #[test]
    fn query_patterns_are_the_domains_value_sets() {
        let objects: Vec<&str> = IMPORT_OBJECTS.iter().map(|o| o.as_str()).collect();
        assert_eq!(OBJECT_PATTERN, format!("^({})$", objects.join("|")));
        let actions: Vec<&str> = OnDuplicate::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(ON_DUPLICATE_PATTERN, format!("^({})?$", actions.join("|")));
    }
}
