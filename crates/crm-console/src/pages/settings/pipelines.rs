//! Settings: pipelines and their stages. Create a pipeline, make one the default, delete one;
//! add a stage, relabel or retype one, remove one (moving its deals to another stage), all by
//! `svc_create_pipeline`, `svc_update_pipeline`, `svc_delete_pipeline` and `svc_manage_stage`.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::Problem;
use crm_app::Scope;
use serde_json::Value;

use crate::{
    args,
    chrome::Chrome,
    form::Form,
    ops::call,
    pages::fields::value_text,
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

pub struct StageRow {
    pub key: String,
    pub label: String,
    pub stage_type: String,
}

pub struct PipelineRow {
    pub id: String,
    pub key: String,
    pub name: String,
    pub is_default: bool,
    pub stages: Vec<StageRow>,
}

#[derive(Template)]
#[template(path = "settings/pipelines.html")]
struct PipelinesPage {
    chrome: Chrome,
    pipelines: Vec<PipelineRow>,
    can_write: bool,
    stage_types: [&'static str; 3],
    notice: Option<&'static str>,
    error: Option<String>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/pipelines", get(show).post(create))
        .route("/settings/pipelines/default", post(make_default))
        .route("/settings/pipelines/delete", post(delete))
        .route("/settings/pipelines/stages", post(manage_stage))
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "created" => "Pipeline created.",
        "default" => "Default pipeline changed.",
        "deleted" => "Pipeline deleted.",
        "stage" => "Stages saved.",
        _ => return None,
    })
}

fn back(notice: &str) -> Response {
    Redirect::to(&format!("/settings/pipelines?notice={notice}")).into_response()
}

async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    render(&state, &signed, notice, None).await
}

async fn render(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Response {
    let list = match call(
        state,
        signed,
        "svc_list_pipelines",
        args! {"limit" => "100"},
    )
    .await
    {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let pipelines = list["data"]
        .as_array()
        .map(|all| all.iter().map(pipeline_row).collect())
        .unwrap_or_default();
    let status = if error.is_some() { 422 } else { 200 };
    let body = PipelinesPage {
        chrome: Chrome::new(signed, "settings"),
        pipelines,
        can_write: signed.caller.scopes.allows(Scope::write("pipelines")),
        stage_types: ["open", "won", "lost"],
        notice,
        error,
    };
    page(status, &body)
}

fn pipeline_row(p: &Value) -> PipelineRow {
    let mut stages: Vec<&Value> = p["stages"]
        .as_array()
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    stages.sort_by_key(|s| s["ordinal"].as_u64().unwrap_or(0));
    PipelineRow {
        id: value_text(&p["id"]),
        key: value_text(&p["key"]),
        name: value_text(&p["name"]),
        is_default: p["is_default"] == true,
        stages: stages
            .into_iter()
            .map(|s| StageRow {
                key: value_text(&s["key"]),
                label: value_text(&s["label"]),
                stage_type: value_text(&s["type"]),
            })
            .collect(),
    }
}

/// A refusal the page shows in its error line; anything else is an error page.
async fn answered(
    state: &State,
    signed: &Signed,
    result: Result<Value, Problem>,
    notice: &str,
) -> Response {
    match result {
        Ok(_) => back(notice),
        Err(problem) => match form_refusal(&problem) {
            Some(error) => render(state, signed, None, Some(error)).await,
            None => problem_page(signed, &problem),
        },
    }
}

/// `POST /settings/pipelines`: a new pipeline; its stages as keys separated by commas.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let mut body = args! {
        "key" => form.text("key").unwrap_or_default(),
        "name" => form.text("name").unwrap_or_default(),
        "is_default" => form.get("is_default").is_some(),
    };
    let stages: Vec<Value> = form
        .text("stages")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Value::from)
        .collect();
    if !stages.is_empty() {
        body.insert("stages".into(), Value::Array(stages));
    }
    let result = call(&state, &signed, "svc_create_pipeline", body).await;
    answered(&state, &signed, result, "created").await
}

async fn make_default(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let id = form.text("pipeline").unwrap_or_default();
    let body = args! {"id" => id, "is_default" => true};
    let result = call(&state, &signed, "svc_update_pipeline", body).await;
    answered(&state, &signed, result, "default").await
}

async fn delete(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let id = form.text("pipeline").unwrap_or_default();
    let result = call(&state, &signed, "svc_delete_pipeline", args! {"id" => id}).await;
    answered(&state, &signed, result, "deleted").await
}

/// `POST /settings/pipelines/stages`: add, update or remove one stage of a pipeline.
async fn manage_stage(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let mut body = args! {
        "pipeline" => form.text("pipeline").unwrap_or_default(),
        "action" => form.text("action").unwrap_or("add"),
        "key" => form.text("key").unwrap_or_default(),
    };
    for member in ["label", "type", "move_to"] {
        if let Some(v) = form.text(member) {
            body.insert(member.into(), v.into());
        }
    }
    if let Some(position) = form.text("position").and_then(|p| p.parse::<u64>().ok()) {
        body.insert("position".into(), position.into());
    }
    let result = call(&state, &signed, "svc_manage_stage", body).await;
    answered(&state, &signed, result, "stage").await
}
