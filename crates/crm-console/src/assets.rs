//! The console's stylesheet and script, compiled into the binary: the console works with the
//! network cut off and needs no files beside the server.

use axum::{
    http::header,
    response::{IntoResponse, Response},
};

const CSS: &str = include_str!("../assets/console.css");
const JS: &str = include_str!("../assets/console.js");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

pub async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

pub async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}
