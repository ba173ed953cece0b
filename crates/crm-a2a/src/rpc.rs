//! The JSON-RPC binding of A2A: the envelope, the methods this agent serves, and their errors.
//!
//! Served: `SendMessage` and `GetTask` (A2A 1.0), and their 0.3 names `message/send` and
//! `tasks/get`, answered in 0.3 shapes. The other methods of the protocol have nothing to act on
//! here (every task is finished when `SendMessage` returns, nothing streams, nothing is pushed)
//! and answer the protocol's own errors for that.

use std::sync::Arc;

use crm_api::{agent, Credentials, Problem, RateSlot};
use crm_app::{Caller, Channel, Origin};
use serde_json::{json, Map, Value};

use crate::{
    task::{message_to, tool_call, Outcome, Task, Wire},
    Agent,
};

/// JSON-RPC and A2A error codes (A2A §9.5).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

#[derive(Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

fn err(code: i64, message: impl Into<String>) -> RpcError {
    RpcError {
        code,
        message: message.into(),
    }
}

fn response(id: Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
        }
    }
}

/// Answers one JSON-RPC request of an authenticated caller. `a2a_version` is the request's
/// `A2A-Version` header; `request_id` goes into the problem document of a 500.
pub async fn handle(
    agent: &Agent,
    caller: &Caller,
    a2a_version: Option<&str>,
    body: &[u8],
    request_id: &str,
    rate: &RateSlot,
) -> Value {
    let request: Value = match crm_api::strict_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return response(
                Value::Null,
                Err(err(code::PARSE_ERROR, format!("the body is not JSON: {e}"))),
            )
        }
    };
    let id = request
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    let outcome = match envelope(&request, a2a_version) {
        Ok((method, params)) => dispatch(agent, caller, method, params, request_id, rate).await,
        Err(e) => Err(e),
    };
    response(id, outcome)
}

/// The method and params of a well-formed JSON-RPC 2.0 request.
fn envelope<'a>(
    request: &'a Value,
    a2a_version: Option<&str>,
) -> Result<(&'a str, &'a Value), RpcError> {
    let Some(request) = request.as_object() else {
        return Err(err(
            code::INVALID_REQUEST,
            "a JSON-RPC request is an object (batches are not supported)",
        ));
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(err(code::INVALID_REQUEST, "`jsonrpc` must be \"2.0\""));
    }
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return Err(err(code::INVALID_REQUEST, "`method` must be a string"));
    };
    if let Some(version) = a2a_version.map(str::trim).filter(|v| !v.is_empty()) {
        // 1.0 and 0.3 are served; the method name says which shapes to answer in.
        if !matches!(version.split('.').next(), Some("1" | "0")) {
            return Err(err(
                code::VERSION_NOT_SUPPORTED,
                format!("A2A version {version} is not supported; use 1.0 (or 0.3)"),
            ));
        }
    }
    static EMPTY: Value = Value::Null;
    Ok((method, request.get("params").unwrap_or(&EMPTY)))
}

async fn dispatch(
    agent: &Agent,
    caller: &Caller,
    method: &str,
    params: &Value,
    request_id: &str,
    rate: &RateSlot,
) -> Result<Value, RpcError> {
    match method {
        "SendMessage" => send(agent, caller, Wire::V1, params, request_id, rate).await,
        "message/send" => send(agent, caller, Wire::V03, params, request_id, rate).await,
        "GetTask" => get(agent, caller, Wire::V1, params),
        "tasks/get" => get(agent, caller, Wire::V03, params),
        "CancelTask" | "tasks/cancel" => {
            let id = task_id(params)?;
            match agent.tasks.get(&caller.tenant, id) {
                Some(_) => Err(err(
                    code::TASK_NOT_CANCELABLE,
                    format!("task {id} is already finished"),
                )),
                None => Err(not_found(id)),
            }
        }
        "SendStreamingMessage" | "message/stream" | "SubscribeToTask" | "tasks/resubscribe" => {
            Err(err(
                code::UNSUPPORTED_OPERATION,
                "streaming is not supported: SendMessage answers with the finished task",
            ))
        }
        "ListTasks" => Err(err(
            code::UNSUPPORTED_OPERATION,
            "ListTasks is not supported: read a task with GetTask",
        )),
        "GetExtendedAgentCard" | "agent/getAuthenticatedExtendedCard" => Err(err(
            code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            "there is no extended agent card: the public card lists every skill",
        )),
        m if m.contains("PushNotificationConfig")
            || m.starts_with("tasks/pushNotificationConfig/") =>
        {
            Err(err(
                code::PUSH_NOTIFICATION_NOT_SUPPORTED,
                "push notifications are not supported: tasks finish within SendMessage",
            ))
        }
        other => Err(err(
            code::METHOD_NOT_FOUND,
            format!("no method `{other}`; this agent serves SendMessage and GetTask"),
        )),
    }
}

fn not_found(id: &str) -> RpcError {
    err(code::TASK_NOT_FOUND, format!("no task {id} (tasks are kept for a while, for the workspace and mode that created them)"))
}

fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err(code::INVALID_PARAMS, "params.id must be a task id"))
}

/// `historyLength` of a request, where it is a non-negative number.
fn history_length(value: Option<&Value>) -> Option<u64> {
    value
        .and_then(Value::as_f64)
        .filter(|n| *n >= 0.0)
        .map(|n| n as u64)
}

fn get(agent: &Agent, caller: &Caller, wire: Wire, params: &Value) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let task = agent
        .tasks
        .get(&caller.tenant, id)
        .ok_or_else(|| not_found(id))?;
    // A task holds its operation's answer: a key that may not run the operation may not read
    // it either (a key of the workspace with other scopes would read records through it).
    let allowed = task.tool.as_deref().is_none_or(|tool| {
        crm_api::catalog()
            .iter()
            .find(|op| op.name == tool)
            .is_none_or(|op| caller.require(op.scope).is_ok())
    });
    if !allowed {
        return Err(not_found(id));
    }
    Ok(task.render(wire, history_length(params.get("historyLength"))))
}

async fn send(
    agent: &Agent,
    caller: &Caller,
    wire: Wire,
    params: &Value,
    request_id: &str,
    rate: &RateSlot,
) -> Result<Value, RpcError> {
    let message = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| err(code::INVALID_PARAMS, "params.message must be a message"))?;
    if !message.get("parts").is_some_and(Value::is_array) {
        return Err(err(
            code::INVALID_PARAMS,
            "message.parts must be an array of parts",
        ));
    }
    // Every task is finished when it is created, so none can take a follow-up message.
    if let Some(id) = message
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        return Err(match agent.tasks.get(&caller.tenant, id) {
            Some(_) => err(
                code::UNSUPPORTED_OPERATION,
                format!("task {id} is finished; send a new message without taskId"),
            ),
            None => not_found(id),
        });
    }
    let id = agent.api.new_uuid();
    let context_id = match message
        .get("contextId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(c) => c.to_owned(),
        None => agent.api.new_uuid(),
    };
    let mut request = message_to(Wire::V1, message);
    request["taskId"] = id.clone().into();
    request["contextId"] = context_id.clone().into();
    let (tool, outcome) = run(agent, caller, message, request_id, rate).await;
    let task = Task {
        id,
        context_id,
        tool,
        outcome,
        request,
        answer_id: agent.api.new_uuid(),
        timestamp: agent.api.now(),
    };
    let rendered = task.render(
        wire,
        history_length(
            params
                .get("configuration")
                .and_then(|c| c.get("historyLength")),
        ),
    );
    agent.tasks.insert(&caller.tenant, task);
    Ok(match wire {
        Wire::V1 => json!({"task": rendered}),
        Wire::V03 => rendered,
    })
}

/// Runs the tool call of `message`: the operation's outcome, or why the message was rejected.
async fn run(
    agent: &Agent,
    caller: &Caller,
    message: &Value,
    request_id: &str,
    rate: &RateSlot,
) -> (Option<String>, Outcome) {
    let rejected = |p: Problem| Outcome::Rejected {
        problem: agent.api.problem_json(&p),
    };
    let Some(call) = tool_call(message) else {
        let p = Problem::bad_request("the message holds no tool call: send a data part {\"tool\": \"<skill id>\", \"arguments\": {...}}")
            .with("field", "parts");
        return (None, rejected(p));
    };
    let Some(name) = call.get("tool").and_then(Value::as_str) else {
        return (
            None,
            rejected(
                Problem::bad_request("`tool` must be a string naming a skill")
                    .with("field", "tool"),
            ),
        );
    };
    let op = match agent::find_tool(name) {
        Ok(op) => op,
        Err(p) => return (Some(name.to_owned()), rejected(p)),
    };
    let arguments = match call.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => {
            return (
                Some(name.to_owned()),
                rejected(
                    Problem::bad_request("`arguments` must be an object")
                        .with("field", "arguments"),
                ),
            )
        }
    };
    let answer = agent
        .api
        .call(
            op,
            Credentials::Caller(caller),
            Origin {
                channel: Channel::A2a,
                request_id: (!request_id.is_empty()).then(|| Arc::from(request_id)),
            },
            agent::ToolArguments(arguments),
        )
        .await;
    rate.set(answer.rate);
    let outcome = match answer.result {
        Ok(reply) => Outcome::Completed {
            body: reply.body.into_value(),
            status: reply.status,
        },
        Err(p) => Outcome::Failed {
            problem: agent::problem_document(&agent.api, &p, request_id),
        },
    };
    (Some(name.to_owned()), outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_envelopes_are_invalid_requests() {
        assert_eq!(
            envelope(&json!([]), None).unwrap_err().code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            envelope(&json!({"jsonrpc": "1.0", "method": "GetTask"}), None)
                .unwrap_err()
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            envelope(&json!({"jsonrpc": "2.0"}), None).unwrap_err().code,
            code::INVALID_REQUEST
        );
        let ok = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}});
        assert_eq!(
            envelope(&ok, Some("1.0")).map(|(m, p)| (m, p["id"].clone())),
            Ok(("GetTask", json!("t")))
        );
        assert_eq!(envelope(&ok, None).map(|(m, _)| m), Ok("GetTask"));
        assert_eq!(
            envelope(&ok, Some("2.0")).unwrap_err().code,
            code::VERSION_NOT_SUPPORTED
        );
    }

    #[test]
    fn responses_carry_the_request_id() {
        assert_eq!(
            response(json!(7), Ok(json!({"a": 1}))),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"a": 1}})
        );
        assert_eq!(
            response(json!("x"), Err(err(code::TASK_NOT_FOUND, "no"))),
            json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32001, "message": "no"}})
        );
    }

    #[test]
    fn history_length_reads_integral_numbers() {
        assert_eq!(history_length(Some(&json!(0))), Some(0));
        assert_eq!(history_length(Some(&json!(3.0))), Some(3));
        assert_eq!(history_length(Some(&json!(-1))), None);
        assert_eq!(history_length(None), None);
    }
}
