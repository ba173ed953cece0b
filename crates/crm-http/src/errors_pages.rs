//! `GET /errors/<code>`: the page each problem document's `type` points at.

use axum::{
    extract::Path,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
};
use crm_api::ErrorCode;

fn html(title: &str, body: &str) -> String {
    format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head><body>{body}</body></html>")
}

pub(crate) async fn index() -> Response {
    let items: String = ErrorCode::ALL
        .iter()
        .map(|c| {
            format!(
                "<li><a href=\"/errors/{0}\"><code>{0}</code></a> ({1}): {2}</li>",
                c.as_str(),
                c.status(),
                c.title()
            )
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html(
            "Error codes",
            &format!("<h1>Error codes</h1><ul>{items}</ul>"),
        ),
    )
        .into_response()
}

pub(crate) async fn page(Path(code): Path<String>) -> Response {
    match ErrorCode::parse(&code) {
        Some(c) => {
            let body = format!(
                "<h1><code>{}</code>: {}</h1><p>HTTP status {}.</p><p>{}</p><p><a href=\"/errors\">All error codes</a></p>",
                c.as_str(),
                c.title(),
                c.status(),
                c.about()
            );
            (
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                html(c.title(), &body),
            )
                .into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html("Unknown error code", "<h1>Unknown error code</h1>"),
        )
            .into_response(),
    }
}
