//! The errors of the use cases. Each variant maps to one code of the spec's error table (the
//! mapping, with HTTP statuses, is in `crm-api`). Unexpected failures are `Internal`: their text
//! is logged with the request id and never sent to the client.

use crm_domain::ValidationError;
use serde_json::Value;

use crate::ports::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("no {object} with id {id}")]
    NotFound { object: &'static str, id: String },
    #[error("{detail}")]
    Conflict { detail: String, existing: Option<Value> },
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
    BadRequest { detail: String, valid_options: Option<Vec<String>> },
    #[error("the cursor is not valid for this list; restart without a cursor")]
    InvalidCursor,
    /// An atomic batch in which some operations failed: nothing was written.
    #[error("{} of the batch's operations failed; nothing was written", failures.len())]
    BatchFailed { failures: Vec<(usize, AppError)> },
    #[error("internal: {0}")]
    Internal(String),
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        AppError::Internal(e.to_string())
    }
}

impl AppError {
    pub fn not_found(object: &'static str, id: impl Into<String>) -> AppError {
        AppError::NotFound { object, id: id.into() }
    }
}
