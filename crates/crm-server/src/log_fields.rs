//! How the text log writes span and event fields: exactly as `tracing-subscriber`'s
//! `DefaultFields`, except the request span's `request_id`, which is copied into the line as it
//! is. The log layer formats a span's fields when the span opens, so this runs on every request
//! whether or not a line is ever written; through `DefaultFields` (its styling wrappers and three
//! nested formatting passes) it cost 1,450 of a cached request's ~30,000 instructions
//! (docs/performance.md). A request id is visible ASCII (`HeaderValue::to_str`), so nothing needs
//! escaping.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::{
    field::{MakeVisitor, VisitFmt, VisitOutput},
    fmt::format::{DefaultVisitor, Writer},
};

/// The request span's field that is written verbatim (it must be recorded as a `&str`).
pub const REQUEST_ID: &str = "request_id";

/// The field formatter of the text log (`fmt::layer().fmt_fields(Fields)`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Fields;

impl<'w> MakeVisitor<Writer<'w>> for Fields {
    type Visitor = FieldVisitor<'w>;

    fn make_visitor(&self, writer: Writer<'w>) -> FieldVisitor<'w> {
        FieldVisitor { writer, empty: true, result: Ok(()) }
    }
}

pub struct FieldVisitor<'w> {
    writer: Writer<'w>,
    /// Whether nothing was written yet (the next field needs no separating space).
    empty: bool,
    result: fmt::Result,
}

impl FieldVisitor<'_> {
    /// Hands one field to `DefaultFields`' visitor, carrying over whether a separator is due.
    fn default(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.empty);
        record(&mut visitor);
        self.result = visitor.finish();
        // `DefaultVisitor` writes nothing for `log.*` metadata (from `log` records).
        self.empty &= field.name().starts_with("log.");
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() != REQUEST_ID || self.writer.has_ansi_escapes() || self.result.is_err() {
            return self.default(field, |v| v.record_str(field, value));
        }
        let separator = if self.empty { "" } else { " " };
        self.empty = false;
        self.result = (|| {
            self.writer.write_str(separator)?;
            self.writer.write_str(REQUEST_ID)?;
            self.writer.write_char('=')?;
            self.writer.write_str(value)
        })();
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.default(field, |v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.default(field, |v| v.record_debug(field, value));
    }
}

impl VisitOutput<fmt::Result> for FieldVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for FieldVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::{
        fmt::{format::DefaultFields, FormatFields, MakeWriter},
        layer::SubscriberExt,
    };

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

    /// The lines a few spans and events make with `fields` as the field formatter; request ids
    /// recorded as `&str`, or with `%` when `display`.
    fn lines<F>(fields: F, display: bool) -> String
    where
        F: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let out = Buffer::default();
        let layer = tracing_subscriber::fmt::layer().fmt_fields(fields).without_time().with_ansi(false).with_writer(out.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let id = "req_0123456789abcdef";
            let request = if display { tracing::info_span!("request", request_id = %id) } else { tracing::info_span!("request", request_id = id) };
            let _entered = request.enter();
            tracing::info!(status = 500, path = "/v1/x", error = %"boom", "response");
            let inner = if display {
                tracing::info_span!("op", name = "svc_get", request_id = %"second", n = 3)
            } else {
                tracing::info_span!("op", name = "svc_get", request_id = "second", n = 3)
            };
            inner.in_scope(|| tracing::warn!(message = "plain"));
            let late = tracing::info_span!("late", request_id = tracing::field::Empty);
            if display {
                late.record(REQUEST_ID, tracing::field::display("recorded"));
            } else {
                late.record(REQUEST_ID, "recorded");
            }
            late.in_scope(|| tracing::info!("after record"));
        });
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_str_request_id_is_written_as_the_default_fields_write_a_displayed_one() {
        let ours = lines(Fields, false);
        assert_eq!(ours, lines(DefaultFields::new(), true));
        // The other fields as `DefaultFields` writes them (strings quoted), in their order.
        assert!(ours.contains("request{request_id=req_0123456789abcdef}: crm_server::log_fields::tests: response status=500 path=\"/v1/x\" error=boom\n"), "{ours}");
        assert!(ours.contains("op{name=\"svc_get\" request_id=second n=3}: crm_server::log_fields::tests: plain\n"), "{ours}");
        assert!(ours.contains("late{request_id=recorded}"), "{ours}");
    }
}
