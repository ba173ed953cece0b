//! The unit of work as shared code sees it: how a backend runs a statement, and what differs in
//! how it locks and reports a broken uniqueness rule.

use std::{future::Future, sync::Arc};

use crm_app::{ports::RowLock, secrets::SecretBox, StoreError};
use sqlx::{Database, QueryBuilder};

use crate::{sql::Sql, SqlQuery};

/// The box secrets are sealed and opened with (`crm_app::secrets`), shared by a store's units.
pub type Secrets = Arc<dyn SecretBox>;

/// A store's unit of work (its `Tx`), as the shared statements drive it. Each store implements
/// it over its own connection: the statements are the same, running them is not (the Postgres
/// store retires a connection whose session was lost, and catches a broken uniqueness rule in a
/// savepoint).
pub trait Unit: Send {
    type Db: Sql;

    /// What follows a bound JSON text where a JSON column takes it: `::jsonb` on Postgres
    /// (text is not cast to JSON implicitly), nothing on SQLite (JSON is text).
    const JSON: &'static str;

    /// The function that answers the larger of two values: `GREATEST` on Postgres, `MAX` on
    /// SQLite (whose `GREATEST` does not exist; its two-argument `MAX` is that function).
    const GREATEST: &'static str;

    /// ` AND column IN (values)`, as the backend best takes a list (Postgres: one array
    /// argument, so the statement text does not change with the list's length).
    fn push_in<'q>(
        qb: &mut QueryBuilder<'q, Self::Db>,
        column: &str,
        values: impl IntoIterator<Item = &'q str>,
    );

    /// Pushes the text the JSON object `column` holds under `key` (bound): SQLite's
    /// `json_extract`, Postgres's `->>`.
    fn push_json_text<'q>(qb: &mut QueryBuilder<'q, Self::Db>, column: &str, key: &'q str);

    /// Pushes the JSON value the JSON object `column` holds under `key` (bound), comparable with
    /// a bound JSON text followed by [`Unit::JSON`]: SQLite's `->` (JSON text), Postgres's `->`.
    fn push_json_member<'q>(qb: &mut QueryBuilder<'q, Self::Db>, column: &str, key: &'q str);

    /// Pushes the JSON object `column` with `key` set to the string `value` (both bound), the
    /// other keys kept: SQLite's `json_set`, Postgres's `jsonb_set`.
    fn push_json_set_text<'q>(
        qb: &mut QueryBuilder<'q, Self::Db>,
        column: &str,
        key: &'q str,
        value: &'q str,
    );

    /// Runs a statement; returns how many rows it touched.
    fn execute<'q>(
        &mut self,
        q: SqlQuery<'q, Self::Db>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// [`Unit::execute`] for a statement that may break a uniqueness rule, which it reports as
    /// `Duplicate` and which leaves the unit of work usable, as the ports promise.
    fn execute_unique<'q>(
        &mut self,
        q: SqlQuery<'q, Self::Db>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Every row a query answers, each mapped.
    fn all<'q, T, F>(
        &mut self,
        q: SqlQuery<'q, Self::Db>,
        map: F,
    ) -> impl Future<Output = Result<Vec<T>, StoreError>> + Send
    where
        T: Send,
        F: Fn(&<Self::Db as Database>::Row) -> Result<T, StoreError> + Send;

    /// The row a query answers, if any, mapped.
    fn optional<'q, T, F>(
        &mut self,
        q: SqlQuery<'q, Self::Db>,
        map: F,
    ) -> impl Future<Output = Result<Option<T>, StoreError>> + Send
    where
        T: Send,
        F: Fn(&<Self::Db as Database>::Row) -> Result<T, StoreError> + Send;

    /// [`Unit::all`] for the statement `qb` built. (A built statement borrows its text for less
    /// time than its arguments, which only the backend's own types can reconcile.)
    fn all_built<'q, T, F>(
        &mut self,
        qb: &mut QueryBuilder<'q, Self::Db>,
        map: F,
    ) -> impl Future<Output = Result<Vec<T>, StoreError>> + Send
    where
        T: Send,
        F: Fn(&<Self::Db as Database>::Row) -> Result<T, StoreError> + Send;

    /// [`Unit::execute`] for the statement `qb` built.
    fn execute_built<'q>(
        &mut self,
        qb: &mut QueryBuilder<'q, Self::Db>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The clause that locks the rows a statement reads as `lock` asks (` FOR UPDATE`, ...),
    /// or nothing where the backend needs none (SQLite's single writer) or the unit of work
    /// only reads.
    fn locking(&self, lock: RowLock) -> &'static str;

    /// The clause a worker's claim ends with, so that concurrent claimers skip each other's rows
    /// (` FOR UPDATE SKIP LOCKED`), or nothing where a single writer claims.
    fn skip_locked(&self) -> &'static str;

    /// The box that seals and opens secrets in rows.
    fn secret_box(&self) -> &Secrets;
}
