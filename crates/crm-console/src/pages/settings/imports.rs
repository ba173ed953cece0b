//! Settings: CSV imports. The list (object, status, rows done of total, errors) with a form
//! that takes the CSV pasted into a text area: the console reads forms as
//! `application/x-www-form-urlencoded` only (no multipart, so no file input), and the CSV goes to
//! `svc_create_import` as agents send it, the string argument `csv`. Each import's page shows a
//! progress bar that reloads itself while the import is queued or running (`data-refresh`,
//! read by the console's script), its counts, its row errors (`svc_list_import_errors`) and
//! Cancel (`svc_cancel_import`).

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_app::Scope;
use crm_domain::import::{OnDuplicate, IMPORT_OBJECTS};
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

/// Row errors shown on an import's page.
const ERRORS_LIMIT: &str = "100";
/// Seconds between reloads of a running import's page.
const REFRESH_SECONDS: u32 = 2;

pub struct ImportRow {
    pub id: String,
    pub object_type: String,
    pub status: String,
    pub dry_run: bool,
    pub rows_done: i64,
    pub rows_total: i64,
    pub created: i64,
    pub updated: i64,
    pub skipped: i64,
    pub failed: i64,
    pub on_duplicate: String,
    /// Why a failed import stopped.
    pub error: String,
    pub created_at: String,
    pub finished_at: String,
}

impl ImportRow {
    fn of(i: &Value) -> ImportRow {
        let count = |k: &str| i[k].as_i64().unwrap_or(0);
        let error = &i["error"];
        let error = if error.is_object() {
            match value_text(&error["field"]).as_str() {
                "" => value_text(&error["detail"]),
                field => format!("{} ({field})", value_text(&error["detail"])),
            }
        } else {
            String::new()
        };
        ImportRow {
            id: value_text(&i["id"]),
            object_type: value_text(&i["object_type"]),
            status: value_text(&i["status"]),
            dry_run: i["dry_run"] == true,
            rows_done: count("rows_done"),
            rows_total: count("rows_total"),
            created: count("created"),
            updated: count("updated"),
            skipped: count("skipped"),
            failed: count("failed"),
            on_duplicate: value_text(&i["on_duplicate"]),
            error,
            created_at: value_text(&i["created_at"]),
            finished_at: value_text(&i["finished_at"]),
        }
    }

    /// Still at work: its page reloads itself, and it may be cancelled.
    pub fn running(&self) -> bool {
        matches!(self.status.as_str(), "queued" | "running")
    }

    /// The progress bar's maximum: never 0, so an empty file shows as done.
    pub fn progress_max(&self) -> i64 {
        self.rows_total.max(1)
    }

    pub fn progress_value(&self) -> i64 {
        if self.rows_total == 0 && !self.running() {
            1
        } else {
            self.rows_done.min(self.progress_max())
        }
    }
}

/// One failed row: its number (the header is row 1), the field, and the problem.
pub struct RowError {
    pub row: String,
    pub field: String,
    pub code: String,
    pub detail: String,
}

#[derive(Template)]
#[template(path = "settings/imports.html")]
struct ListPage {
    chrome: Chrome,
    imports: Vec<ImportRow>,
    can_write: bool,
    objects: Vec<&'static str>,
    on_duplicates: Vec<&'static str>,
    /// What a refused import sent, to fill the form again.
    object: String,
    on_duplicate: String,
    csv: String,
    dry_run: bool,
    notice: Option<&'static str>,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "settings/imports_one.html")]
struct OnePage {
    chrome: Chrome,
    import: ImportRow,
    errors: Vec<RowError>,
    more_errors: bool,
    can_write: bool,
    refresh: u32,
    notice: Option<&'static str>,
    error: Option<String>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/imports", get(list).post(create))
        .route("/settings/imports/{id}", get(show))
        .route("/settings/imports/{id}/cancel", post(cancel))
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "started" => "Import queued: this page follows it until it ends.",
        "cancelled" => "Import cancelled: rows already written stay.",
        _ => return None,
    })
}

fn to(path: &str) -> Response {
    Redirect::to(path).into_response()
}

fn can_write(signed: &Signed) -> bool {
    signed.caller.scopes.allows(Scope::write("imports"))
}

/// `GET /settings/imports`.
async fn list(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    render_list(&state, &signed, notice, &Form::default(), None).await
}

async fn render_list(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    sent: &Form,
    error: Option<String>,
) -> Response {
    let list = match call(state, signed, "svc_list_imports", args! {"limit" => "50"}).await {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let body = ListPage {
        chrome: Chrome::new(signed, "settings"),
        imports: list["data"]
            .as_array()
            .map(|all| all.iter().map(ImportRow::of).collect())
            .unwrap_or_default(),
        can_write: can_write(signed),
        objects: IMPORT_OBJECTS.iter().map(|o| o.as_str()).collect(),
        on_duplicates: OnDuplicate::ALL.iter().map(|o| o.as_str()).collect(),
        object: sent.text("object").unwrap_or_default().to_owned(),
        on_duplicate: sent
            .text("on_duplicate")
            .unwrap_or(OnDuplicate::default().as_str())
            .to_owned(),
        csv: sent.get("csv").unwrap_or_default().to_owned(),
        dry_run: sent.get("dry_run").is_some(),
        notice,
        error: error.clone(),
    };
    page(if error.is_some() { 422 } else { 200 }, &body)
}

/// `POST /settings/imports`: the pasted CSV as an import, then its page.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let mut body = args! {
        "object" => form.text("object").unwrap_or_default(),
        "csv" => form.get("csv").unwrap_or_default(),
    };
    if let Some(on_duplicate) = form.text("on_duplicate") {
        body.insert("on_duplicate".into(), on_duplicate.into());
    }
    if form.get("dry_run").is_some() {
        body.insert("dry_run".into(), true.into());
    }
    match call(&state, &signed, "svc_create_import", body).await {
        Ok(import) => to(&format!(
            "/settings/imports/{}?notice=started",
            encode(&value_text(&import["id"]))
        )),
        Err(problem) => match form_refusal(&problem) {
            Some(error) => render_list(&state, &signed, None, &form, Some(error)).await,
            None => problem_page(&signed, &problem),
        },
    }
}

/// `GET /settings/imports/{id}`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    render_one(&state, &signed, &id, notice, None).await
}

async fn render_one(
    state: &State,
    signed: &Signed,
    id: &str,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Response {
    let import = match call(state, signed, "svc_get_import", args! {"id" => id}).await {
        Ok(import) => import,
        Err(problem) => return problem_page(signed, &problem),
    };
    let errors = match call(
        state,
        signed,
        "svc_list_import_errors",
        args! {"id" => id, "limit" => ERRORS_LIMIT},
    )
    .await
    {
        Ok(errors) => errors,
        Err(problem) => return problem_page(signed, &problem),
    };
    let status = if error.is_some() { 409 } else { 200 };
    let body = OnePage {
        chrome: Chrome::new(signed, "settings"),
        import: ImportRow::of(&import),
        errors: row_errors(&errors),
        more_errors: errors["has_more"] == true,
        can_write: can_write(signed),
        refresh: REFRESH_SECONDS,
        notice,
        error,
    };
    page(status, &body)
}

fn row_errors(list: &Value) -> Vec<RowError> {
    list["data"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|e| RowError {
                    row: value_text(&e["row"]),
                    field: value_text(&e["problem"]["field"]),
                    code: value_text(&e["problem"]["code"]),
                    detail: value_text(&e["problem"]["detail"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `POST /settings/imports/{id}/cancel`.
async fn cancel(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(
        &state,
        &signed,
        "svc_cancel_import",
        args! {"id" => id.as_str()},
    )
    .await
    {
        Ok(_) => to(&format!(
            "/settings/imports/{}?notice=cancelled",
            encode(&id)
        )),
        // It ended meanwhile: show it as it ended, saying so.
        Err(problem) if problem.status() == 409 => {
            render_one(&state, &signed, &id, None, Some(problem.detail.clone())).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_reads_from_the_counts() {
        let running = ImportRow::of(&json!({"id": "imp_1", "status": "running",
            "rows_total": 10, "rows_done": 4, "failed": 1}));
        assert!(running.running());
        assert_eq!((running.progress_value(), running.progress_max()), (4, 10));
        let empty = ImportRow::of(&json!({"status": "completed", "rows_total": 0, "rows_done": 0}));
        assert!(!empty.running());
        assert_eq!((empty.progress_value(), empty.progress_max()), (1, 1));
        let failed = ImportRow::of(&json!({"status": "failed",
            "error": {"code": "validation_failed", "detail": "unclosed quote", "field": "row"}}));
        assert_eq!(failed.error, "unclosed quote (row)");
    }

    #[test]
    fn row_errors_name_their_row_and_field() {
        let e = row_errors(
            &json!({"data": [{"row": 3, "problem": {"code": "validation_failed",
            "detail": "not an email", "field": "email"}}]}),
        );
        assert_eq!(
            (e[0].row.as_str(), e[0].field.as_str(), e[0].code.as_str()),
            ("3", "email", "validation_failed")
        );
        assert!(row_errors(&Value::Null).is_empty());
    }
}
