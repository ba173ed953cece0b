//! A2A tasks: what one `SendMessage` produced, and its rendering in the two wire formats this
//! endpoint speaks. A2A 1.0 is ProtoJSON (`TASK_STATE_COMPLETED`, `ROLE_AGENT`, parts as
//! `{"data": …}`); 0.3 has lower-case states, `kind` discriminators and `{"kind": "data", …}`
//! parts. Every task here is finished when it is created: an operation runs to its end within the
//! request.

use serde_json::{json, Map, Value};

/// Which revision's names and shapes to answer with: the method name a request used decides
/// (`SendMessage`/`GetTask` are 1.0, `message/send`/`tasks/get` are 0.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    V1,
    V03,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The operation succeeded; its REST response body is the artifact.
    Completed,
    /// The operation failed; its problem document is in `status.message`.
    Failed,
    /// The message was no tool call this agent can run (no `{"tool", "arguments"}` data part, an
    /// unknown tool); nothing ran.
    Rejected,
}

impl State {
    fn name(self, wire: Wire) -> &'static str {
        match (self, wire) {
            (State::Completed, Wire::V1) => "TASK_STATE_COMPLETED",
            (State::Failed, Wire::V1) => "TASK_STATE_FAILED",
            (State::Rejected, Wire::V1) => "TASK_STATE_REJECTED",
            (State::Completed, Wire::V03) => "completed",
            (State::Failed, Wire::V03) => "failed",
            (State::Rejected, Wire::V03) => "rejected",
        }
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The REST response body and status.
    Completed { body: Value, status: u16 },
    /// An operation's problem document.
    Failed { problem: Value },
    /// Why the message was not run, as a problem document.
    Rejected { problem: Value },
}

/// A finished task, kept in the 1.0 shapes and rendered per request.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    /// The tool the message named, when it named one.
    pub tool: Option<String>,
    pub outcome: Outcome,
    /// The user's message, in 1.0 shape, with `taskId` and `contextId` set.
    pub request: Value,
    /// Id of the result artifact, or of the agent message carrying the problem.
    pub answer_id: String,
    /// RFC 3339.
    pub timestamp: String,
}

impl Task {
    pub fn state(&self) -> State {
        match self.outcome {
            Outcome::Completed { .. } => State::Completed,
            Outcome::Failed { .. } => State::Failed,
            Outcome::Rejected { .. } => State::Rejected,
        }
    }

    /// The task as `wire` spells it; `history_length` 0 leaves the history out.
    pub fn render(&self, wire: Wire, history_length: Option<u64>) -> Value {
        let mut status = json!({"state": self.state().name(wire), "timestamp": self.timestamp});
        let mut task = Map::new();
        if wire == Wire::V03 {
            task.insert("kind".into(), "task".into());
        }
        task.insert("id".into(), self.id.clone().into());
        task.insert("contextId".into(), self.context_id.clone().into());
        match &self.outcome {
            Outcome::Completed { body, .. } => {
                let artifact = json!({
                    "artifactId": self.answer_id,
                    "name": "result",
                    "description": "The operation's REST response body.",
                    "parts": [part_to(wire, &json!({"data": body, "mediaType": "application/json"}))],
                });
                task.insert("status".into(), status);
                task.insert("artifacts".into(), json!([artifact]));
            }
            Outcome::Failed { problem } | Outcome::Rejected { problem } => {
                let detail = problem
                    .get("detail")
                    .and_then(Value::as_str)
                    .unwrap_or("the call failed");
                let message = json!({
                    "messageId": self.answer_id,
                    "contextId": self.context_id,
                    "taskId": self.id,
                    "role": "ROLE_AGENT",
                    "parts": [{"text": detail}, {"data": problem, "mediaType": "application/problem+json"}],
                });
                status["message"] = message_to(wire, &message);
                task.insert("status".into(), status);
            }
        }
        if history_length != Some(0) {
            task.insert("history".into(), json!([message_to(wire, &self.request)]));
        }
        let mut metadata = json!({"tool": self.tool});
        if let Outcome::Completed { status, .. } = &self.outcome {
            metadata["httpStatus"] = (*status).into();
        }
        task.insert("metadata".into(), metadata);
        Value::Object(task)
    }
}

/// A message in `wire`'s shape, from either shape.
pub fn message_to(wire: Wire, message: &Value) -> Value {
    let Value::Object(m) = message else {
        return message.clone();
    };
    let mut out = m.clone();
    match wire {
        Wire::V1 => {
            out.remove("kind");
        }
        Wire::V03 => {
            out.insert("kind".into(), "message".into());
        }
    }
    if let Some(role) = m.get("role").and_then(Value::as_str) {
        let role = match (wire, role) {
            (Wire::V1, "user") => "ROLE_USER",
            (Wire::V1, "agent") => "ROLE_AGENT",
            (Wire::V03, "ROLE_USER") => "user",
            (Wire::V03, "ROLE_AGENT") => "agent",
            (_, other) => other,
        };
        out.insert("role".into(), role.into());
    }
    if let Some(parts) = m.get("parts").and_then(Value::as_array) {
        out.insert(
            "parts".into(),
            parts.iter().map(|p| part_to(wire, p)).collect(),
        );
    }
    Value::Object(out)
}

/// A part in `wire`'s shape, from either shape. 1.0 parts hold one of `text`, `data`, `raw` or
/// `url` (with `mediaType`, `filename`); 0.3 parts say their `kind` and keep files under `file`.
pub fn part_to(wire: Wire, part: &Value) -> Value {
    let Value::Object(p) = part else {
        return part.clone();
    };
    let mut out = p.clone();
    match wire {
        Wire::V1 => {
            if out.remove("kind").as_ref().and_then(Value::as_str) == Some("file") {
                if let Some(Value::Object(file)) = out.remove("file") {
                    for (from, to) in [
                        ("bytes", "raw"),
                        ("uri", "url"),
                        ("mimeType", "mediaType"),
                        ("name", "filename"),
                    ] {
                        if let Some(v) = file.get(from) {
                            out.insert(to.into(), v.clone());
                        }
                    }
                }
            }
        }
        Wire::V03 => {
            if !out.contains_key("kind") {
                let kind = if out.contains_key("text") {
                    "text"
                } else if out.contains_key("data") {
                    "data"
                } else {
                    "file"
                };
                if kind == "file" {
                    let mut file = Map::new();
                    for (from, to) in [
                        ("raw", "bytes"),
                        ("url", "uri"),
                        ("mediaType", "mimeType"),
                        ("filename", "name"),
                    ] {
                        if let Some(v) = out.remove(from) {
                            file.insert(to.into(), v);
                        }
                    }
                    out.insert("file".into(), Value::Object(file));
                }
                // 0.3 has no media type on text and data parts; the data part's content says it all.
                if kind != "file" {
                    out.remove("mediaType");
                }
                out.insert("kind".into(), kind.into());
            }
        }
    }
    Value::Object(out)
}

/// The tool call a message carries: the first data part holding an object with a `tool` member
/// (`{"data": …}` in 1.0, `{"kind": "data", "data": …}` in 0.3).
pub fn tool_call(message: &Value) -> Option<&Map<String, Value>> {
    message.get("parts")?.as_array()?.iter().find_map(|part| {
        part.get("data")?
            .as_object()
            .filter(|d| d.contains_key("tool"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(outcome: Outcome) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            tool: Some("svc_get_contact".into()),
            outcome,
            request: json!({"messageId": "m1", "role": "ROLE_USER", "taskId": "t1", "contextId": "c1",
                "parts": [{"data": {"tool": "svc_get_contact", "arguments": {"id": "con_1"}}}]}),
            answer_id: "a1".into(),
            timestamp: "2026-01-02T03:04:05.678Z".into(),
        }
    }

    #[test]
    fn a_completed_task_carries_the_body_as_an_artifact_data_part() {
        let body = json!({"id": "con_1", "object": "contact"});
        let t = task(Outcome::Completed {
            body: body.clone(),
            status: 200,
        })
        .render(Wire::V1, None);
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(t["artifacts"][0]["parts"][0]["data"], body);
        assert_eq!(t["metadata"]["httpStatus"], 200);
        assert_eq!(
            t["history"][0]["parts"][0]["data"]["tool"],
            "svc_get_contact"
        );
        assert!(t.get("kind").is_none());

        let t = task(Outcome::Completed {
            body: body.clone(),
            status: 200,
        })
        .render(Wire::V03, Some(0));
        assert_eq!(
            (t["kind"].as_str(), t["status"]["state"].as_str()),
            (Some("task"), Some("completed"))
        );
        assert_eq!(
            t["artifacts"][0]["parts"][0],
            json!({"kind": "data", "data": body})
        );
        assert!(t.get("history").is_none());
    }

    #[test]
    fn a_failed_task_carries_the_problem_document_as_a_data_part_of_its_status_message() {
        let problem = json!({"code": "not_found", "status": 404, "detail": "no contact"});
        let t = task(Outcome::Failed {
            problem: problem.clone(),
        })
        .render(Wire::V1, None);
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert_eq!(t["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(t["status"]["message"]["parts"][0]["text"], "no contact");
        assert_eq!(t["status"]["message"]["parts"][1]["data"], problem);
        assert!(t.get("artifacts").is_none());

        let t = task(Outcome::Rejected {
            problem: problem.clone(),
        })
        .render(Wire::V03, None);
        assert_eq!(t["status"]["state"], "rejected");
        assert_eq!(t["status"]["message"]["kind"], "message");
        assert_eq!(t["status"]["message"]["role"], "agent");
        assert_eq!(
            t["status"]["message"]["parts"][1],
            json!({"kind": "data", "data": problem})
        );
        assert_eq!(t["history"][0]["role"], "user");
    }

    #[test]
    fn messages_convert_between_the_two_shapes() {
        let v03 = json!({"kind": "message", "messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"tool": "x"}}, {"kind": "file", "file": {"uri": "https://f", "mimeType": "text/plain"}}]});
        let v1 = message_to(Wire::V1, &v03);
        assert_eq!(
            v1,
            json!({"messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "hi"}, {"data": {"tool": "x"}}, {"url": "https://f", "mediaType": "text/plain"}]})
        );
        assert_eq!(message_to(Wire::V03, &v1), v03);
    }

    #[test]
    fn the_tool_call_is_the_first_data_part_naming_a_tool() {
        let m = json!({"parts": [{"text": "please"}, {"data": {"note": 1}}, {"kind": "data", "data": {"tool": "svc_list_contacts"}}]});
        assert_eq!(
            tool_call(&m).and_then(|c| c["tool"].as_str()),
            Some("svc_list_contacts")
        );
        assert!(tool_call(&json!({"parts": [{"text": "hi"}]})).is_none());
        assert!(tool_call(&json!({})).is_none());
    }
}
