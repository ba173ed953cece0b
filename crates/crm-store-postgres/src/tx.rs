//! The unit of work: a write transaction, or a plain pooled connection for reads.
//!
//! Conventions that keep the statements below short: every tenant-scoped statement takes the
//! workspace as `$1` and the mode as `$2` (`tenant_query`); JSON is bound as text and cast with
//! `::jsonb`, and read back as `::text` (see `rows`).

use async_trait::async_trait;
use crm_app::{
    ports::{ConfigMarks, RowLock, Slice},
    StoreError, Tx,
};
use crm_domain::{history::Change, Event, JsonMap, Tenant, WorkspaceId};
use sqlx::{
    postgres::{PgArguments, PgRow},
    query::Query,
    PgConnection, Postgres, QueryBuilder, Row,
};

use crm_store_sql::{duplicate_or, Unit};

use crate::{backend, pool::Lease};

pub(crate) type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

pub(crate) use crm_store_sql::Secrets;

pub(crate) enum PostgresTx {
    /// A transaction (`BEGIN` sent) on its own connection, with the owner id of the claims it
    /// writes (see `owner`), and the box that seals secrets.
    Write(Lease, ConfigMarks, i64, Secrets),
    /// A connection with no transaction: each statement sees what had committed when it started.
    Read(Lease, Secrets),
}

impl PostgresTx {
    pub(crate) fn write(lease: Lease, marks: ConfigMarks, owner: i64, secrets: Secrets) -> Self {
        PostgresTx::Write(lease, marks, owner, secrets)
    }

    pub(crate) fn read(lease: Lease, secrets: Secrets) -> Self {
        PostgresTx::Read(lease, secrets)
    }

    /// The owner of the claims this unit of work writes; a read writes none.
    pub(crate) fn owner(&self) -> Option<i64> {
        match self {
            PostgresTx::Write(_, _, owner, _) => Some(*owner),
            PostgresTx::Read(..) => None,
        }
    }

    pub(crate) fn lease(&mut self) -> &mut Lease {
        match self {
            PostgresTx::Write(lease, ..) | PostgresTx::Read(lease, _) => lease,
        }
    }

    pub(crate) fn secrets(&self) -> Secrets {
        match self {
            PostgresTx::Write(_, _, _, s) | PostgresTx::Read(_, s) => s.clone(),
        }
    }

    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        self.lease().raw()
    }

    /// The store error for a failed statement; a connection-level failure also keeps the
    /// connection from being used again (see `pool`).
    pub(crate) fn failed(&mut self, e: sqlx::Error) -> StoreError {
        backend(self.lease().failed(e))
    }

    /// The locking clause for reading a row this unit of work may then update: in a write
    /// transaction, a concurrent read-modify-write of the same row waits for this one to commit
    /// and then reads its result, instead of failing later with `Stale`. Reads lock nothing.
    pub(crate) fn for_update(&self) -> &'static str {
        self.locking(RowLock::Update)
    }

    /// The locking clause for `lock` in a write transaction; reads lock nothing.
    pub(crate) fn locking(&self, lock: RowLock) -> &'static str {
        match (self, lock) {
            (PostgresTx::Read(..), _) => "",
            (PostgresTx::Write(..), RowLock::Update) => " FOR UPDATE",
            (PostgresTx::Write(..), RowLock::Share) => " FOR SHARE",
            (PostgresTx::Write(..), RowLock::KeyShare) => " FOR KEY SHARE",
            (PostgresTx::Write(..), RowLock::Unlocked) => "",
        }
    }

    /// The single boolean a `SELECT EXISTS (...)` answers.
    pub(crate) async fn exists(&mut self, q: PgQuery<'_>) -> Result<bool, StoreError> {
        let row = q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        row.try_get(0).map_err(backend)
    }
}

// The insert and update texts, with this backend's JSON cast.
crm_store_sql::impl_statements!(PostgresTx, json = "::jsonb");

impl Unit for PostgresTx {
    type Db = Postgres;

    const GREATEST: &'static str = "GREATEST";

    const JSON: &'static str = "::jsonb";

    fn push_in<'q>(
        qb: &mut QueryBuilder<'q, Postgres>,
        column: &str,
        values: impl IntoIterator<Item = &'q str>,
    ) {
        let values: Vec<&'q str> = values.into_iter().collect();
        qb.push(" AND ")
            .push(column)
            .push(" = ANY(")
            .push_bind(values)
            .push(")");
    }

    fn push_json_text<'q>(qb: &mut QueryBuilder<'q, Postgres>, column: &str, key: &'q str) {
        qb.push(format!("({column} ->> ")).push_bind(key).push(")");
    }

    fn push_json_member<'q>(qb: &mut QueryBuilder<'q, Postgres>, column: &str, key: &'q str) {
        qb.push(format!("({column} -> ")).push_bind(key).push(")");
    }

    fn push_json_set_text<'q>(
        qb: &mut QueryBuilder<'q, Postgres>,
        column: &str,
        key: &'q str,
        value: &'q str,
    ) {
        qb.push(format!("jsonb_set({column}, ARRAY["))
            .push_bind(key)
            .push("::text], to_jsonb(")
            .push_bind(value)
            .push("::text))");
    }

    async fn execute<'q>(&mut self, q: PgQuery<'q>) -> Result<u64, StoreError> {
        Ok(q.execute(self.conn())
            .await
            .map_err(|e| self.failed(e))?
            .rows_affected())
    }

    /// A failed statement aborts a Postgres transaction, and the port promises `Duplicate`
    /// leaves it usable, so in a write transaction the statement runs in a savepoint that is
    /// rolled back when it fails. Statements that can use `ON CONFLICT DO NOTHING` do instead.
    async fn execute_unique<'q>(&mut self, q: PgQuery<'q>) -> Result<u64, StoreError> {
        let result = match self {
            PostgresTx::Write(lease, ..) => {
                lease.begin().await.map_err(backend)?; // a savepoint, inside the transaction
                let result = q.execute(lease.raw()).await;
                let closed = if result.is_ok() {
                    lease.commit().await
                } else {
                    lease.rollback().await
                };
                closed.map_err(backend)?;
                result
            }
            // Outside a transaction a failed statement spoils nothing.
            PostgresTx::Read(lease, _) => q.execute(lease.raw()).await,
        };
        match result {
            Ok(done) => Ok(done.rows_affected()),
            Err(e) => Err(duplicate_or(e, |e| self.failed(e))),
        }
    }

    async fn all<'q, T, F>(&mut self, q: PgQuery<'q>, map: F) -> Result<Vec<T>, StoreError>
    where
        T: Send,
        F: Fn(&PgRow) -> Result<T, StoreError> + Send,
    {
        let rows = q.fetch_all(self.conn()).await.map_err(|e| self.failed(e))?;
        rows.iter().map(map).collect()
    }

    async fn optional<'q, T, F>(&mut self, q: PgQuery<'q>, map: F) -> Result<Option<T>, StoreError>
    where
        T: Send,
        F: Fn(&PgRow) -> Result<T, StoreError> + Send,
    {
        let row = q
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        row.as_ref().map(map).transpose()
    }

    async fn all_built<'q, T, F>(
        &mut self,
        qb: &mut QueryBuilder<'q, Postgres>,
        map: F,
    ) -> Result<Vec<T>, StoreError>
    where
        T: Send,
        F: Fn(&PgRow) -> Result<T, StoreError> + Send,
    {
        let rows = qb
            .build()
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter().map(map).collect()
    }

    async fn execute_built<'q>(
        &mut self,
        qb: &mut QueryBuilder<'q, Postgres>,
    ) -> Result<u64, StoreError> {
        Ok(qb
            .build()
            .execute(self.conn())
            .await
            .map_err(|e| self.failed(e))?
            .rows_affected())
    }

    fn locking(&self, lock: RowLock) -> &'static str {
        PostgresTx::locking(self, lock)
    }

    fn skip_locked(&self) -> &'static str {
        " FOR UPDATE SKIP LOCKED"
    }

    fn secret_box(&self) -> &Secrets {
        match self {
            PostgresTx::Write(_, _, _, s) | PostgresTx::Read(_, s) => s,
        }
    }
}

/// `sql` with the tenant bound as `$1` (workspace) and `$2` (mode).
pub(crate) fn tenant_query<'q>(sql: &'q str, tenant: &'q Tenant) -> PgQuery<'q> {
    sqlx::query(sql)
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
}

pub(crate) fn json_text(map: &JsonMap) -> String {
    serde_json::Value::Object(map.clone()).to_string()
}

pub(crate) fn tenant_where<'a>(qb: &mut QueryBuilder<'a, Postgres>, tenant: &'a Tenant) {
    qb.push(" WHERE workspace_id = ")
        .push_bind(tenant.workspace_id.as_str())
        .push(" AND mode = ")
        .push_bind(tenant.mode.as_str());
}

/// ` AND <column> = value` when a list filters on `value`; nothing when it does not.
pub(crate) fn and_equals<'a>(
    qb: &mut QueryBuilder<'a, Postgres>,
    column: &str,
    value: Option<&'a str>,
) {
    if let Some(value) = value {
        qb.push(format!(" AND {column} = ")).push_bind(value);
    }
}

pub(crate) fn slice_clause<'a>(qb: &mut QueryBuilder<'a, Postgres>, slice: &'a Slice) {
    slice_clause_on(qb, "id", slice);
}

/// [`slice_clause`] on the id column `id` (qualified when the query joins).
pub(crate) fn slice_clause_on<'a>(qb: &mut QueryBuilder<'a, Postgres>, id: &str, slice: &'a Slice) {
    if let Some(before) = &slice.before {
        qb.push(format!(" AND {id} < ")).push_bind(before.as_str());
    }
    qb.push(format!(" ORDER BY {id} DESC LIMIT "))
        .push_bind(i64::from(slice.limit));
}

pub(crate) fn out_of_range(what: &str) -> StoreError {
    StoreError::Backend(format!("{what} out of range").into())
}

#[async_trait]
impl Tx for PostgresTx {
    /// A transaction-scoped advisory lock on the tenant and the key (its own statement: the
    /// read that follows must see what the lock's previous holder committed).
    async fn lock_key(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2 || ':key:' || $3, 0))",
            tenant,
        )
        .bind(key);
        q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn insert_events_and_changes(
        &mut self,
        tenant: &Tenant,
        events: &[Event],
        changes: &[Change],
    ) -> Result<(), StoreError> {
        PostgresTx::insert_events_and_changes(self, tenant, events, changes).await
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
            PostgresTx::Write(mut lease, marks, ..) if marks.rolls_back() => {
                lease.rollback().await.map_err(backend)
            }
            PostgresTx::Write(mut lease, marks, ..) => {
                // Queued by the transaction, delivered to every listener only if it commits.
                for ws in marks.workspaces() {
                    let notify = sqlx::query("SELECT pg_notify($1, $2)")
                        .bind(crate::CONFIG_CHANNEL)
                        .bind(ws.as_str())
                        .execute(lease.raw())
                        .await;
                    notify.map_err(|e| backend(lease.failed(e)))?;
                }
                lease.commit().await.map_err(backend)?;
                marks.committed();
                Ok(())
            }
            PostgresTx::Read(..) => Ok(()),
        }
    }

    fn roll_back_at_commit(&mut self) {
        match self {
            PostgresTx::Write(_, marks, ..) => marks.roll_back_at_commit(),
            PostgresTx::Read(..) => debug_assert!(false, "a dry run through a read unit of work"),
        }
    }

    fn mark_config_changed(&mut self, workspace: &WorkspaceId) {
        match self {
            PostgresTx::Write(_, marks, ..) => marks.mark(workspace),
            PostgresTx::Read(..) => {
                debug_assert!(false, "configuration changed through a read unit of work")
            }
        }
    }

    fn config_changed(&self) -> bool {
        matches!(self, PostgresTx::Write(_, marks, ..) if !marks.workspaces().is_empty())
    }

    async fn savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        self.savepoint_statement("SAVEPOINT", name).await
    }

    async fn release_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        self.savepoint_statement("RELEASE SAVEPOINT", name).await
    }

    /// Also how a write transaction recovers from a failed statement, which aborts the whole
    /// transaction in Postgres: everything after the savepoint is undone and the rest is usable.
    async fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        self.savepoint_statement("ROLLBACK TO SAVEPOINT", name)
            .await
    }
}

impl PostgresTx {
    /// Savepoint names come from our own code, never from input; still, anything but a plain
    /// identifier is refused rather than spliced into SQL. A read unit of work has no
    /// transaction to mark (Postgres refuses SAVEPOINT outside one) and nothing to undo, so
    /// there the statements are skipped.
    async fn savepoint_statement(&mut self, verb: &str, name: &str) -> Result<(), StoreError> {
        let sql = crm_store_sql::savepoint_sql(verb, name)?;
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        // Not prepared: nothing to gain, and one cached statement per name and connection.
        self.execute(sqlx::query(&sql).persistent(false)).await?;
        Ok(())
    }
}
