//! `Idempotency-Key` around an operation's handler (decisions §9): claim the key, replay the
//! stored answer of a repeated request, store a 4xx, give the key back on a 5xx. A success is
//! stored by the operation's own transaction.

use crm_app::{idempotency::Claim, idempotency::StoredReply, Caller};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    body::JsonBody,
    operation::{Input, Operation, Reply},
    problem::{ErrorCode, Problem},
    Api,
};

/// An `Idempotency-Key` in the shape the document states: 1 to 255 characters. Checked on every
/// call that carries one, a dry run too, which neither reads nor claims it but must refuse what
/// the real write refuses.
pub(crate) fn check_key(key: &str) -> Result<(), Problem> {
    if key.is_empty() || key.len() > crm_app::idempotency::MAX_KEY_LEN {
        return Err(
            Problem::bad_request("Idempotency-Key must be 1 to 255 characters")
                .with("field", "Idempotency-Key"),
        );
    }
    Ok(())
}

/// Runs `op`, which takes an `Idempotency-Key`, for a call with one: a repeated request is
/// answered what the first was (a success or a 4xx), and a 5xx gives the key back.
pub(crate) async fn dispatch(
    api: &Api,
    op: &'static Operation,
    caller: &Caller,
    mut input: Input,
    key: &str,
) -> Result<Reply, Problem> {
    check_key(key)?;
    let tenant = &caller.tenant;
    let claim = match api
        .app
        .claim_idempotency(tenant, key, &fingerprint(op, &input), op.success_status)
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
                        if !["type", "title", "status", "detail", "code"].contains(&k.as_str()) {
                            p.extra.insert(k, v);
                        }
                    }
                }
                return Err(p.replayed());
            }
            // An upsert stored its outcome beside the record, to send as `Upsert-Outcome` again.
            if let Some(outcome) = body
                .get("upsert_outcome")
                .and_then(Value::as_str)
                .and_then(crm_app::upserts::UpsertOutcome::parse)
            {
                let record = body.get("record").cloned().unwrap_or(Value::Null);
                return Ok(
                    Reply::replay(stored.status, record).with_upsert_outcome(outcome.as_str())
                );
            }
            return Ok(Reply::replay(stored.status, body));
        }
        Claim::Fresh(claim) => claim,
    };
    input.idem = Some(claim.clone());
    let result = (op.handler)(api, caller, input).await;
    match &result {
        Ok(_) => {} // stored by the operation's own transaction
        Err(p) if p.status() < 500 => {
            let body = serde_json::to_vec(&api.problem_json(p)).unwrap_or_default();
            api.app
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
        Err(_) => api.app.release_idempotency(tenant, &claim).await?,
    }
    result
}

/// "The same request": method, concrete path, canonical body (keys sorted) and the query's
/// parameters (sorted), which can change what a write does (an upsert's `match`). A request
/// without a query hashes as it did before queries counted, so a retry across that change
/// still replays.
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
    let body = input.body.as_ref().map(JsonBody::to_value);
    h.update(canonical_json(body.as_deref().unwrap_or(&Value::Null)).as_bytes());
    if !input.query.is_empty() {
        let mut query: Vec<&(String, String)> = input.query.iter().collect();
        query.sort();
        h.update(b"\n?");
        for (k, v) in query {
            h.update(canonical_json(&Value::from(k.as_str())).as_bytes());
            h.update(b"=");
            h.update(canonical_json(&Value::from(v.as_str())).as_bytes());
            h.update(b"&");
        }
    }
    hex::encode(h.finalize())
}

fn canonical_json(v: &Value) -> String {
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
