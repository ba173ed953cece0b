//! The store's failures, which every store port returns. A leaf module (it knows no use case and
//! no port), so that the ports and [`crate::error`] can both depend on it without a cycle.

/// Failures of a store. Business meaning is carried by `Duplicate`; `Unavailable` is a 503 the
/// client may retry; everything else is unexpected and becomes a 500 with the details logged,
/// never shown.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was hit. The transaction is still usable.
    #[error("duplicate")]
    Duplicate,
    /// An optimistic update found the row at another version than expected.
    #[error("stale version")]
    Stale,
    /// The write names a record that does not exist: the `usize` is its index in the write's
    /// list of references (the ports' `Reference`). Nothing was written; the transaction is
    /// still usable.
    #[error("missing reference")]
    MissingReference(usize),
    /// The database cannot be reached: no connection could be made or kept (refused, timed out,
    /// dropped, the server shutting down or not yet accepting connections). A store MUST report
    /// these as `Unavailable` and nothing else (a busy SQLite file, a failed statement, a
    /// constraint are `Backend`), so that a client is told to retry only when retrying can help.
    #[error("database unavailable: {0}")]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    #[error("store: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}
