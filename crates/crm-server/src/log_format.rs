//! The server's log lines: `tracing-subscriber`'s text or JSON lines, plus `request_id` on every
//! line written by a request's code (`crm_http::with_request_id`). The id is kept out of
//! `tracing` spans because a span per request costs work whether or not a line is written; this
//! costs nothing until a line is.
//!
//! Text lines end with ` request_id=<id>`; JSON lines have a top-level `"request_id"`. A line with
//! a request id is formatted without colours (it is assembled in a buffer first).

use std::fmt::{self, Write as _};

use tracing::{Event, Subscriber};
use tracing_subscriber::{
    fmt::{format::Writer, FmtContext, FormatEvent, FormatFields},
    registry::LookupSpan,
};

/// Wraps the layer's event format (`layer.map_event_format(...)`).
pub struct WithRequestId<F> {
    inner: F,
    json: bool,
}

impl<F> WithRequestId<F> {
    pub fn text(inner: F) -> WithRequestId<F> {
        WithRequestId { inner, json: false }
    }

    pub fn json(inner: F) -> WithRequestId<F> {
        WithRequestId { inner, json: true }
    }
}

impl<S, N, F> FormatEvent<S, N> for WithRequestId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        crm_http::with_request_id(|id| {
            let Some(id) = id else {
                return self.inner.format_event(ctx, writer, event);
            };
            let mut line = String::new();
            self.inner
                .format_event(ctx, Writer::new(&mut line), event)?;
            writer.write_str(&with_id(&line, id, self.json))
        })
    }
}

/// `line` (one formatted event, ending in a newline) with the request id added.
fn with_id(line: &str, id: &str, json: bool) -> String {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let mut out = String::with_capacity(line.len() + id.len() + 20);
    match line.strip_suffix('}').filter(|_| json) {
        Some(open) => {
            // A caller's own `Request-Id` is visible ASCII, which may still hold `"` or `\`.
            let quoted = serde_json::Value::from(id).to_string();
            let _ = write!(out, "{open},\"request_id\":{quoted}}}");
        }
        None => {
            let _ = write!(out, "{line} request_id={id}");
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        sync::{Arc, Mutex},
    };

    use axum::{body::Body, extract::Request, routing::get, Router};
    use tower::{Service, ServiceExt};
    use tracing_subscriber::{fmt::MakeWriter, layer::SubscriberExt};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;

        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    /// The lines written before, by and after a request (with `Request-Id: upstream-1"x`) whose
    /// handler logs after an await.
    fn lines(json: bool) -> Vec<String> {
        let out = Buffer::default();
        let layer = tracing_subscriber::fmt::layer()
            .without_time()
            .with_ansi(false)
            .with_writer(out.clone());
        let subscriber: Box<dyn Subscriber + Send + Sync> = if json {
            Box::new(
                tracing_subscriber::registry()
                    .with(layer.json().map_event_format(WithRequestId::json)),
            )
        } else {
            Box::new(
                tracing_subscriber::registry().with(layer.map_event_format(WithRequestId::text)),
            )
        };
        let handler = || async {
            tokio::task::yield_now().await;
            tracing::warn!(status = 500, "inside");
        };
        let mut app = crm_http::RequestContext::new(Router::new().route("/", get(handler)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!("before");
            let req = Request::builder()
                .header("request-id", "upstream-1\"x")
                .body(Body::empty())
                .unwrap();
            let res: Result<_, Infallible> =
                runtime.block_on(async { app.ready().await?.call(req).await });
            assert!(res.unwrap().status().is_success());
            tracing::warn!("after");
        });
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_requests_text_lines_end_with_its_id_and_no_other_line_does() {
        let lines = lines(false);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].ends_with("before"), "{lines:?}");
        assert!(
            lines[1].ends_with(
                "crm_server::log_format::tests: inside status=500 request_id=upstream-1\"x"
            ),
            "{lines:?}"
        );
        // The response line, written by the request context as the response leaves.
        assert!(
            lines[2].contains("response method=\"GET\" path=\"/\" status=200")
                && lines[2].ends_with(" request_id=upstream-1\"x"),
            "{lines:?}"
        );
        assert!(lines[3].ends_with("after"), "{lines:?}");
    }

    #[test]
    fn a_requests_json_lines_carry_its_id_as_a_field() {
        let lines = lines(true);
        assert_eq!(lines.len(), 4, "{lines:?}");
        let parsed: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(parsed[1]["request_id"], "upstream-1\"x");
        assert_eq!(parsed[1]["fields"]["message"], "inside");
        assert_eq!(parsed[2]["request_id"], "upstream-1\"x");
        assert_eq!(parsed[2]["fields"]["message"], "response");
        assert!(
            parsed[0].get("request_id").is_none() && parsed[3].get("request_id").is_none(),
            "{lines:?}"
        );
    }
}
