//! Record pages: every field with the input its type needs, edited in place (an update with
//! `If-Match`: a record someone else changed meanwhile is shown afresh, saying so), delete and
//! restore, merging duplicates into the record, its related records, and its timeline with a
//! form to add a note, call or task. Also the new-record form that quick create opens.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::{ErrorCode, Problem};
use crm_app::Scope;
use serde_json::{Map, Value};

use crate::{
    args,
    chrome::{can_write, Chrome},
    form::{encode, Form},
    ops::call,
    pages::{
        fields::{self, value_text, Field, Input},
        lists,
        timeline::{self, Entry},
        Kind,
    },
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

/// Activity types the timeline's form adds.
const ACTIVITY_TYPES: [(&str, &str); 3] = [("note", "Note"), ("call", "Call"), ("task", "Task")];
/// Related records shown per list on a record page.
const RELATED_LIMIT: &str = "20";

pub struct Related {
    pub title: String,
    pub items: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "record.html")]
struct RecordPage {
    chrome: Chrome,
    path: &'static str,
    object: &'static str,
    id: String,
    name: String,
    deleted: bool,
    version: i64,
    fields: Vec<Field>,
    can_write: bool,
    related: Vec<Related>,
    timeline: Vec<Entry>,
    activity_types: &'static [(&'static str, &'static str)],
    takes_activities: bool,
    mergeable: bool,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "new.html")]
struct NewPage {
    chrome: Chrome,
    path: &'static str,
    object: &'static str,
    fields: Vec<Field>,
    error: Option<String>,
}

/// The routes of one kind's list and record pages.
pub fn routes(router: Router<State>, kind: Kind) -> Router<State> {
    let base = format!("/{}", kind.path());
    router
        .route(
            &base,
            get(move |AxumState(state): AxumState<State>, signed: Signed, RawQuery(q): RawQuery| async move {
                lists::show(&state, &signed, kind, &Form::parse(q.unwrap_or_default().as_bytes())).await
            })
            .post(move |AxumState(state): AxumState<State>, Posted { signed, form }: Posted| async move {
                create(&state, &signed, kind, &form).await
            }),
        )
        .route(
            &format!("{base}/new"),
            get(move |AxumState(state): AxumState<State>, signed: Signed| async move {
                new_form(&state, &signed, kind, &Form::default(), None).await
            }),
        )
        .route(
            &format!("{base}/{{id}}"),
            get(move |AxumState(state): AxumState<State>, signed: Signed, Path(id): Path<String>, RawQuery(q): RawQuery| async move {
                let query = Form::parse(q.unwrap_or_default().as_bytes());
                let notice = query.text("notice").and_then(notice_text).map(str::to_owned);
                show(&state, &signed, kind, &id, notice, None).await
            })
            .post(move |AxumState(state): AxumState<State>, Path(id): Path<String>, Posted { signed, form }: Posted| async move {
                update(&state, &signed, kind, &id, &form).await
            }),
        )
        .route(
            &format!("{base}/{{id}}/delete"),
            post(move |AxumState(state): AxumState<State>, Path(id): Path<String>, Posted { signed, form }: Posted| async move {
                simple_write(&state, &signed, kind, &id, &form, "delete").await
            }),
        )
        .route(
            &format!("{base}/{{id}}/restore"),
            post(move |AxumState(state): AxumState<State>, Path(id): Path<String>, Posted { signed, form }: Posted| async move {
                simple_write(&state, &signed, kind, &id, &form, "restore").await
            }),
        )
        .route(
            &format!("{base}/{{id}}/activities"),
            post(move |AxumState(state): AxumState<State>, Path(id): Path<String>, Posted { signed, form }: Posted| async move {
                add_activity(&state, &signed, kind, &id, &form).await
            }),
        )
        .route(
            &format!("{base}/{{id}}/merge"),
            post(move |AxumState(state): AxumState<State>, Path(id): Path<String>, Posted { signed, form }: Posted| async move {
                merge(&state, &signed, kind, &id, &form).await
            }),
        )
}

/// The notices a redirect back to a record page may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "conflict" => "Someone else changed this record while you edited it: this is its newer state. Make your change again if you still want it.",
        "saved" => "Saved.",
        "deleted" => "Deleted. It stays restorable from here and from its list (deleted too).",
        "restored" => "Restored.",
        "merged" => "Merged: the other records now point here.",
        "activity" => "Added to the timeline.",
        _ => return None,
    })
}

fn back_to(kind: Kind, id: &str, notice: &str) -> Response {
    let to = format!("/{}/{}?notice={notice}", kind.path(), encode(id));
    Redirect::to(&to).into_response()
}

async fn schema(state: &State, signed: &Signed) -> Result<Value, Problem> {
    call(state, signed, "svc_describe_schema", Map::new()).await
}

/// A record's inputs, with a deal's pipeline and stage as selects of the real choices.
async fn inputs(
    state: &State,
    signed: &Signed,
    kind: Kind,
    schema: &Value,
    record: &Value,
) -> Result<Vec<Field>, Problem> {
    let mut inputs = fields::fields(schema, kind.object(), record);
    if kind == Kind::Deals {
        let pipelines = call(
            state,
            signed,
            "svc_list_pipelines",
            args! {"limit" => "100"},
        )
        .await?;
        let pipelines = pipelines["data"].as_array().cloned().unwrap_or_default();
        let current = record["pipeline_id"].as_str();
        let pipeline = pipelines
            .iter()
            .find(|p| p["id"].as_str() == current)
            .or_else(|| pipelines.iter().find(|p| p["is_default"] == true))
            .or_else(|| pipelines.first());
        for field in &mut inputs {
            match field.name.as_str() {
                "pipeline_id" => {
                    field.input = Input::Select(
                        pipelines
                            .iter()
                            .map(|p| (value_text(&p["id"]), value_text(&p["name"])))
                            .collect(),
                    );
                    if field.value.is_empty() {
                        field.value = pipeline.map(|p| value_text(&p["id"])).unwrap_or_default();
                    }
                }
                "stage" => {
                    let mut stages = pipeline
                        .and_then(|p| p["stages"].as_array().cloned())
                        .unwrap_or_default();
                    stages.sort_by_key(|s| s["ordinal"].as_u64().unwrap_or(0));
                    field.input = Input::Select(
                        stages
                            .iter()
                            .map(|s| (value_text(&s["key"]), value_text(&s["label"])))
                            .collect(),
                    );
                }
                _ => {}
            }
        }
    }
    if let Some(owner) = inputs.iter_mut().find(|f| f.name == "owner_id") {
        owner.label = "Owner".into();
        owner.input = Input::Select(owner_options(state, signed, &owner.value).await?);
    }
    Ok(inputs)
}

/// Who a record may be given to: the signed-in user first, then the workspace's other users
/// when the user may list them (admins: `users:read`); an owner the user cannot list is shown
/// as such, so that saving the form keeps it.
async fn owner_options(
    state: &State,
    signed: &Signed,
    current: &str,
) -> Result<Vec<(String, String)>, Problem> {
    let me = &signed.session.user;
    let mut options = vec![(me.id.to_string(), format!("Me ({})", me.name))];
    if signed.caller.scopes.allows(Scope::read("users")) {
        let users = call(state, signed, "svc_list_users", args! {"limit" => "100"}).await?;
        for user in users["data"].as_array().into_iter().flatten() {
            let id = value_text(&user["id"]);
            if id != me.id.as_str() {
                options.push((id, value_text(&user["name"])));
            }
        }
    }
    if !current.is_empty() && !options.iter().any(|(id, _)| id == current) {
        options.push((current.to_owned(), "Another user".into()));
    }
    Ok(options)
}

/// `GET /<kind>/{id}`.
async fn show(
    state: &State,
    signed: &Signed,
    kind: Kind,
    id: &str,
    notice: Option<String>,
    error: Option<String>,
) -> Response {
    match record_page(state, signed, kind, id, notice, error).await {
        Ok(res) => res,
        Err(problem) => problem_page(signed, &problem),
    }
}

async fn record_page(
    state: &State,
    signed: &Signed,
    kind: Kind,
    id: &str,
    notice: Option<String>,
    error: Option<String>,
) -> Result<Response, Problem> {
    let expand = match kind {
        Kind::Contacts => "company",
        Kind::Companies => "",
        Kind::Deals => "company,primary_contact",
    };
    let mut get_args = args! {"id" => id};
    if !expand.is_empty() {
        get_args.insert("expand".into(), expand.into());
    }
    let record = call(state, signed, kind.op("get"), get_args).await?;
    let schema = schema(state, signed).await?;
    let fields = inputs(state, signed, kind, &schema, &record).await?;
    let related = related(state, signed, kind, id, &record).await?;
    let history = call(
        state,
        signed,
        kind.op("history"),
        args! {"id" => id, "limit" => "50"},
    )
    .await?;
    let activities = match kind {
        Kind::Contacts => Some("contact_id"),
        Kind::Deals => Some("deal_id"),
        Kind::Companies => None,
    };
    let activities = match activities {
        Some(filter) => {
            call(
                state,
                signed,
                "svc_list_activities",
                args! {filter => id, "limit" => "50"},
            )
            .await?
        }
        None => Value::Null,
    };
    let body = RecordPage {
        chrome: Chrome::new(signed, kind.path()),
        path: kind.path(),
        object: kind.object(),
        id: id.to_owned(),
        name: kind.display_name(&record),
        deleted: !record["deleted_at"].is_null(),
        version: record["version"].as_i64().unwrap_or(0),
        fields,
        can_write: can_write(signed, kind),
        related,
        timeline: timeline::merge(&activities, &history),
        activity_types: &ACTIVITY_TYPES,
        takes_activities: kind != Kind::Companies,
        mergeable: kind != Kind::Deals,
        notice,
        error,
    };
    Ok(page(200, &body))
}

/// The records around this one: a contact's company and deals, a company's contacts and deals,
/// a deal's company and primary contact.
async fn related(
    state: &State,
    signed: &Signed,
    kind: Kind,
    id: &str,
    record: &Value,
) -> Result<Vec<Related>, Problem> {
    let one = |title: &str, path: &str, r: &Value, k: Kind| -> Option<Related> {
        r.is_object().then(|| Related {
            title: title.to_owned(),
            items: vec![(
                format!("/{path}/{}", value_text(&r["id"])),
                k.display_name(r),
            )],
        })
    };
    let many = |title: &str, k: Kind, list: &Value| Related {
        title: title.to_owned(),
        items: list["data"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|r| {
                        (
                            format!("/{}/{}", k.path(), value_text(&r["id"])),
                            k.display_name(r),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut out = Vec::new();
    match kind {
        Kind::Contacts => {
            out.extend(one(
                "Company",
                "companies",
                &record["company"],
                Kind::Companies,
            ));
            let deals = call(
                state,
                signed,
                "svc_list_deals",
                args! {"primary_contact_id" => id, "limit" => RELATED_LIMIT},
            )
            .await?;
            out.push(many("Deals", Kind::Deals, &deals));
        }
        Kind::Companies => {
            let contacts = call(
                state,
                signed,
                "svc_list_contacts",
                args! {"company_id" => id, "limit" => RELATED_LIMIT},
            )
            .await?;
            out.push(many("Contacts", Kind::Contacts, &contacts));
            let deals = call(
                state,
                signed,
                "svc_list_deals",
                args! {"company_id" => id, "limit" => RELATED_LIMIT},
            )
            .await?;
            out.push(many("Deals", Kind::Deals, &deals));
        }
        Kind::Deals => {
            out.extend(one(
                "Company",
                "companies",
                &record["company"],
                Kind::Companies,
            ));
            out.extend(one(
                "Primary contact",
                "contacts",
                &record["primary_contact"],
                Kind::Contacts,
            ));
        }
    }
    Ok(out)
}

/// `GET /<kind>/new`, and the form again with what was sent when a create was refused.
async fn new_form(
    state: &State,
    signed: &Signed,
    kind: Kind,
    sent: &Form,
    error: Option<String>,
) -> Response {
    let schema = match schema(state, signed).await {
        Ok(s) => s,
        Err(problem) => return problem_page(signed, &problem),
    };
    let mut fields = match inputs(state, signed, kind, &schema, &Value::Null).await {
        Ok(f) => f,
        Err(problem) => return problem_page(signed, &problem),
    };
    for field in &mut fields {
        if let Some(v) = sent.get(&field.name) {
            field.value = v.to_owned();
        } else if field.name == "owner_id" {
            // A new record is the creator's unless they choose otherwise.
            field.value = signed.session.user.id.to_string();
        }
        field.values = sent
            .0
            .iter()
            .filter(|(k, _)| *k == field.name)
            .map(|(_, v)| v.clone())
            .collect();
    }
    let body = NewPage {
        chrome: Chrome::new(signed, kind.path()),
        path: kind.path(),
        object: kind.object(),
        fields,
        error: error.clone(),
    };
    let status = if error.is_some() { 422 } else { 200 };
    page(status, &body)
}

/// `POST /<kind>`: creates the record and opens its page.
async fn create(state: &State, signed: &Signed, kind: Kind, form: &Form) -> Response {
    let schema = match schema(state, signed).await {
        Ok(s) => s,
        Err(problem) => return problem_page(signed, &problem),
    };
    let fields = match inputs(state, signed, kind, &schema, &Value::Null).await {
        Ok(f) => f,
        Err(problem) => return problem_page(signed, &problem),
    };
    let body = fields::body(&fields, form, None);
    match call(state, signed, kind.op("create"), body).await {
        Ok(created) => {
            let to = format!("/{}/{}", kind.path(), encode(&value_text(&created["id"])));
            Redirect::to(&to).into_response()
        }
        Err(problem) if problem.status() == 422 || problem.status() == 409 => {
            new_form(state, signed, kind, form, Some(refusal(&problem))).await
        }
        Err(problem) => problem_page(signed, &problem),
    }
}

/// A refusal as one line for the form: the detail, naming the field.
fn refusal(problem: &Problem) -> String {
    form_refusal(problem).unwrap_or_else(|| problem.detail.clone())
}

/// `POST /<kind>/{id}`: the fields that changed, if the record is still the version shown.
async fn update(state: &State, signed: &Signed, kind: Kind, id: &str, form: &Form) -> Response {
    let current = match call(state, signed, kind.op("get"), args! {"id" => id}).await {
        Ok(r) => r,
        Err(problem) => return problem_page(signed, &problem),
    };
    let schema = match schema(state, signed).await {
        Ok(s) => s,
        Err(problem) => return problem_page(signed, &problem),
    };
    let before = match inputs(state, signed, kind, &schema, &current).await {
        Ok(f) => f,
        Err(problem) => return problem_page(signed, &problem),
    };
    let mut patch = fields::body(&before, form, Some(&before));
    if patch.is_empty() {
        return back_to(kind, id, "saved");
    }
    patch.insert("id".into(), id.into());
    if let Some(version) = form.text("version") {
        patch.insert("if_match".into(), version.into());
    }
    match call(state, signed, kind.op("update"), patch).await {
        Ok(_) => back_to(kind, id, "saved"),
        Err(problem) if problem.code == ErrorCode::VersionConflict => back_to(kind, id, "conflict"),
        Err(problem) if problem.status() == 422 || problem.status() == 409 => {
            show(state, signed, kind, id, None, Some(refusal(&problem))).await
        }
        Err(problem) => problem_page(signed, &problem),
    }
}

/// `POST /<kind>/{id}/delete` and `/restore`.
async fn simple_write(
    state: &State,
    signed: &Signed,
    kind: Kind,
    id: &str,
    _form: &Form,
    verb: &'static str,
) -> Response {
    match call(state, signed, kind.op(verb), args! {"id" => id}).await {
        Ok(_) => back_to(
            kind,
            id,
            if verb == "delete" {
                "deleted"
            } else {
                "restored"
            },
        ),
        Err(problem) => problem_page(signed, &problem),
    }
}

/// `POST /<kind>/{id}/activities`: a note, call or task on a contact's or deal's timeline.
async fn add_activity(
    state: &State,
    signed: &Signed,
    kind: Kind,
    id: &str,
    form: &Form,
) -> Response {
    let owner = match kind {
        Kind::Contacts => "contact_id",
        Kind::Deals => "deal_id",
        Kind::Companies => {
            return crate::pages::error_page(404, "Not found", "Companies have no timeline form.")
        }
    };
    let mut body = args! {owner => id, "type" => form.text("type").unwrap_or("note")};
    if let Some(text) = form.text("body") {
        body.insert("body".into(), text.into());
    }
    match call(state, signed, "svc_create_activity", body).await {
        Ok(_) => back_to(kind, id, "activity"),
        Err(problem) if problem.status() == 422 => {
            show(state, signed, kind, id, None, Some(refusal(&problem))).await
        }
        Err(problem) => problem_page(signed, &problem),
    }
}

/// `POST /<kind>/{id}/merge`: the listed duplicates merged into this record.
async fn merge(state: &State, signed: &Signed, kind: Kind, id: &str, form: &Form) -> Response {
    let op = match kind {
        Kind::Contacts => "svc_merge_contacts",
        Kind::Companies => "svc_merge_companies",
        Kind::Deals => return crate::pages::error_page(404, "Not found", "Deals are not merged."),
    };
    let ids: Vec<Value> = form
        .text("merge_ids")
        .unwrap_or_default()
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Value::from)
        .collect();
    let mut body = args! {"id" => id};
    body.insert("merge_ids".into(), Value::Array(ids));
    match call(state, signed, op, body).await {
        Ok(_) => back_to(kind, id, "merged"),
        Err(problem) if problem.status() == 422 || problem.status() == 409 => {
            show(state, signed, kind, id, None, Some(refusal(&problem))).await
        }
        Err(problem) => problem_page(signed, &problem),
    }
}
