//! The shape of an operation and of what flows through it: its declaration ([`Operation`]:
//! method, path, parameters, schemas, scope, handler), a second route of one ([`Alias`]), the
//! input a transport hands it ([`Input`]) and its answer ([`Reply`]). The list of operations is
//! built from these by [`crate::catalog`]; the operations ([`crate::ops`]) and the entry point
//! ([`crate::Api::call`]) depend on this module and it on neither.

use std::{collections::BTreeMap, future::Future, pin::Pin};

use crm_app::{idempotency::IdemClaim, Caller, PageParams, Scope};
use serde_json::Value;

pub use crate::output::Output;
pub use crate::reply_body::{FileReply, ReplyBody, StaticBody};
use crate::{api::Api, bodies::Versioned, body::JsonBody, problem::Problem};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// Hints for agents (MCP tool annotations, decisions §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    /// Whether a write takes `dry_run=true` (decisions §18, §24): every write of records or
    /// configuration does; one whose effect is a secret or a send answers 400 to it.
    pub dry_run: bool,
}

impl Hints {
    pub const READ: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        dry_run: false,
    };
    pub const CREATE: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        dry_run: true,
    };
    pub const UPDATE: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        dry_run: true,
    };
    pub const DELETE: Hints = Hints {
        read_only: false,
        destructive: true,
        idempotent: true,
        dry_run: true,
    };

    /// The same write, refusing `dry_run`: its effect is a secret or a send.
    pub const fn no_dry_run(self) -> Hints {
        Hints {
            dry_run: false,
            ..self
        }
    }

    /// Whether the operation refuses `dry_run=true` with 400: a write without a dry run.
    pub const fn refuses_dry_run(&self) -> bool {
        !self.read_only && !self.dry_run
    }
}

#[derive(Debug, Clone, Copy)]
pub enum ParamKind {
    String,
    /// A string the parser accepts only in this shape (a regular expression): ids, cursors.
    Pattern(&'static str),
    /// Like `Pattern`, with a regular expression built once from other declarations (the names
    /// `fields=` and `expand=` take come from the record bodies).
    Computed(fn() -> &'static str),
    /// A filter in this shape (a regular expression), or blank for no filter.
    Filter(&'static str),
    Boolean,
    Integer {
        min: i64,
        max: i64,
    },
    /// A JSON document in a string, of this schema (an import's `mapping`): OpenAPI states it
    /// as the parameter's `application/json` content; agents pass the string.
    Json(fn() -> Value),
    /// Equality filters on custom fields: `<name>.<key>=<value>` (or `<name>[<key>]=<value>`, the
    /// OpenAPI `deepObject` spelling) in a query string; one object `{<key>: value}` for agents.
    FieldMap,
}

/// A query parameter an operation accepts.
#[derive(Debug, Clone, Copy)]
pub struct QueryParam {
    pub name: &'static str,
    pub kind: ParamKind,
    pub required: bool,
    pub description: &'static str,
}

impl ParamKind {
    /// The JSON type of the parameter's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::String
            | ParamKind::Pattern(_)
            | ParamKind::Computed(_)
            | ParamKind::Filter(_)
            | ParamKind::Json(_) => "string",
            ParamKind::Boolean => "boolean",
            ParamKind::Integer { .. } => "integer",
            ParamKind::FieldMap => "object",
        }
    }
}

impl QueryParam {
    pub const fn string(name: &'static str, description: &'static str) -> QueryParam {
        QueryParam {
            name,
            kind: ParamKind::String,
            required: false,
            description,
        }
    }

    /// A string parameter that must match `pattern` (ids: their type's `PATTERN`).
    pub const fn pattern(
        name: &'static str,
        pattern: &'static str,
        description: &'static str,
    ) -> QueryParam {
        QueryParam {
            name,
            kind: ParamKind::Pattern(pattern),
            required: false,
            description,
        }
    }

    /// A filter on an id (`pattern`: its type's `PATTERN`); blank is no filter, as for every
    /// string filter.
    pub const fn id_filter(
        name: &'static str,
        pattern: &'static str,
        description: &'static str,
    ) -> QueryParam {
        QueryParam {
            name,
            kind: ParamKind::Filter(pattern),
            required: false,
            description,
        }
    }

    /// The key a query parameter `name` gives this parameter, if it is one of its spellings:
    /// `Some("")` for the parameter itself, `Some(key)` for `<name>.<key>` or `<name>[<key>]` of a
    /// [`ParamKind::FieldMap`].
    pub fn key_of<'n>(&self, name: &'n str) -> Option<&'n str> {
        if name == self.name {
            return (!matches!(self.kind, ParamKind::FieldMap)).then_some("");
        }
        if !matches!(self.kind, ParamKind::FieldMap) {
            return None;
        }
        let rest = name.strip_prefix(self.name)?;
        let key = rest
            .strip_prefix('.')
            .or_else(|| rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
        (!key.is_empty()).then_some(key)
    }

    pub fn schema(&self) -> Value {
        let mut s = match self.kind {
            ParamKind::String | ParamKind::Json(_) => serde_json::json!({"type": "string"}),
            ParamKind::Pattern(pattern) => {
                serde_json::json!({"type": "string", "pattern": pattern})
            }
            ParamKind::Computed(pattern) => {
                serde_json::json!({"type": "string", "pattern": pattern()})
            }
            ParamKind::Filter(pattern) => {
                serde_json::json!({"type": "string", "pattern": format!("^\\s*$|{pattern}")})
            }
            ParamKind::Boolean => serde_json::json!({"type": "boolean"}),
            ParamKind::Integer { min, max } => {
                serde_json::json!({"type": "integer", "minimum": min, "maximum": max})
            }
            ParamKind::FieldMap => serde_json::json!({
                "type": "object",
                "propertyNames": {"pattern": crm_domain::registry::KEY_PATTERN},
                "additionalProperties": {"type": ["string", "number", "boolean"]},
                "maxProperties": MAX_FIELD_FILTERS,
            }),
        };
        s["description"] = Value::from(self.description);
        s
    }
}

/// At most this many custom-field filters in one list request (each is one more index probe).
pub const MAX_FIELD_FILTERS: usize = 5;

/// The paging and deleted-record controls of every list (decisions §4).
pub const LIMIT: QueryParam = QueryParam {
    name: "limit",
    kind: ParamKind::Integer { min: 1, max: 100 },
    required: false,
    description: "Page size, 1 to 100 (default 25).",
};
/// Cursors are unpadded URL-safe base64 (`crm_app::paging`); any other string is `invalid_cursor`.
pub const CURSOR: QueryParam = QueryParam::pattern(
    "cursor",
    "^[A-Za-z0-9_-]+$",
    "The `next_cursor` of the previous page.",
);
pub const INCLUDE_DELETED: QueryParam = QueryParam {
    name: "include_deleted",
    kind: ParamKind::Boolean,
    required: false,
    description: "List soft-deleted records too.",
};

/// Arguments whose meaning is the same on every tool that takes them, explained once in the agent
/// transports' instructions rather than in each tool's schema.
const SHARED_ARGUMENTS: [&str; 5] = ["limit", "cursor", "include_deleted", "fields", "owner_id"];

/// Drops from an argument's schema what a model does not need to be told twice: a description
/// that restates the `enum` beside it; below the argument itself (`top`), the descriptions of
/// nested members (a condition's `op`, a step's `subject`), which the tool description, the
/// capability documents and the errors' `valid_options` cover, and the per-kind `oneOf` or
/// `anyOf` of an object whose members are listed; and everywhere, patterns, formats, length and
/// number bounds and the key shape of custom fields. The server checks all
/// of it and names the field it refuses; the OpenAPI document keeps every word.
fn trim_descriptions(schema: &mut Value, top: bool) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if !top || object.contains_key("enum") {
        object.remove("description");
    }
    // A pattern is long and reads poorly to a model; the server still checks it, and its
    // refusal names the field and the rule.
    object.remove("pattern");
    object.remove("title");
    object.remove("format");
    // Below the argument, an object that lists its members already says what it takes; the
    // `oneOf` that refines it per kind (an action's type, a batch operation's object) repeats
    // them, and the server's refusal names what is missing.
    if !top && object.contains_key("properties") {
        object.remove("oneOf");
        object.remove("anyOf");
    }
    // Length, number and count bounds, the shape of custom field keys and that items differ,
    // the server states in the refusal that names the field; a model rarely comes near them.
    for bound in [
        "maxLength",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "maxProperties",
        "propertyNames",
        "uniqueItems",
    ] {
        object.remove(bound);
    }
    // Whether an object is closed: an unknown member is refused with the valid ones and a
    // suggestion, which teaches a model more than `false` on every object would.
    if object
        .get("additionalProperties")
        .is_some_and(Value::is_boolean)
    {
        object.remove("additionalProperties");
    }
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(members)) => {
                for member in members.values_mut() {
                    trim_descriptions(member, false);
                }
            }
            ("items" | "additionalProperties", item) => trim_descriptions(item, false),
            ("anyOf" | "oneOf" | "allOf", Value::Array(branches)) => {
                for branch in branches {
                    trim_descriptions(branch, top);
                }
            }
            _ => {}
        }
    }
    // Branches that only carried a pattern or a format (a long text's shape, a date or blank)
    // say nothing once trimmed.
    let empty = |branch: &Value| branch.as_object().is_some_and(|b| b.is_empty());
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = object.get(combinator) {
            if branches.iter().all(empty) {
                object.remove(combinator);
            }
        }
    }
}

/// The `{name}` parameters of a catalog path, in order.
fn path_params(path: &'static str) -> Vec<&'static str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Result<Reply, Problem>> + Send + 'a>>;
pub type Handler = for<'a> fn(&'a Api, &'a Caller, Input) -> HandlerFuture<'a>;

pub struct Operation {
    /// `svc_<verb>_<noun>`: the MCP tool and A2A skill name, and the OpenAPI operationId.
    pub name: &'static str,
    pub method: Method,
    /// Relative to `/v1`, with `{id}`-style parameters.
    pub path: &'static str,
    pub summary: &'static str,
    /// What it does, what it needs first, which errors to expect.
    pub description: &'static str,
    pub scope: Scope,
    /// Whether it honours `Idempotency-Key`.
    pub idempotency_key: bool,
    /// Whether it honours `If-Match`.
    pub if_match: bool,
    pub success_status: u16,
    pub query: &'static [QueryParam],
    /// The request body's schema, from the type the handler reads it into
    /// (`Output::of::<ContactCreate>()`); `None` for an operation that takes no body.
    pub body: Option<Output>,
    /// The success body's schema, from its type (`Output::of::<ContactBody>()`). Called, it
    /// gives the schema inline: `(op.output)()`.
    pub output: Output,
    pub hints: Hints,
    pub handler: Handler,
}

impl Operation {
    /// Names of the path parameters, in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        path_params(self.path)
    }

    /// The statuses it may answer on success besides [`Operation::success_status`].
    pub fn also_success(&self) -> &'static [u16] {
        ALSO_SUCCESS
            .iter()
            .find(|(name, _)| *name == self.name)
            .map_or(&[], |(_, statuses)| statuses)
    }

    /// The schema of the flat arguments object of agent tools: path parameters, query parameters
    /// and body fields, plus `idempotency_key` / `if_match` / `dry_run` where the operation
    /// honours them.
    ///
    /// Every tool's schema is shown to a model before its first call, so it says only what is
    /// particular to the tool: the arguments every list or write shares (`limit`, `cursor`,
    /// `include_deleted`, `fields`, `idempotency_key`, `if_match`, `dry_run`) are explained once, in the
    /// transports' instructions, and carry no description here.
    pub fn arguments_schema(&self) -> Value {
        let mut properties = serde_json::Map::new();
        let mut required: Vec<Value> = Vec::new();
        for p in self.path_params() {
            properties.insert(p.to_owned(), serde_json::json!({"type": "string"}));
            required.push(p.into());
        }
        for q in self.query {
            let mut schema = q.schema();
            trim_descriptions(&mut schema, true);
            if SHARED_ARGUMENTS.contains(&q.name) {
                if let Some(s) = schema.as_object_mut() {
                    s.remove("description");
                }
            }
            properties.insert(q.name.to_owned(), schema);
            if q.required {
                required.push(q.name.into());
            }
        }
        if let Some(body) = self.body {
            let body = body();
            if let Some(props) = body.get("properties").and_then(Value::as_object) {
                properties.extend(props.iter().map(|(name, schema)| {
                    let mut schema = schema.clone();
                    trim_descriptions(&mut schema, true);
                    (name.clone(), schema)
                }));
            }
            if let Some(req) = body.get("required").and_then(Value::as_array) {
                required.extend(req.iter().cloned());
            }
        }
        if self.idempotency_key {
            properties.insert(
                "idempotency_key".into(),
                serde_json::json!({"type": "string"}),
            );
        }
        if self.if_match {
            properties.insert(
                "if_match".into(),
                serde_json::json!({"type": ["string", "integer"]}),
            );
        }
        if self.generic_dry_run() {
            properties.insert(
                crate::dry_run::DRY_RUN.into(),
                serde_json::json!({"type": "boolean"}),
            );
        }
        // Closed, as every object is: an unknown argument is refused (agent.rs), without a
        // `false` that would cost every tool its bytes (trim_descriptions says why).
        let mut schema = serde_json::json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = Value::from(required);
        }
        schema
    }
}

/// A second route of an operation (e.g. `PATCH /pipelines/{pipeline}/stages/{key}` of
/// `svc_manage_stage`): the REST transport maps its path parameters and query into the body and
/// sets `action`, so the operation and its tool stay one.
///
/// The route names the record (its path) and the action (its method), so its query and body
/// may carry only what is listed here: anything else, a `key` or `action` above all, is refused
/// rather than folded in where it could name another record than the path does.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    pub operation: &'static str,
    pub method: Method,
    pub path: &'static str,
    pub action: &'static str,
    /// The query parameters the route takes (each becomes the body field of its name).
    pub query: &'static [QueryParam],
    /// The body fields the route takes, a subset of the operation's.
    pub fields: &'static [&'static str],
}

impl Alias {
    /// Names of the path parameters, in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        path_params(self.path)
    }
}

/// Operations that answer another 2xx besides their `success_status`, by name: stage `update`
/// and `remove` answer 200 where `add` answers 201, and enrolling a contact that is already
/// enrolled answers 200 with the existing enrollment. A table here rather than a field of
/// [`Operation`], which every operation of `ops` would then have to spell out.
pub(crate) const ALSO_SUCCESS: &[(&str, &[u16])] = &[
    ("svc_manage_stage", &[200]),
    ("svc_enroll_contact", &[200]),
    ("svc_upsert_contact", &[201]),
    ("svc_upsert_company", &[201]),
    ("svc_upsert_deal", &[201]),
];

/// What a transport hands to an operation.
#[derive(Debug, Default)]
pub struct Input {
    pub path: BTreeMap<String, String>,
    pub query: Vec<(String, String)>,
    /// Read into the operation's input type by [`crate::body::parse`].
    pub body: Option<JsonBody>,
    /// The body of an operation that reads it as it arrives ([`Operation::streams_body`]): REST
    /// hands it here instead of reading it whole.
    pub stream: Option<BodyStream>,
    pub if_match: Option<String>,
    /// Set by the dispatcher when the request holds an idempotency key.
    pub idem: Option<IdemClaim>,
    /// The `Idempotency-Key` of an operation that keeps its own claim
    /// ([`Operation::claims_own_idempotency`]): the dispatcher hands it over unclaimed.
    pub idempotency_key: Option<String>,
}

/// A request body read piece by piece as it arrives; an error is the transport's answer (413,
/// 408, ...). In a mutex only so that an [`Input`] may be shared (`Sync`) while its handler
/// reads other parts of it; the handler takes the stream out ([`BodyStream::into_stream`]).
pub struct BodyStream(std::sync::Mutex<PieceStream>);

/// The pieces of a streamed body.
pub type PieceStream = Pin<Box<dyn futures::Stream<Item = Result<Vec<u8>, Problem>> + Send>>;

impl BodyStream {
    pub fn new(pieces: PieceStream) -> BodyStream {
        BodyStream(std::sync::Mutex::new(pieces))
    }

    /// The stream of what `next` yields from `state`, piece after piece, until it answers `None`.
    pub fn unfold<S, F, Fut>(state: S, next: F) -> BodyStream
    where
        S: Send + 'static,
        F: FnMut(S) -> Fut + Send + 'static,
        Fut: Future<Output = Option<(Result<Vec<u8>, Problem>, S)>> + Send + 'static,
    {
        BodyStream::new(Box::pin(futures::stream::unfold(state, next)))
    }

    pub fn into_stream(self) -> PieceStream {
        self.0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BodyStream")
    }
}

/// Operations whose REST body is a CSV file read as it arrives (`text/csv`, up to
/// `crm_app::imports::MAX_IMPORT_BYTES`) rather than JSON; their agents' body is the one
/// argument `csv`.
const STREAMED_BODIES: &[&str] = &["svc_create_import"];

/// Operations whose `Idempotency-Key` claim is a row of their own (an import is its own claim,
/// decisions §24), so the dispatcher does not claim it for them.
const OWN_IDEMPOTENCY: &[&str] = &["svc_create_import"];

/// Operations whose success answer over REST is a file ([`crate::ReplyBody::File`]), not JSON.
const FILE_ANSWERS: &[&str] = &["svc_get_export_file"];

impl Operation {
    /// Whether REST answers this operation with a file (an export's CSV or JSON lines).
    pub fn answers_file(&self) -> bool {
        FILE_ANSWERS.contains(&self.name)
    }

    /// Whether REST streams this operation's body to it ([`Input::stream`]).
    pub fn streams_body(&self) -> bool {
        STREAMED_BODIES.contains(&self.name)
    }

    /// Whether this operation keeps its own `Idempotency-Key` claim ([`Input::idempotency_key`]).
    pub fn claims_own_idempotency(&self) -> bool {
        OWN_IDEMPOTENCY.contains(&self.name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: ReplyBody,
    /// The record version, sent as `ETag`.
    pub etag: Option<i64>,
    /// A stored result replayed for a repeated `Idempotency-Key`.
    pub replayed: bool,
    /// What an upsert did, sent as `Upsert-Outcome`.
    pub upsert_outcome: Option<&'static str>,
    /// The answer of a dry run (its envelope), sent with `Dry-Run: true`.
    pub dry_run: bool,
}

impl Reply {
    /// What a handler answers by default: the operation's declared
    /// [`Operation::success_status`], which the entry point fills in ([`Reply::declared`]).
    const DECLARED: u16 = 0;

    pub fn new(body: Value) -> Reply {
        Reply {
            status: Reply::DECLARED,
            body: ReplyBody::Owned(body),
            etag: None,
            replayed: false,
            upsert_outcome: None,
            dry_run: false,
        }
    }

    /// A document that is the same for every caller, served without building or serializing it.
    pub fn fixed(body: &'static StaticBody) -> Reply {
        Reply {
            status: Reply::DECLARED,
            body: ReplyBody::Static(body),
            etag: None,
            replayed: false,
            upsert_outcome: None,
            dry_run: false,
        }
    }

    /// A typed answer, serialized here once: no `Value` is built for it, whose maps hash and
    /// allocate every key.
    pub fn serialized(body: &impl serde::Serialize) -> Reply {
        Reply {
            status: Reply::DECLARED,
            body: ReplyBody::Serialized(
                serde_json::to_vec(body).expect("a schema type serializes to JSON"),
            ),
            etag: None,
            replayed: false,
            upsert_outcome: None,
            dry_run: false,
        }
    }

    /// A single record's typed body, serialized here once; its version becomes the ETag.
    pub fn versioned<B: serde::Serialize + Versioned>(body: &B) -> Reply {
        Reply {
            etag: Some(body.version()),
            ..Reply::serialized(body)
        }
    }

    /// A stored answer replayed as it was first given: its status, and its version as the ETag.
    pub fn replay(status: u16, body: Value) -> Reply {
        let etag = body.get("version").and_then(Value::as_i64);
        Reply {
            status,
            body: ReplyBody::Owned(body),
            etag,
            replayed: true,
            upsert_outcome: None,
            dry_run: false,
        }
    }

    /// The reply of an upsert that ended as `outcome` (`created`, `updated`, `unchanged`).
    pub fn with_upsert_outcome(self, outcome: &'static str) -> Reply {
        Reply {
            upsert_outcome: Some(outcome),
            ..self
        }
    }

    /// Answers with another success status than the operation's declared one: only one the
    /// operation lists besides it ([`Operation::also_success`]).
    pub fn with_status(self, status: u16) -> Reply {
        Reply { status, ..self }
    }

    /// The reply with the operation's declared success status where the handler kept it.
    pub(crate) fn declared(mut self, op: &Operation) -> Reply {
        if self.status == Reply::DECLARED {
            self.status = op.success_status;
        }
        debug_assert!(
            self.status == op.success_status
                || self.replayed
                || op.also_success().contains(&self.status),
            "{} answered {}, which it does not declare",
            op.name,
            self.status
        );
        self
    }
}

impl Input {
    pub fn path_param(&self, name: &str) -> &str {
        self.path.get(name).map(String::as_str).unwrap_or_default()
    }

    pub fn query_str(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The filters given for the [`ParamKind::FieldMap`] parameter `param` as `(key, value)`, in
    /// the order sent; a filter given empty is absent, as any other.
    pub fn field_filters(&self, param: &QueryParam) -> Vec<(String, String)> {
        self.query
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .filter_map(|(k, v)| {
                param
                    .key_of(k)
                    .filter(|key| !key.is_empty())
                    .map(|key| (key.to_owned(), v.clone()))
            })
            .collect()
    }

    pub fn query_bool(&self, name: &str) -> Result<bool, Problem> {
        match self.query_str(name) {
            None => Ok(false),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(_) => Err(Problem::validation(
                name,
                format!("{name} must be true or false"),
            )),
        }
    }

    pub fn page(&self) -> Result<PageParams, Problem> {
        let limit = match self.query_str("limit") {
            None => crm_app::paging::DEFAULT_LIMIT,
            Some(raw) => match raw.parse::<f64>() {
                Ok(n)
                    if n.fract() == 0.0
                        && (1.0..=f64::from(crm_app::paging::MAX_LIMIT)).contains(&n) =>
                {
                    n as u32
                }
                _ => {
                    return Err(Problem::validation(
                        "limit",
                        "limit must be an integer from 1 to 100",
                    ))
                }
            },
        };
        Ok(PageParams {
            limit,
            cursor: self.query_str("cursor").map(str::to_owned),
        })
    }
}
