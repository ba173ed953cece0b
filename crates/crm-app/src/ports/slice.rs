//! A slice of a newest-first list, as every list port takes it.

/// A slice of a newest-first list: records with an id below `before` (all when `None`), at most
/// `limit` of them, ordered by id descending (ids are time-ordered). Activities are ordered by
/// `(occurred_at, id)` descending instead, and their `before` is `"<occurred_at ms>:<id>"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub before: Option<String>,
    pub limit: u32,
}
