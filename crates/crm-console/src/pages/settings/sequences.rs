//! Settings: sequences. The list; each sequence's page shows its trigger, exit conditions and
//! steps, its preview on request (`svc_preview_sequence`: each step's send offset, how many
//! records would enroll now, merge tags nothing fills), enrolls a contact by id, and lists its
//! enrollments (`svc_list_sequence_enrollments`) with Unenroll on an active one.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_app::Scope;
use serde_json::Value;

use crate::{
    args,
    chrome::Chrome,
    form::{encode, Form},
    ops::call,
    pages::fields::value_text,
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

/// Enrollments shown on a sequence's page.
const ENROLLMENTS_LIMIT: &str = "100";

pub struct SequenceRow {
    pub id: String,
    pub name: String,
    pub trigger: String,
    pub steps: usize,
    pub enabled: bool,
}

pub struct Step {
    pub number: usize,
    pub wait: String,
    pub subject: String,
    pub template_id: String,
}

pub struct Enrollment {
    pub id: String,
    pub contact_id: String,
    pub source: String,
    pub state: String,
    pub exit_reason: String,
    pub steps_sent: String,
    pub next_send_at: String,
    pub enrolled_at: String,
}

pub struct Preview {
    /// Each step: number, send offset from enrollment, subject.
    pub schedule: Vec<(String, String, String)>,
    pub would_enroll_now: String,
    pub warnings: Vec<String>,
}

#[derive(Template)]
#[template(path = "settings/sequences.html")]
struct ListPage {
    chrome: Chrome,
    sequences: Vec<SequenceRow>,
}

#[derive(Template)]
#[template(path = "settings/sequences_one.html")]
struct OnePage {
    chrome: Chrome,
    id: String,
    name: String,
    enabled: bool,
    trigger: String,
    trigger_filter: Vec<String>,
    exit_when: Vec<String>,
    steps: Vec<Step>,
    preview: Option<Preview>,
    enrollments: Vec<Enrollment>,
    can_write: bool,
    contact_id: String,
    notice: Option<&'static str>,
    error: Option<String>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/sequences", get(list))
        .route("/settings/sequences/{id}", get(show))
        .route("/settings/sequences/{id}/enroll", post(enroll))
        .route(
            "/settings/sequences/{id}/enrollments/{enrollment_id}/unenroll",
            post(unenroll),
        )
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "enrolled" => "Enrolled (a contact already enrolled keeps its enrollment).",
        "unenrolled" => {
            "Unenrolled: no further steps are sent, and the contact cannot enroll in this sequence again."
        }
        _ => return None,
    })
}

fn to(path: &str) -> Response {
    Redirect::to(path).into_response()
}

/// `stage eq "won"`, `email exists`.
fn condition_text(c: &Value) -> String {
    let head = format!("{} {}", value_text(&c["field"]), value_text(&c["op"]));
    match c.get("value") {
        None | Some(Value::Null) => head,
        Some(v) => format!("{head} {v}"),
    }
}

fn conditions(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|all| all.iter().map(condition_text).collect())
        .unwrap_or_default()
}

/// `3 days`, `1 hour`, `90 seconds`.
fn wait_text(step: &Value) -> String {
    let units = [
        ("wait_days", "day"),
        ("wait_hours", "hour"),
        ("wait_seconds", "second"),
    ];
    units
        .iter()
        .find_map(|(key, unit)| {
            step[*key].as_i64().map(|n| {
                let plural = if n == 1 { "" } else { "s" };
                format!("{n} {unit}{plural}")
            })
        })
        .unwrap_or_default()
}

/// Seconds as `2d 3h 0m 5s`, leaving out leading zero units.
fn offset_text(seconds: i64) -> String {
    let (d, rest) = (seconds / 86_400, seconds % 86_400);
    let (h, rest) = (rest / 3_600, rest % 3_600);
    let (m, s) = (rest / 60, rest % 60);
    let parts = [(d, "d"), (h, "h"), (m, "m"), (s, "s")];
    let first = parts.iter().position(|(n, _)| *n != 0).unwrap_or(3);
    parts[first..]
        .iter()
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `GET /settings/sequences`.
async fn list(AxumState(state): AxumState<State>, signed: Signed) -> Response {
    let list = match call(
        &state,
        &signed,
        "svc_list_sequences",
        args! {"limit" => "100"},
    )
    .await
    {
        Ok(list) => list,
        Err(problem) => return problem_page(&signed, &problem),
    };
    let sequences = list["data"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|s| SequenceRow {
                    id: value_text(&s["id"]),
                    name: value_text(&s["name"]),
                    trigger: value_text(&s["trigger"]["event"]),
                    steps: s["steps"].as_array().map_or(0, Vec::len),
                    enabled: s["enabled"] == true,
                })
                .collect()
        })
        .unwrap_or_default();
    let body = ListPage {
        chrome: Chrome::new(&signed, "settings"),
        sequences,
    };
    page(200, &body)
}

/// `GET /settings/sequences/{id}` (`?preview=1` adds the preview).
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    render_one(
        &state,
        &signed,
        &id,
        query.get("preview").is_some(),
        notice,
        None,
        "",
    )
    .await
}

async fn render_one(
    state: &State,
    signed: &Signed,
    id: &str,
    with_preview: bool,
    notice: Option<&'static str>,
    error: Option<String>,
    contact_id: &str,
) -> Response {
    let seq = match call(state, signed, "svc_get_sequence", args! {"id" => id}).await {
        Ok(seq) => seq,
        Err(problem) => return problem_page(signed, &problem),
    };
    let preview = if with_preview {
        match call(state, signed, "svc_preview_sequence", args! {"id" => id}).await {
            Ok(p) => Some(preview_of(&p)),
            Err(problem) => return problem_page(signed, &problem),
        }
    } else {
        None
    };
    let enrollments = match call(
        state,
        signed,
        "svc_list_sequence_enrollments",
        args! {"id" => id, "limit" => ENROLLMENTS_LIMIT},
    )
    .await
    {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let steps = seq["steps"]
        .as_array()
        .map(|all| {
            all.iter()
                .enumerate()
                .map(|(i, s)| Step {
                    number: i + 1,
                    wait: wait_text(s),
                    subject: value_text(&s["subject"]),
                    template_id: value_text(&s["template_id"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let status = if error.is_some() { 422 } else { 200 };
    let body = OnePage {
        chrome: Chrome::new(signed, "settings"),
        id: value_text(&seq["id"]),
        name: value_text(&seq["name"]),
        enabled: seq["enabled"] == true,
        trigger: value_text(&seq["trigger"]["event"]),
        trigger_filter: conditions(&seq["trigger"]["filter"]),
        exit_when: conditions(&seq["exit_when"]),
        steps,
        preview,
        enrollments: enrollments["data"]
            .as_array()
            .map(|all| all.iter().map(enrollment_of).collect())
            .unwrap_or_default(),
        can_write: signed.caller.scopes.allows(Scope::write("sequences")),
        contact_id: contact_id.to_owned(),
        notice,
        error,
    };
    page(status, &body)
}

fn preview_of(p: &Value) -> Preview {
    Preview {
        schedule: p["schedule"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|line| {
                        (
                            value_text(&line["step"]),
                            offset_text(line["send_offset_seconds"].as_i64().unwrap_or(0)),
                            value_text(&line["subject"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        would_enroll_now: value_text(&p["would_enroll_now"]),
        warnings: p["warnings"]
            .as_array()
            .map(|all| all.iter().map(value_text).collect())
            .unwrap_or_default(),
    }
}

fn enrollment_of(e: &Value) -> Enrollment {
    Enrollment {
        id: value_text(&e["id"]),
        contact_id: value_text(&e["contact_id"]),
        source: format!(
            "{} {}",
            value_text(&e["source"]["object"]),
            value_text(&e["source"]["id"])
        )
        .trim()
        .to_owned(),
        state: value_text(&e["state"]),
        exit_reason: value_text(&e["exit_reason"]),
        steps_sent: value_text(&e["steps_sent"]),
        next_send_at: value_text(&e["next_send_at"]),
        enrolled_at: value_text(&e["enrolled_at"]),
    }
}

/// `POST /settings/sequences/{id}/enroll`: one contact by its id.
async fn enroll(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form }: Posted,
) -> Response {
    let contact_id = form.text("contact_id").unwrap_or_default();
    let body = args! {"id" => id.as_str(), "contact_id" => contact_id};
    match call(&state, &signed, "svc_enroll_contact", body).await {
        Ok(_) => to(&format!(
            "/settings/sequences/{}?notice=enrolled",
            encode(&id)
        )),
        Err(problem) => match form_refusal(&problem) {
            Some(error) => {
                render_one(&state, &signed, &id, false, None, Some(error), contact_id).await
            }
            None => problem_page(&signed, &problem),
        },
    }
}

/// `POST /settings/sequences/{id}/enrollments/{enrollment_id}/unenroll`.
async fn unenroll(
    AxumState(state): AxumState<State>,
    Path((id, enrollment_id)): Path<(String, String)>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    let body = args! {"id" => id.as_str(), "enrollment_id" => enrollment_id};
    match call(&state, &signed, "svc_unenroll_contact", body).await {
        Ok(_) => to(&format!(
            "/settings/sequences/{}?notice=unenrolled",
            encode(&id)
        )),
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn waits_and_offsets_read_plainly() {
        assert_eq!(wait_text(&json!({"wait_days": 3})), "3 days");
        assert_eq!(wait_text(&json!({"wait_hours": 1})), "1 hour");
        assert_eq!(wait_text(&json!({"subject": "s"})), "");
        assert_eq!(offset_text(0), "0s");
        assert_eq!(offset_text(90), "1m 30s");
        assert_eq!(offset_text(2 * 86_400 + 5), "2d 0h 0m 5s");
    }

    #[test]
    fn a_preview_and_an_enrollment_read_from_their_documents() {
        let p = preview_of(&json!({
            "schedule": [{"step": 1, "wait_seconds": 60, "send_offset_seconds": 60, "subject": null}],
            "would_enroll_now": 3, "warnings": ["{{nickname}} is filled by no field"]
        }));
        assert_eq!(p.schedule, [("1".into(), "1m 0s".into(), String::new())]);
        assert_eq!(p.would_enroll_now, "3");
        let e = enrollment_of(
            &json!({"id": "enr_1", "contact_id": "con_1", "state": "active",
            "source": {"object": "contact", "id": "con_1"}, "steps_sent": 0}),
        );
        assert_eq!(
            (e.source.as_str(), e.steps_sent.as_str()),
            ("contact con_1", "0")
        );
    }
}
