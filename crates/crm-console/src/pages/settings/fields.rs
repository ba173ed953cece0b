//! Settings: custom fields and enum values. Each object's registered fields (from the live
//! schema), a form to register a new one (`svc_create_field`: key, label, data type, enum group,
//! required, unique), and the enum groups with a form to add a value (`svc_create_enum_value`).

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_app::Scope;
use crm_domain::{registry::DataType, ObjectKind};
use serde_json::{Map, Value};

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

pub struct FieldRow {
    pub key: String,
    pub label: String,
    pub data_type: String,
    pub enum_group: String,
    pub required: bool,
}

pub struct ObjectFields {
    pub object: String,
    pub fields: Vec<FieldRow>,
}

pub struct EnumGroup {
    pub group: String,
    pub values: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "settings/fields.html")]
struct FieldsPage {
    chrome: Chrome,
    objects: Vec<ObjectFields>,
    groups: Vec<EnumGroup>,
    object_names: Vec<&'static str>,
    data_types: Vec<&'static str>,
    can_write: bool,
    notice: Option<&'static str>,
    error: Option<String>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/fields", get(show).post(create_field))
        .route("/settings/fields/values", post(add_value))
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "field" => "Field registered.",
        "value" => "Value added.",
        _ => return None,
    })
}

async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    render(
        &state,
        &signed,
        query.text("notice").and_then(notice_text),
        None,
    )
    .await
}

async fn render(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Response {
    let schema = match call(state, signed, "svc_describe_schema", Map::new()).await {
        Ok(schema) => schema,
        Err(problem) => return problem_page(signed, &problem),
    };
    let objects = schema["objects"]
        .as_array()
        .map(|all| all.iter().map(object_fields).collect())
        .unwrap_or_default();
    let groups = schema["enums"]
        .as_object()
        .map(|all| {
            all.iter()
                .map(|(group, values)| EnumGroup {
                    group: group.clone(),
                    values: values
                        .as_array()
                        .map(|vs| {
                            vs.iter()
                                .map(|v| (value_text(&v["value"]), value_text(&v["label"])))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let status = if error.is_some() { 422 } else { 200 };
    let body = FieldsPage {
        chrome: Chrome::new(signed, "settings"),
        objects,
        groups,
        object_names: ObjectKind::ALL.iter().map(|o| o.as_str()).collect(),
        data_types: DataType::ALL.iter().map(|t| t.as_str()).collect(),
        can_write: signed.caller.scopes.allows(Scope::write("registry")),
        notice,
        error,
    };
    page(status, &body)
}

/// An object's custom fields (the schema lists the built-in ones too).
fn object_fields(o: &Value) -> ObjectFields {
    ObjectFields {
        object: value_text(&o["name"]),
        fields: o["fields"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter(|f| f["custom"] == true)
                    .map(|f| FieldRow {
                        key: value_text(&f["key"]),
                        label: value_text(&f["label"]),
                        data_type: value_text(&f["type"]),
                        enum_group: value_text(&f["enum_group"]),
                        required: f["required"] == true,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

async fn answered(
    state: &State,
    signed: &Signed,
    result: Result<Value, crm_api::Problem>,
    notice: &str,
) -> Response {
    match result {
        Ok(_) => Redirect::to(&format!("/settings/fields?notice={notice}")).into_response(),
        Err(problem) => match form_refusal(&problem) {
            Some(error) => render(state, signed, None, Some(error)).await,
            None => problem_page(signed, &problem),
        },
    }
}

/// `POST /settings/fields`: registers a custom field.
async fn create_field(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let mut body = args! {
        "object" => form.text("object").unwrap_or_default(),
        "key" => form.text("key").unwrap_or_default(),
        "data_type" => form.text("data_type").unwrap_or("text"),
        "required" => form.get("required").is_some(),
        "unique" => form.get("unique").is_some(),
    };
    for member in ["label", "enum_group"] {
        if let Some(v) = form.text(member) {
            body.insert(member.into(), v.into());
        }
    }
    let result = call(&state, &signed, "svc_create_field", body).await;
    answered(&state, &signed, result, "field").await
}

/// `POST /settings/fields/values`: adds a value to an enum group.
async fn add_value(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let mut body = args! {
        "group" => form.text("group").unwrap_or_default(),
        "value" => form.text("value").unwrap_or_default(),
    };
    if let Some(label) = form.text("label") {
        body.insert("label".into(), label.into());
    }
    let result = call(&state, &signed, "svc_create_enum_value", body).await;
    answered(&state, &signed, result, "value").await
}
