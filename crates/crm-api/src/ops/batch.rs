//! `POST /batch`: up to 100 contact or deal writes and upserts, and company upserts (decisions
//! §10, §18; upserts on a unique custom field by `match`, §24).

use crm_app::{
    batch::{BatchOp, OpResult, MAX_OPERATIONS},
    Caller, Scope,
};
use crm_domain::{ContactDraft, ContactPatch};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    contacts::{ContactCreate, ContactUpdate},
    deals, handler,
};
use crate::{
    body,
    operation::{Hints, Method, Operation, Output, Reply},
    schema::{schema_of, string_enum},
    Api, ErrorCode, Problem,
};

/// What a batch operation may do, and to which records.
const BATCH_OPS: [&str; 4] = ["create", "update", "delete", "upsert"];
const BATCH_OBJECTS: [&str; 3] = ["contact", "company", "deal"];
/// What a batch does to companies: only upsert them, by `domain`.
const COMPANY_OPS: [&str; 1] = ["upsert"];

fn batch_ops(schema: &mut schemars::Schema) {
    string_enum(schema, &BATCH_OPS);
}

fn batch_objects(schema: &mut schemars::Schema) {
    string_enum(schema, &BATCH_OBJECTS);
}

/// What each `op` and `object` takes (`parse_op`): `data` as the single create or update of
/// that object takes its body (a deal's create needs one: it has a required `title`), and an
/// update or delete names its record (`id` present, not null and not empty; whether it exists
/// is live state).
fn shape_by_op(schema: &mut schemars::Schema) {
    let closed = |mut body: Value| {
        if let Value::Object(map) = &mut body {
            map.insert("additionalProperties".into(), false.into());
        }
        body
    };
    let nullable = |body: Value| json!({"anyOf": [{"type": "null"}, body]});
    // A batch upsert without `match` matches on the contact's email or the company's domain.
    let requiring = |mut body: Value, key: &str| {
        body["required"] = json!([key]);
        // Required means a value: a null email or domain is nothing to match on.
        if let Some(member) = body["properties"].get_mut(key) {
            member["type"] = "string".into();
        }
        body
    };
    let id = json!({"type": "string", "minLength": 1});
    // `match`: `custom_fields.<key>` of a unique field, as `?match=` is.
    let by = json!({"type": "string", "pattern": super::MATCH_PATTERN});
    // Without a key, `match` is absent or null (serde reads both as none).
    let none = json!({"type": "null"});
    schema.insert(
        "oneOf".into(),
        json!([
            {"properties": {"match": none, "op": {"const": "create"}, "object": {"const": "contact"},
                "data": nullable(closed(schema_of::<ContactCreate>()))}},
            {"required": ["data"], "properties": {"match": none, "op": {"const": "create"}, "object": {"const": "deal"},
                "data": closed(schema_of::<deals::DealCreate>())}},
            {"required": ["id"], "properties": {"match": none, "op": {"const": "update"}, "object": {"const": "contact"},
                "id": id, "data": nullable(closed(schema_of::<ContactUpdate>()))}},
            {"required": ["id"], "properties": {"match": none, "op": {"const": "update"}, "object": {"const": "deal"},
                "id": id, "data": nullable(closed(schema_of::<deals::DealUpdate>()))}},
            {"required": ["data", "match"], "properties": {"op": {"const": "upsert"}, "object": {"const": "contact"},
                "match": by, "data": closed(schema_of::<super::contacts::ContactUpsert>())}},
            {"required": ["data"], "properties": {"match": none, "op": {"const": "upsert"}, "object": {"const": "contact"},
                "data": requiring(closed(schema_of::<super::contacts::ContactUpsert>()), "email")}},
            {"required": ["data", "match"], "properties": {"op": {"const": "upsert"}, "object": {"const": "company"},
                "match": by, "data": closed(schema_of::<super::companies::CompanyUpsert>())}},
            {"required": ["data"], "properties": {"match": none, "op": {"const": "upsert"}, "object": {"const": "company"},
                "data": requiring(closed(schema_of::<super::companies::CompanyUpsert>()), "domain")}},
            {"required": ["data", "match"], "properties": {"op": {"const": "upsert"}, "object": {"const": "deal"},
                "match": by, "data": closed(schema_of::<deals::DealCreate>())}},
            {"required": ["id"], "properties": {"match": none, "op": {"const": "delete"}, "object": {"enum": ["contact", "deal"]}, "id": id}},
        ]),
    );
}

/// One write.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = shape_by_op)]
pub struct BatchOperation {
    /// `create`, `update`, `delete` or `upsert` (contacts by `email`, companies by `domain`,
    /// any of the three by `match`; companies only upsert).
    #[schemars(transform = batch_ops)]
    pub op: String,
    /// `contact`, `company` or `deal`.
    #[schemars(transform = batch_objects)]
    pub object: String,
    /// The record's id, for update and delete.
    pub id: Option<String>,
    /// The fields, as for the single create or update.
    pub data: Option<Map<String, Value>>,
    /// An upsert's `custom_fields.<key>` of a unique field to match on, as `?match=` (a deal's
    /// upsert needs it).
    #[serde(rename = "match")]
    pub match_on: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BatchRequest {
    /// 1 to 100 operations.
    #[schemars(length(min = 1, max = 100))]
    pub operations: Vec<BatchOperation>,
    /// When true, any failure writes nothing (422 listing the failures under `errors`).
    pub atomic: Option<bool>,
}

fn parse_op(o: BatchOperation) -> Result<BatchOp, Problem> {
    let data = o.data.map(Value::Object);
    let id = || {
        o.id.clone()
            .filter(|i| !i.is_empty())
            .ok_or_else(|| Problem::validation("id", "update and delete need the record's `id`"))
    };
    let hint = Some(deals::UNKNOWN_FIELD_HINT);
    if o.op != "upsert" && o.match_on.is_some() {
        return Err(Problem::validation("match", "only an upsert takes `match`"));
    }
    let key = || super::parse_match(o.match_on.as_deref());
    Ok(match (o.op.as_str(), o.object.as_str()) {
        ("create", "contact") => BatchOp::CreateContact(ContactDraft::from(body::parse::<
            ContactCreate,
        >(
            data.as_ref(), hint
        )?)),
        ("update", "contact") => BatchOp::UpdateContact {
            id: id()?,
            patch: ContactPatch::from(body::parse::<ContactUpdate>(data.as_ref(), hint)?),
        },
        ("delete", "contact") => BatchOp::DeleteContact { id: id()? },
        ("upsert", "contact") => {
            let (draft, patch) = super::contacts::upsert_body(data.as_ref(), hint)?;
            BatchOp::UpsertContact { key: key()?, draft, patch }
        }
        ("upsert", "company") => {
            let (draft, patch) = super::companies::upsert_body(data.as_ref(), hint)?;
            BatchOp::UpsertCompany { key: key()?, draft, patch }
        }
        ("upsert", "deal") => {
            let key = key()?.ok_or_else(|| {
                Problem::validation("match", "a deal upserts only on a unique custom field: send `match`: `custom_fields.<key>`")
            })?;
            let (draft, pipeline) = deals::draft(body::parse(data.as_ref(), hint)?)?;
            let (patch, _) = deals::patch(body::parse(data.as_ref(), hint)?)?;
            BatchOp::UpsertDeal { key, draft, patch, pipeline }
        }
        (_, "company") => {
            return Err(Problem::new(
                ErrorCode::UnknownValue,
                format!("`{}` is not a batch op for companies: a batch only upserts them (by `domain`); create, update and delete a company with its own operations", o.op),
            )
            .with("field", "op")
            .with("valid_options", COMPANY_OPS.to_vec()))
        }
        ("create", "deal") => {
            let (draft, pipeline) = deals::draft(body::parse(data.as_ref(), hint)?)?;
            BatchOp::CreateDeal { draft, pipeline }
        }
        ("update", "deal") => {
            let (patch, pipeline) = deals::patch(body::parse(data.as_ref(), hint)?)?;
            BatchOp::UpdateDeal {
                id: id()?,
                patch,
                pipeline,
            }
        }
        ("delete", "deal") => BatchOp::DeleteDeal { id: id()? },
        (_, "contact" | "deal") => {
            return Err(Problem::new(
                ErrorCode::UnknownValue,
                format!("`{}` is not a batch op", o.op),
            )
            .with("field", "op")
            .with("valid_options", BATCH_OPS.to_vec()))
        }
        _ => {
            return Err(Problem::new(
                ErrorCode::UnknownValue,
                format!("`{}` cannot be written in a batch", o.object),
            )
            .with("field", "object")
            .with("valid_options", BATCH_OBJECTS.to_vec()))
        }
    })
}

/// The write scope each object needs (decisions §7: batch needs the write scope of each object).
fn require_scopes(caller: &Caller, ops: &[BatchOperation]) -> Result<(), Problem> {
    for o in ops {
        let scope = match o.object.as_str() {
            "contact" => Scope::write("contacts"),
            "company" => Scope::write("companies"),
            "deal" => Scope::write("deals"),
            _ => continue,
        };
        caller.require(scope)?;
    }
    Ok(())
}

fn render(api: &Api, parse_failures: &[(usize, Problem)], results: &[OpResult]) -> Value {
    let mut rows: Vec<(usize, Value)> = Vec::with_capacity(parse_failures.len() + results.len());
    let failure = |i: usize, p: &Problem| json!({"index": i, "status": p.status(), "error": api.problem_json(p)});
    rows.extend(parse_failures.iter().map(|(i, p)| (*i, failure(*i, p))));
    for (i, r) in results {
        rows.push((
            *i,
            match r {
                Ok(wrapped) if wrapped.get("upsert_outcome").is_some() => {
                    let outcome = &wrapped["upsert_outcome"];
                    let status = if outcome == "created" { 201 } else { 200 };
                    json!({"index": i, "status": status, "outcome": outcome, "data": wrapped["record"]})
                }
                Ok(data) => {
                    let status = if data.get("deleted").is_some()
                        || data.get("version").and_then(Value::as_i64) != Some(1)
                    {
                        200
                    } else {
                        201
                    };
                    json!({"index": i, "status": status, "data": data})
                }
                Err(e) => failure(*i, &Problem::from(clone_error(e))),
            },
        ));
    }
    rows.sort_by_key(|(i, _)| *i);
    let failed = rows
        .iter()
        .filter(|(_, r)| r.get("error").is_some())
        .count();
    let body = json!({
        "object": "batch",
        "results": rows.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
        "succeeded": results.len() + parse_failures.len() - failed,
        "failed": failed,
    });
    body
}

/// Rendering needs an owned error; `AppError` is not `Clone` because of its internal variant,
/// which never reaches a batch result (internal errors abort the batch).
fn clone_error(e: &crm_app::AppError) -> crm_app::AppError {
    use crm_app::AppError as E;
    match e {
        E::Validation(v) => E::Validation(v.clone()),
        E::NotFound { object, id } => E::NotFound {
            object,
            id: id.clone(),
        },
        E::Conflict { detail, existing } => E::Conflict {
            detail: detail.clone(),
            existing: existing.clone(),
        },
        E::VersionConflict { current } => E::VersionConflict { current: *current },
        E::Forbidden { scope } => E::Forbidden {
            scope: scope.clone(),
        },
        // Several companies on an upsert's domain, and a `match` that is no unique field.
        E::Ambiguous { detail, candidates } => E::Ambiguous {
            detail: detail.clone(),
            candidates: candidates.clone(),
        },
        E::BadRequest {
            detail,
            valid_options,
        } => E::BadRequest {
            detail: detail.clone(),
            valid_options: valid_options.clone(),
        },
        E::PlanLimit {
            cap,
            what,
            plan,
            limit,
        } => E::PlanLimit {
            cap,
            what,
            plan,
            limit: *limit,
        },
        other => E::Internal(other.to_string()),
    }
}

handler!(batch(api, caller, input) {
    let request: BatchRequest = body::parse(input.body.as_ref(), None)?;
    let count = request.operations.len();
    if count == 0 || count > MAX_OPERATIONS {
        return Err(Problem::validation("operations", format!("a batch holds 1 to {MAX_OPERATIONS} operations, not {count}")));
    }
    require_scopes(caller, &request.operations)?;
    let atomic = request.atomic.unwrap_or(false);
    let mut ops = Vec::with_capacity(count);
    let mut parse_failures = Vec::new();
    for (index, o) in request.operations.into_iter().enumerate() {
        match parse_op(o) {
            Ok(op) => ops.push((index, op)),
            Err(p) => parse_failures.push((index, p)),
        }
    }
    if atomic && !parse_failures.is_empty() {
        let mut p = Problem::new(ErrorCode::ValidationFailed, format!("{} of the batch's operations failed; nothing was written", parse_failures.len()))
            .with("field", "operations");
        p.errors = parse_failures;
        return Err(p);
    }
    let render = |results: &[OpResult]| render(api, &parse_failures, results);
    let body = api.app.batch(caller, ops, atomic, input.idem.as_ref(), &render).await?;
    Ok(Reply::new(body))
});

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "object": {"const": "batch"},
            "results": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "status": {"type": "integer"},
                    "data": {"type": "object"},
                    "outcome": {"enum": ["created", "updated", "unchanged"], "description": "Upserts only."},
                    "error": {"type": "object", "description": "A problem document."},
                },
                "required": ["index", "status"],
            }},
            "succeeded": {"type": "integer"},
            "failed": {"type": "integer"},
        },
        "required": ["object", "results", "succeeded", "failed"],
    })
}

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_write_batch",
        method: Method::Post,
        path: "/batch",
        summary: "Write up to 100 contacts and deals",
        description: "Up to 100 contact and deal creates, updates and deletes, and contact and company upserts, each answered in `results`; `atomic: true` writes all or nothing. Emits no webhooks and fires no automations.",
        scope: Scope::PER_RECORD,
        idempotency_key: true,
        if_match: false,
        success_status: 200,
        query: &[],
        body: Some(Output::of::<BatchRequest>()),
        output: Output::written(output_schema),
        hints: Hints::CREATE,
        handler: batch,
    }]
}
