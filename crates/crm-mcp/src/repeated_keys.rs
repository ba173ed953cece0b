//! A key repeated in one object of an MCP request. rmcp reads the body with serde_json, which
//! keeps the last of a repeated key; REST refuses such a body (decisions §22), so that a client
//! never has half of what it sent silently ignored. The body is read here first, and a tool call
//! whose request repeats a key answers the 400 REST would, counted as REST counts it.

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::header,
};
use crm_api::{agent::ToolArguments, Operation, Problem, ReadRequest};

use crate::MAX_BODY_BYTES;

/// The problem of a request whose JSON repeats a key, found by [`mark`].
#[derive(Debug, Clone)]
pub(crate) struct RepeatedKey(pub Problem);

/// Reads `req`'s body and marks the request with [`RepeatedKey`] when its JSON repeats a key.
/// A body declared over the limit goes on unread (rmcp answers its size). A body without a
/// declared length (chunked) is read up to the limit here, so that it gets the same check as a
/// sized one; one that runs past the limit is answered 413 as REST answers it. A body that
/// cannot be read whole is answered as REST answers it (408, 400).
pub(crate) async fn mark(req: Request) -> Result<Request, Problem> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Ok(req);
    }
    let (mut parts, body) = req.into_parts();
    let bytes: Bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            // Only a body without a declared length can run past the limit: hyper ends a sized
            // one at its length.
            let over = crm_api::body::caused_by::<http_body_util::LengthLimitError>(&e);
            crm_api::body::unreadable(&e, over, MAX_BODY_BYTES)
        })?;
    if let Some(problem) = repeated_key(&bytes) {
        parts.extensions.insert(RepeatedKey(problem));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The 400 for JSON that is well formed but repeats a key in one object; `None` for any other
/// body (rmcp answers malformed JSON itself).
fn repeated_key(bytes: &[u8]) -> Option<Problem> {
    let error = crm_api::strict_json::check(bytes).err()?;
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok()
        .then(|| Problem::bad_request(format!("malformed JSON: {error}")))
}

/// A tool call's arguments, or the problem its request was marked with.
pub(crate) enum Arguments {
    Read(ToolArguments),
    Refused(Problem),
}

impl ReadRequest for Arguments {
    async fn read(self, op: &'static Operation) -> Result<crm_api::Request, Problem> {
        match self {
            Arguments::Read(arguments) => arguments.read(op).await,
            Arguments::Refused(problem) => Err(problem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_json_with_a_repeated_key_is_marked() {
        let p = repeated_key(br#"{"params": {"arguments": {"email": "a", "email": "b"}}}"#)
            .expect("a repeated key is marked");
        assert_eq!(p.code, crm_api::ErrorCode::BadRequest);
        assert!(
            p.detail.contains("the key `email` appears twice"),
            "{}",
            p.detail
        );
        assert!(repeated_key(br#"{"a": {"email": "a"}, "b": {"email": "b"}}"#).is_none());
        assert!(repeated_key(b"{\"a\": ").is_none());
    }
}
