//! The errors of the use cases. Each variant maps to one code of the spec's error table (the
//! mapping, with HTTP statuses, is in `crm-api`). Unexpected failures are `Internal`: their text
//! is logged with the request id and never sent to the client.

use crm_domain::ValidationError;
use serde_json::Value;

use crate::store_error::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("no {object} with id {id}")]
    NotFound { object: &'static str, id: String },
    #[error("{detail}")]
    Conflict {
        detail: String,
        existing: Option<Value>,
    },
    /// Several records match an upsert's key: 409 `conflict` listing their ids.
    #[error("{detail}")]
    Ambiguous {
        detail: String,
        candidates: Vec<String>,
    },
    #[error("the record is at version {current}, not the version given in If-Match")]
    VersionConflict { current: i64 },
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("this key lacks the scope `{scope}`")]
    Forbidden { scope: String },
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    #[error("a request with this Idempotency-Key is still being processed; retry shortly")]
    IdempotencyInProgress,
    #[error("{detail}")]
    BadRequest {
        detail: String,
        valid_options: Option<Vec<String>>,
    },
    #[error("the cursor is not valid for this list; restart without a cursor")]
    InvalidCursor,
    /// An atomic batch in which some operations failed: nothing was written.
    #[error("{} of the batch's operations failed; nothing was written", failures.len())]
    BatchFailed { failures: Vec<(usize, AppError)> },
    #[error("too many requests this minute for this workspace and mode; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error(
        "the {plan} plan's {included} live requests for this month are used up; see GET /usage"
    )]
    QuotaExceeded { plan: &'static str, included: u64 },
    #[error("the next request would take this month's overage cost past overage_cap_usd ({cap_usd} USD); raise or clear it with PATCH /settings")]
    SpendCapReached { cap_usd: f64 },
    #[error("the {plan} plan allows {limit} {what} per mode; disable or delete one, or move to a larger plan")]
    PlanLimit {
        cap: &'static str,
        what: &'static str,
        plan: &'static str,
        limit: u32,
    },
    /// The database cannot be reached; the text is logged, never sent.
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal: {0}")]
    Internal(String),
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) => AppError::Unavailable(e.to_string()),
            _ => AppError::Internal(e.to_string()),
        }
    }
}

impl AppError {
    pub fn not_found(object: &'static str, id: impl Into<String>) -> AppError {
        AppError::NotFound {
            object,
            id: id.into(),
        }
    }
}
