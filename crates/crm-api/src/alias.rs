//! A second route of an operation ([`Alias`]): its path parameters and query become body fields
//! of the operation, with the alias's `action`, so the operation sees the same input a tool call
//! would send.

use serde_json::Value;

use crate::{
    body::JsonBody,
    operation::{Alias, Input, Operation},
    problem::Problem,
    query::check_query_params,
};

/// Folds the alias route's input into the operation's.
///
/// The path names the record and the method the action: the query may hold only the alias's
/// own parameters (400 `bad_request`, as an unknown parameter on any route) and the body only
/// its own fields (422 `unknown_field`, as an unknown field in any body), so that a `key` in the
/// query cannot name another stage than the path does.
pub(crate) fn fold(op: &Operation, alias: &Alias, input: &mut Input) -> Result<(), Problem> {
    check_query_params(alias.query, &input.query)?;
    let mut body = match input.body.take().map(JsonBody::into_value) {
        None => serde_json::Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(Problem::bad_request(
                "the request body must be a JSON object",
            ))
        }
    };
    if let Some(unknown) = body.keys().find(|k| !alias.fields.contains(&k.as_str())) {
        let hint = format!("this route's path and method name the record and the action; other fields go to {} /v1{}", op.method.as_str(), op.path);
        return Err(Problem::unknown_field(unknown, alias.fields, Some(&hint)));
    }
    let own: Vec<&str> = op.path_params();
    let extra: Vec<(String, String)> = input
        .path
        .iter()
        .filter(|(k, _)| !own.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in extra.into_iter().chain(std::mem::take(&mut input.query)) {
        input.path.remove(&k);
        body.insert(k, Value::String(v));
    }
    body.insert("action".into(), Value::from(alias.action));
    input.body = Some(JsonBody::Value(Value::Object(body)));
    Ok(())
}
