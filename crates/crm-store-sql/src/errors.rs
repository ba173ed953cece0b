//! Constraint violations as the ports' business errors, and rows that do not decode.

use crm_app::StoreError;

/// Was this a violation of a UNIQUE or PRIMARY KEY constraint?
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A broken uniqueness rule as `Duplicate`, anything else as `other` reports it.
pub fn duplicate_or(e: sqlx::Error, other: impl FnOnce(sqlx::Error) -> StoreError) -> StoreError {
    if is_unique_violation(&e) {
        StoreError::Duplicate
    } else {
        other(e)
    }
}

/// A stored value the record cannot hold (an unknown enum name, a number out of range).
pub fn corrupt(what: &str) -> StoreError {
    StoreError::Backend(format!("corrupt row: {what}").into())
}
