//! RFC 9457 problem documents, and the one table of the spec's error codes: code, HTTP status,
//! title and a short explanation. Nothing else in the service picks an error status.

use crm_app::AppError;
use crm_domain::ValidationError;
use serde_json::{json, Map, Value};

macro_rules! error_codes {
    ($($variant:ident = ($code:literal, $status:literal, $title:literal, $about:literal),)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($variant,)* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            pub fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            pub fn title(self) -> &'static str {
                match self { $(ErrorCode::$variant => $title,)* }
            }

            /// What the code means and what a client should do about it.
            pub fn about(self) -> &'static str {
                match self { $(ErrorCode::$variant => $about,)* }
            }

            pub fn parse(code: &str) -> Option<ErrorCode> {
                Self::ALL.iter().copied().find(|c| c.as_str() == code)
            }
        }
    };
}

error_codes! {
    Unauthorized = ("unauthorized", 401, "Unauthorized", "The API key is missing, malformed, unknown, expired or revoked. Send `Authorization: Bearer <API_KEY>` with a valid svc_test_ or svc_live_ key."),
    Forbidden = ("forbidden", 403, "Forbidden", "The key is valid but lacks the scope this operation needs; the detail names the scope. Use a key that has it."),
    PlanLimit = ("plan_limit", 403, "Plan limit reached", "A cap of the workspace's plan was reached (active automations, sequences). Disable or delete something, or move to a larger plan."),
    NotFound = ("not_found", 404, "Not found", "No such record in this workspace and mode. Ids of another workspace or mode are not found either."),
    ValidationFailed = ("validation_failed", 422, "Validation failed", "The request is well-formed but a value is invalid; `field` names it and `detail` says why."),
    UnknownValue = ("unknown_value", 422, "Unknown value", "The value is not in the live set; read `valid_options`, use one, or add it with POST /enums."),
    UnknownField = ("unknown_field", 422, "Unknown field", "An unrecognised top-level field, or an unregistered custom field key. Read `valid_options` and `suggestion`, or register the key with POST /fields and send it under `custom_fields`."),
    InvalidReference = ("invalid_reference", 422, "Invalid reference", "A field that refers to another record (such as `company_id`) names a record that does not exist in this workspace and mode."),
    IdentifierRequired = ("identifier_required", 422, "Identifier required", "A contact needs at least one of a name, an email, a phone, a LinkedIn URL, a company or a custom field."),
    Conflict = ("conflict", 409, "Conflict", "A uniqueness rule was hit, such as a duplicate contact email or pipeline key. For contacts the existing record is returned under `existing`."),
    IdempotencyKeyReused = ("idempotency_key_reused", 409, "Idempotency key reused", "This Idempotency-Key was already used with a different request. Use a new key for a new request."),
    IdempotencyInProgress = ("idempotency_in_progress", 409, "Idempotency key in progress", "A request with this Idempotency-Key is still being processed. Retry shortly to get its result."),
    VersionConflict = ("version_conflict", 412, "Version conflict", "The record changed since it was read (If-Match did not match its version). Re-fetch it and reapply the change."),
    BadRequest = ("bad_request", 400, "Bad request", "Malformed JSON or a body that is not an object, an unrecognised query parameter or filter (see `valid_options`), or an invalid header."),
    InvalidCursor = ("invalid_cursor", 400, "Invalid cursor", "The pagination cursor is not valid for this list and these filters. Restart the listing without a cursor."),
    RateLimited = ("rate_limited", 429, "Rate limited", "Too many requests this minute for this workspace and mode. Back off for the seconds given in Retry-After."),
    QuotaExceeded = ("quota_exceeded", 429, "Quota exceeded", "The monthly request quota of the plan is used up. Check GET /usage."),
    SpendCapReached = ("spend_cap_reached", 429, "Spend cap reached", "The next request would take metered overage past `overage_cap_usd`. Raise or clear it with PATCH /settings (null is unlimited)."),
    PayloadTooLarge = ("payload_too_large", 413, "Payload too large", "The request body exceeds 1 MiB."),
    MethodNotAllowed = ("method_not_allowed", 405, "Method not allowed", "The path exists but does not serve this method. The `Allow` header lists the methods it serves."),
    RequestTimeout = ("request_timeout", 408, "Request timeout", "The request body stalled: no data arrived for 30 seconds, or the whole body took longer than 60 seconds. The connection is closed; send the request again."),
    HeadersTooLarge = ("headers_too_large", 431, "Request headers too large", "The request head exceeds 64 KiB or 100 header lines. Send fewer or shorter headers."),
    UnsupportedMediaType = ("unsupported_media_type", 415, "Unsupported media type", "The body's Content-Type is not JSON. Send `Content-Type: application/json` (or any `+json` type), or no Content-Type at all."),
    InternalError = ("internal_error", 500, "Internal error", "An unexpected server error. It is safe to retry; quote the request id when reporting it."),
    ServiceUnavailable = ("service_unavailable", 503, "Service unavailable", "The service cannot reach its database for the moment. Nothing was done; retry after the seconds given in Retry-After."),
}

/// What `Retry-After` says on a 503 `service_unavailable`: a database that restarts or fails
/// over is usually back within seconds, and the server reconnects on the next request.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

/// The member that marks a replayed problem (no other problem carries it).
const REPLAYED: &str = "idempotent_replayed";

/// A problem document before it is rendered with the service's `errors_base_url`.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub code: ErrorCode,
    pub detail: String,
    /// Extra members: `field`, `valid_options`, `suggestion`, `existing`, ...
    /// Boxed: every fallible operation returns a `Problem` by value, and an inline map made it
    /// larger than the results it travels in are worth copying (clippy's `result_large_err`).
    pub extra: Box<Map<String, Value>>,
    /// Per-item problems (an atomic batch): rendered as `errors: [{index, error}]`.
    pub errors: Vec<(usize, Problem)>,
}

/// A problem read as an error (its code and detail): what a streamed file's body ends with
/// when a piece of it cannot be read.
impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.detail)
    }
}

impl std::error::Error for Problem {}

impl Problem {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Problem {
        Problem {
            code,
            detail: detail.into(),
            extra: Box::default(),
            errors: Vec::new(),
        }
    }

    pub fn with(mut self, member: &str, value: impl Into<Value>) -> Problem {
        self.extra.insert(member.to_owned(), value.into());
        self
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::new(ErrorCode::BadRequest, detail)
    }

    pub fn validation(field: &str, detail: impl Into<String>) -> Problem {
        Problem::new(ErrorCode::ValidationFailed, detail).with("field", field)
    }

    /// 422 `unknown_field` for the body field `name`, listing `valid` and suggesting the closest
    /// of them, else `hint` (decisions §5).
    pub fn unknown_field(name: &str, valid: &[&str], hint: Option<&str>) -> Problem {
        let suggestion = match crm_domain::suggest::closest(name, valid.iter().copied()) {
            Some(s) => Some(format!("did you mean `{s}`?")),
            None => hint.map(str::to_owned),
        };
        let p = Problem::new(ErrorCode::UnknownField, format!("unknown field `{name}`"))
            .with("field", name)
            .with("valid_options", valid.to_vec());
        match suggestion {
            Some(s) => p.with("suggestion", s),
            None => p,
        }
    }

    /// A stored 4xx answered again for a repeated `Idempotency-Key`: the body says so, and
    /// [`Problem::is_replayed`] tells the transport to send `Idempotent-Replayed: true` as a
    /// replayed success does (decisions §9).
    pub fn replayed(self) -> Problem {
        self.with(REPLAYED, true)
    }

    pub fn is_replayed(&self) -> bool {
        self.extra.get(REPLAYED) == Some(&Value::Bool(true))
    }

    /// The `application/problem+json` body.
    pub fn to_json(&self, errors_base_url: &str) -> Value {
        let mut doc = json!({
            "type": format!("{errors_base_url}/{}", self.code.as_str()),
            "title": self.code.title(),
            "status": self.code.status(),
            "detail": self.detail,
            "code": self.code.as_str(),
        });
        if let Value::Object(map) = &mut doc {
            map.extend(self.extra.as_ref().clone());
            if !self.errors.is_empty() {
                let errors = self
                    .errors
                    .iter()
                    .map(|(i, p)| json!({"index": i, "error": p.to_json(errors_base_url)}))
                    .collect();
                map.insert("errors".into(), Value::Array(errors));
            }
        }
        doc
    }
}

impl From<ValidationError> for Problem {
    fn from(e: ValidationError) -> Problem {
        let detail = e.to_string();
        match e {
            ValidationError::IdentifierRequired => {
                Problem::new(ErrorCode::IdentifierRequired, detail)
            }
            ValidationError::Invalid { field, .. } => {
                Problem::new(ErrorCode::ValidationFailed, detail).with("field", field)
            }
            ValidationError::UnknownField {
                field,
                valid_options,
                suggestion,
            } => {
                let p = Problem::new(ErrorCode::UnknownField, detail)
                    .with("field", field)
                    .with("valid_options", valid_options);
                match suggestion {
                    Some(s) => p.with("suggestion", s),
                    None => p,
                }
            }
            ValidationError::UnknownValue {
                field,
                valid_options,
                ..
            } => Problem::new(ErrorCode::UnknownValue, detail)
                .with("field", field)
                .with("valid_options", valid_options),
            ValidationError::InvalidReference { field, .. } => {
                Problem::new(ErrorCode::InvalidReference, detail).with("field", field)
            }
        }
    }
}

impl From<AppError> for Problem {
    fn from(e: AppError) -> Problem {
        let detail = e.to_string();
        match e {
            AppError::Validation(v) => v.into(),
            AppError::NotFound { .. } => Problem::new(ErrorCode::NotFound, detail),
            AppError::Conflict { existing, .. } => {
                let p = Problem::new(ErrorCode::Conflict, detail);
                match existing {
                    Some(record) => p.with("existing", record),
                    None => p,
                }
            }
            AppError::Ambiguous { candidates, .. } => {
                Problem::new(ErrorCode::Conflict, detail).with("candidates", candidates)
            }
            AppError::VersionConflict { current } => {
                Problem::new(ErrorCode::VersionConflict, detail).with("current_version", current)
            }
            AppError::Unauthorized(_) => Problem::new(ErrorCode::Unauthorized, detail),
            AppError::Forbidden { scope } => {
                Problem::new(ErrorCode::Forbidden, detail).with("scope", scope)
            }
            AppError::IdempotencyKeyReused => Problem::new(ErrorCode::IdempotencyKeyReused, detail),
            AppError::IdempotencyInProgress => {
                Problem::new(ErrorCode::IdempotencyInProgress, detail)
            }
            AppError::BadRequest { valid_options, .. } => {
                let p = Problem::new(ErrorCode::BadRequest, detail);
                match valid_options {
                    Some(v) => p.with("valid_options", v),
                    None => p,
                }
            }
            AppError::InvalidCursor => Problem::new(ErrorCode::InvalidCursor, detail),
            AppError::BatchFailed { failures } => {
                let mut p =
                    Problem::new(ErrorCode::ValidationFailed, detail).with("field", "operations");
                p.errors = failures
                    .into_iter()
                    .map(|(i, e)| (i, Problem::from(e)))
                    .collect();
                p
            }
            AppError::RateLimited { retry_after_secs } => {
                Problem::new(ErrorCode::RateLimited, detail).with("retry_after", retry_after_secs)
            }
            AppError::QuotaExceeded { included, .. } => {
                Problem::new(ErrorCode::QuotaExceeded, detail).with("included", included)
            }
            AppError::SpendCapReached { cap_usd } => {
                Problem::new(ErrorCode::SpendCapReached, detail).with("overage_cap_usd", cap_usd)
            }
            AppError::PlanLimit {
                cap, plan, limit, ..
            } => Problem::new(ErrorCode::PlanLimit, detail)
                .with("cap", cap)
                .with("plan", plan)
                .with("limit", limit),
            AppError::Unavailable(msg) => {
                // Logged as the 500 is, once per request; the cause is not shown.
                tracing::warn!(error = %msg, "database unavailable");
                Problem::new(
                    ErrorCode::ServiceUnavailable,
                    "the database cannot be reached at the moment; retry shortly",
                )
            }
            AppError::Internal(msg) => {
                // Logged here, once, inside the request's span; never sent.
                tracing::error!(error = %msg, "internal error");
                Problem::new(
                    ErrorCode::InternalError,
                    "an unexpected error occurred; it is safe to retry",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_the_spec_table_is_here_with_its_status() {
        let spec = [
            ("unauthorized", 401),
            ("forbidden", 403),
            ("plan_limit", 403),
            ("not_found", 404),
            ("validation_failed", 422),
            ("unknown_value", 422),
            ("unknown_field", 422),
            ("invalid_reference", 422),
            ("identifier_required", 422),
            ("conflict", 409),
            ("idempotency_key_reused", 409),
            ("idempotency_in_progress", 409),
            ("version_conflict", 412),
            ("bad_request", 400),
            ("invalid_cursor", 400),
            ("rate_limited", 429),
            ("quota_exceeded", 429),
            ("spend_cap_reached", 429),
            ("payload_too_large", 413),
            ("method_not_allowed", 405),
            ("request_timeout", 408),
            ("headers_too_large", 431),
            ("unsupported_media_type", 415),
            ("internal_error", 500),
            ("service_unavailable", 503),
        ];
        assert_eq!(ErrorCode::ALL.len(), spec.len());
        for (code, status) in spec {
            assert_eq!(
                ErrorCode::parse(code).map(ErrorCode::status),
                Some(status),
                "{code}"
            );
        }
    }

    #[test]
    fn renders_type_from_the_base_url() {
        let doc = Problem::validation("email", "bad").to_json("https://crm.example/errors");
        assert_eq!(doc["type"], "https://crm.example/errors/validation_failed");
        assert_eq!(doc["status"], 422);
        assert_eq!(doc["field"], "email");
    }

    #[test]
    fn an_unreachable_database_is_a_503_that_does_not_leak() {
        let p: Problem = AppError::from(crm_app::StoreError::Unavailable(
            "connect 10.0.0.7:5432 refused".into(),
        ))
        .into();
        assert_eq!(p.code, ErrorCode::ServiceUnavailable);
        assert_eq!(p.status(), 503);
        assert!(!p.detail.contains("10.0.0.7"));
    }

    #[test]
    fn internal_errors_do_not_leak() {
        let p: Problem =
            AppError::Internal("SELECT * FROM secrets failed at /src/db.rs".into()).into();
        assert!(!p.detail.contains("SELECT"));
    }
}
