//! Running a catalog operation for the signed-in user: its arguments as an agent tool call's
//! (one flat object: path and query parameters as strings, the rest the body), through
//! [`crm_api::Api::call`], with the session's caller and channel `console`. The page's request
//! was admitted once (rate limit, quota, metering) when its session was read ([`Signed`]).

use crm_api::{agent::ToolArguments, Credentials, Problem};
use serde_json::{Map, Value};

use crate::{session::Signed, State};

/// Runs operation `name` with `args`; its answer as JSON, or the problem.
pub async fn call(
    state: &State,
    signed: &Signed,
    name: &'static str,
    args: Map<String, Value>,
) -> Result<Value, Problem> {
    let op = crm_api::catalog::find(name).ok_or_else(|| {
        Problem::bad_request(format!("the console asked for `{name}`, no operation"))
    })?;
    let answer = state
        .api
        .call(
            op,
            Credentials::Admitted(&signed.caller),
            signed.caller.origin().clone(),
            ToolArguments(args),
        )
        .await;
    answer.result.map(|reply| reply.body.into_value())
}

/// A JSON object from pairs, for [`call`]'s arguments.
#[macro_export]
macro_rules! args {
    ($($key:expr => $value:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut map = serde_json::Map::new();
        $(map.insert(($key).to_string(), serde_json::Value::from($value));)*
        map
    }};
}
