//! The operation catalog and everything the transports share.
//!
//! Each operation is declared once in [`catalog`]: name, method and path, input and output
//! schemas, scope, idempotency, description and handler. [`Api::call`] runs one for an
//! authenticated caller, applying scopes and `Idempotency-Key` the same way whichever transport
//! (REST, MCP, A2A) received it, and turns every error into a [`problem::Problem`]. This crate
//! knows JSON and the wire DTOs; it does not know axum, HTTP servers, MCP or A2A framing, or SQL.

pub mod agent;
pub mod bodies;
pub mod body;
pub mod catalog;
pub mod openapi;
pub mod ops;
pub mod problem;
pub mod schema;
pub mod strict_json;

use crm_app::{idempotency::Claim, idempotency::StoredReply, Admission, App, Caller, RateStatus};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use catalog::{catalog, Input, Method, Operation, Reply, ReplyBody, StaticBody};
pub use problem::{ErrorCode, Problem};

/// The version of the interface description this service implements.
pub const SPEC_VERSION: &str = "0.14.0";

/// A call refused by [`Api::admit`] (429, or a 500 while admitting), with the rate budget to
/// report when the rate limiter ran.
#[derive(Debug)]
pub struct Refusal {
    pub problem: Problem,
    pub rate: Option<RateStatus>,
}

/// The rate budget an agent transport learns while running a call, to report as `RateLimit-*`
/// headers on the HTTP response that carries it (decisions §8: every response carries them).
#[derive(Debug, Default)]
pub struct RateSlot(std::sync::Mutex<Option<RateStatus>>);

impl RateSlot {
    pub fn set(&self, rate: Option<RateStatus>) {
        if rate.is_some() {
            *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = rate;
        }
    }

    pub fn get(&self) -> Option<RateStatus> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The `RateLimit-*` headers (plain integers, decisions §17) for `rate`, plus `Retry-After` when
/// the call was refused. Transports turn these into HTTP headers.
pub fn rate_limit_headers(rate: &RateStatus) -> impl Iterator<Item = (&'static str, u64)> {
    let headers = [
        ("ratelimit-limit", u64::from(rate.limit)),
        ("ratelimit-remaining", u64::from(rate.remaining)),
        ("ratelimit-reset", rate.reset_secs),
        ("retry-after", rate.retry_after_secs),
    ];
    headers.into_iter().take(if rate.allowed { 3 } else { 4 })
}

/// The application plus what rendering needs (the public URL, for problem `type`s).
#[derive(Clone)]
pub struct Api {
    pub app: App,
    /// `<public_url>/errors`.
    pub errors_base_url: String,
}

impl Api {
    pub fn new(app: App, public_url: &str) -> Api {
        Api {
            app,
            errors_base_url: format!("{}/errors", public_url.trim_end_matches('/')),
        }
    }

    /// The URL clients reach this server at (without a trailing slash).
    pub fn public_url(&self) -> &str {
        self.errors_base_url
            .strip_suffix("/errors")
            .unwrap_or(&self.errors_base_url)
    }

    pub fn problem_json(&self, p: &Problem) -> Value {
        p.to_json(&self.errors_base_url)
    }

    /// Runs `op` for `caller`: [`Api::admit`] then [`Api::dispatch`]. Every transport that has
    /// its input ready calls this, so limits and counting are the same on REST, MCP and A2A.
    pub async fn call(
        &self,
        op: &'static Operation,
        caller: &Caller,
        input: Input,
        idempotency_key: Option<&str>,
    ) -> Result<Reply, Problem> {
        self.admit(op, caller)
            .await
            .map_err(|refused| refused.problem)?;
        self.dispatch(op, caller, input, idempotency_key).await
    }

    /// Lets one call of `op` through the rate limit, the quota and the spend cap, counting it
    /// (decisions §8). Call it once per operation call, right after authentication; REST calls
    /// it before reading the body so that even a malformed request is counted and carries the
    /// `RateLimit-*` headers.
    pub async fn admit(&self, op: &Operation, caller: &Caller) -> Result<Admission, Refusal> {
        self.app
            .admit(caller, op.name)
            .await
            .map_err(|refused| Refusal {
                problem: refused.error.into(),
                rate: refused.rate,
            })
    }

    /// Runs an admitted `op` for `caller`: checks the scope, the query parameters and the body
    /// shape, and handles `Idempotency-Key` (claim, replay, store) around the handler.
    ///
    /// No `#[tracing::instrument]` span: on every request even a disabled one cost 100
    /// instructions (callgrind); the operations' own spans name them.
    pub async fn dispatch(
        &self,
        op: &'static Operation,
        caller: &Caller,
        input: Input,
        idempotency_key: Option<&str>,
    ) -> Result<Reply, Problem> {
        caller.require(op.scope)?;
        check_query(op, &input)?;
        if op.body.is_some() {
            match &input.body {
                None | Some(Value::Object(_)) => {}
                Some(_) => {
                    return Err(Problem::bad_request(
                        "the request body must be a JSON object",
                    ))
                }
            }
        }
        match idempotency_key {
            // Boxed: inline, the claim, replay and store steps made every call's future a
            // kilobyte larger, to be set up and moved on each request (docs/performance-history.md).
            Some(key) if op.idempotency_key => {
                Box::pin(self.dispatch_idempotent(op, caller, input, key)).await
            }
            _ => (op.handler)(self, caller, input).await,
        }
    }

    /// [`Api::dispatch`] of an operation that takes an `Idempotency-Key`, with one.
    async fn dispatch_idempotent(
        &self,
        op: &'static Operation,
        caller: &Caller,
        mut input: Input,
        key: &str,
    ) -> Result<Reply, Problem> {
        if key.is_empty() || key.len() > crm_app::idempotency::MAX_KEY_LEN {
            return Err(
                Problem::bad_request("Idempotency-Key must be 1 to 255 characters")
                    .with("field", "Idempotency-Key"),
            );
        }
        let tenant = &caller.tenant;
        let claim = match self
            .app
            .claim_idempotency(tenant, key, &fingerprint(op, &input))
            .await?
        {
            Claim::Replay(stored) => {
                let body: Value = serde_json::from_slice(&stored.body).unwrap_or(Value::Null);
                if stored.status >= 400 {
                    let code = body
                        .get("code")
                        .and_then(Value::as_str)
                        .and_then(ErrorCode::parse)
                        .unwrap_or(ErrorCode::InternalError);
                    let mut p = Problem::new(
                        code,
                        body.get("detail")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    );
                    if let Value::Object(map) = body {
                        for (k, v) in map {
                            if !["type", "title", "status", "detail", "code"].contains(&k.as_str())
                            {
                                p.extra.insert(k, v);
                            }
                        }
                    }
                    return Err(p.replayed());
                }
                let mut reply = Reply::record(stored.status, body);
                reply.replayed = true;
                return Ok(reply);
            }
            Claim::Fresh(claim) => claim,
        };
        input.idem = Some(claim.clone());
        let result = (op.handler)(self, caller, input).await;
        match &result {
            Ok(_) => {} // stored by the operation's own transaction
            Err(p) if p.status() < 500 => {
                let body = serde_json::to_vec(&self.problem_json(p)).unwrap_or_default();
                self.app
                    .finish_idempotency(
                        tenant,
                        &claim,
                        &StoredReply {
                            status: p.status(),
                            body,
                        },
                    )
                    .await?;
            }
            Err(_) => self.app.release_idempotency(tenant, &claim).await?,
        }
        result
    }
}

/// The path and query of a call of `op` (see [`check_query_params`]). A path parameter holding
/// NUL is refused as a query value is: no store can compare text containing it.
fn check_query(op: &Operation, input: &Input) -> Result<(), Problem> {
    if let Some((name, _)) = input.path.iter().find(|(_, v)| v.contains('\0')) {
        return Err(nul_problem(name));
    }
    check_query_params(op.query, &input.query)
}

/// 400 for a parameter (`field`) whose name or value holds U+0000 (decisions §22): a store would
/// fail on it (Postgres refuses NUL in text) or read it as the end of the text (SQLite's `LIKE`
/// pattern), so that `q=%00a` would match every record.
fn nul_problem(field: &str) -> Problem {
    Problem::bad_request(format!(
        "`{}` must not contain the NUL character (%00)",
        field.replace('\0', "%00")
    ))
    .with("field", field.replace('\0', "%00"))
}

/// Unknown or repeated query parameters are refused, naming the accepted ones (`params`), and
/// required ones must be given. A custom-field filter's two spellings (`custom_fields.k`,
/// `custom_fields[k]`) count as the same parameter. Public for the REST aliases, whose query is
/// their own.
pub fn check_query_params(
    params: &[catalog::QueryParam],
    query: &[(String, String)],
) -> Result<(), Problem> {
    let canonical = |name: &str| {
        params.iter().find_map(|q| {
            q.key_of(name).map(|key| {
                if key.is_empty() {
                    q.name.to_owned()
                } else {
                    format!("{}.{key}", q.name)
                }
            })
        })
    };
    if let Some((name, _)) = query
        .iter()
        .find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(nul_problem(name));
    }
    let mut seen: Vec<String> = Vec::with_capacity(query.len());
    for (name, _) in query {
        let Some(param) = canonical(name) else {
            let valid: Vec<String> = params
                .iter()
                .map(|q| {
                    if q.kind == catalog::ParamKind::FieldMap {
                        format!("{}.<key>", q.name)
                    } else {
                        q.name.to_owned()
                    }
                })
                .collect();
            let mut p = Problem::bad_request(format!("unknown query parameter `{name}`"))
                .with("field", name.as_str())
                .with("valid_options", valid.clone());
            if let Some(s) = crm_domain::suggest::closest(name, valid.iter().map(String::as_str)) {
                p = p.with("suggestion", format!("did you mean `{s}`?"));
            }
            return Err(p);
        };
        if seen.contains(&param) {
            return Err(Problem::bad_request(format!(
                "query parameter `{param}` is given more than once"
            ))
            .with("field", param.as_str()));
        }
        seen.push(param);
    }
    for q in params.iter().filter(|q| q.required) {
        if query
            .iter()
            .find(|(k, _)| k == q.name)
            .is_none_or(|(_, v)| v.is_empty())
        {
            return Err(Problem::validation(
                q.name,
                format!("{} is required", q.name),
            ));
        }
    }
    Ok(())
}

/// "The same request": method, concrete path and canonical body (keys sorted).
fn fingerprint(op: &Operation, input: &Input) -> String {
    let mut path = op.path.to_owned();
    for (k, v) in &input.path {
        path = path.replace(&format!("{{{k}}}"), v);
    }
    let mut h = Sha256::new();
    h.update(op.method.as_str());
    h.update(b" ");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(canonical_json(input.body.as_ref().unwrap_or(&Value::Null)).as_bytes());
    hex::encode(h.finalize())
}

pub fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), canonical_json(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(canonical_json)
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_in_a_query_name_or_value_is_a_bad_request() {
        let params = [catalog::QueryParam::string("q", "text")];
        for query in [
            vec![("q".to_owned(), "a\0b".to_owned())],
            vec![("q".to_owned(), "\0a".to_owned())],
            vec![("q\0".to_owned(), "a".to_owned())],
        ] {
            let p = check_query_params(&params, &query).unwrap_err();
            assert_eq!(p.code, ErrorCode::BadRequest, "{query:?}");
            assert!(!p.extra["field"].as_str().unwrap().contains('\0'));
        }
        assert!(check_query_params(&params, &[("q".to_owned(), "ab".to_owned())]).is_ok());
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"z":0,"y":1}],"c":null}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }
}
