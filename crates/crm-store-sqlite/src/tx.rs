//! The unit of work: a write transaction on the single writer connection, or a plain reader
//! connection for reads.

use async_trait::async_trait;
use crm_app::{
    ports::{ConfigMarks, RowLock, Slice},
    StoreError, Tx,
};
use crm_domain::{Tenant, WorkspaceId};
use sqlx::{
    pool::PoolConnection,
    sqlite::{SqliteArguments, SqliteRow},
    QueryBuilder, Sqlite, SqliteConnection, Transaction,
};

use std::sync::Arc;

use crm_store_sql::{duplicate_or, Unit};

use crate::{backend, owner::Owner};

pub(crate) use crm_store_sql::Secrets;

pub enum SqliteTx {
    /// A transaction, its configuration marks, the process owning the claims it writes, and the
    /// box that seals secrets.
    Write(
        Transaction<'static, Sqlite>,
        ConfigMarks,
        Arc<Owner>,
        Secrets,
    ),
    Read(PoolConnection<Sqlite>, Secrets),
}

impl SqliteTx {
    pub(crate) fn write(
        tx: Transaction<'static, Sqlite>,
        marks: ConfigMarks,
        owner: Arc<Owner>,
        secrets: Secrets,
    ) -> Self {
        SqliteTx::Write(tx, marks, owner, secrets)
    }

    pub(crate) fn read(conn: PoolConnection<Sqlite>, secrets: Secrets) -> Self {
        SqliteTx::Read(conn, secrets)
    }

    pub(crate) fn conn(&mut self) -> &mut SqliteConnection {
        match self {
            SqliteTx::Write(tx, ..) => tx,
            SqliteTx::Read(conn, _) => conn,
        }
    }

    pub(crate) fn secrets(&self) -> Secrets {
        match self {
            SqliteTx::Write(_, _, _, s) | SqliteTx::Read(_, s) => s.clone(),
        }
    }
}

pub(crate) type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

/// Binds `$1` workspace and `$2` mode, which every tenant statement here starts with.
pub(crate) fn tenant_query<'q>(sql: &'q str, tenant: &'q Tenant) -> Query<'q> {
    sqlx::query(sql)
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
}

pub(crate) use crm_store_sql::is_unique_violation;

// The insert and update texts, with this backend's JSON cast.
crm_store_sql::impl_statements!(SqliteTx, json = "");

/// SQLite's single writer needs no row locks and lets no other claimer in; a statement that
/// breaks a uniqueness rule leaves the transaction as it was.
impl Unit for SqliteTx {
    type Db = Sqlite;

    const GREATEST: &'static str = "MAX";

    const JSON: &'static str = "";

    fn push_in<'q>(
        qb: &mut QueryBuilder<'q, Sqlite>,
        column: &str,
        values: impl IntoIterator<Item = &'q str>,
    ) {
        qb.push(" AND ").push(column).push(" IN (");
        let mut list = qb.separated(", ");
        for v in values {
            list.push_bind(v);
        }
        qb.push(")");
    }

    fn push_json_text<'q>(qb: &mut QueryBuilder<'q, Sqlite>, column: &str, key: &'q str) {
        qb.push(format!("json_extract({column}, '$.' || "))
            .push_bind(key)
            .push(")");
    }

    fn push_json_member<'q>(qb: &mut QueryBuilder<'q, Sqlite>, column: &str, key: &'q str) {
        qb.push(format!("({column} -> ('$.' || "))
            .push_bind(key)
            .push("))");
    }

    fn push_json_set_text<'q>(
        qb: &mut QueryBuilder<'q, Sqlite>,
        column: &str,
        key: &'q str,
        value: &'q str,
    ) {
        qb.push(format!("json_set({column}, '$.' || "))
            .push_bind(key)
            .push(", ")
            .push_bind(value)
            .push(")");
    }

    async fn execute<'q>(
        &mut self,
        q: sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>,
    ) -> Result<u64, StoreError> {
        Ok(q.execute(self.conn())
            .await
            .map_err(backend)?
            .rows_affected())
    }

    async fn execute_unique<'q>(
        &mut self,
        q: sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>,
    ) -> Result<u64, StoreError> {
        match q.execute(self.conn()).await {
            Ok(done) => Ok(done.rows_affected()),
            Err(e) => Err(duplicate_or(e, backend)),
        }
    }

    async fn all<'q, T, F>(
        &mut self,
        q: sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>,
        map: F,
    ) -> Result<Vec<T>, StoreError>
    where
        T: Send,
        F: Fn(&SqliteRow) -> Result<T, StoreError> + Send,
    {
        let rows = q.fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(map).collect()
    }

    async fn optional<'q, T, F>(
        &mut self,
        q: sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>,
        map: F,
    ) -> Result<Option<T>, StoreError>
    where
        T: Send,
        F: Fn(&SqliteRow) -> Result<T, StoreError> + Send,
    {
        let row = q.fetch_optional(self.conn()).await.map_err(backend)?;
        row.as_ref().map(map).transpose()
    }

    async fn all_built<'q, T, F>(
        &mut self,
        qb: &mut QueryBuilder<'q, Sqlite>,
        map: F,
    ) -> Result<Vec<T>, StoreError>
    where
        T: Send,
        F: Fn(&SqliteRow) -> Result<T, StoreError> + Send,
    {
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(map).collect()
    }

    async fn execute_built<'q>(
        &mut self,
        qb: &mut QueryBuilder<'q, Sqlite>,
    ) -> Result<u64, StoreError> {
        Ok(qb
            .build()
            .execute(self.conn())
            .await
            .map_err(backend)?
            .rows_affected())
    }

    fn locking(&self, _lock: RowLock) -> &'static str {
        ""
    }

    fn skip_locked(&self) -> &'static str {
        ""
    }

    fn secret_box(&self) -> &Secrets {
        match self {
            SqliteTx::Write(_, _, _, s) | SqliteTx::Read(_, s) => s,
        }
    }
}

pub(crate) fn json_text(map: &crm_domain::JsonMap) -> String {
    serde_json::Value::Object(map.clone()).to_string()
}

pub(crate) fn tenant_where<'a>(qb: &mut QueryBuilder<'a, Sqlite>, tenant: &'a Tenant) {
    qb.push(" WHERE workspace_id = ")
        .push_bind(tenant.workspace_id.as_str())
        .push(" AND mode = ")
        .push_bind(tenant.mode.as_str());
}

pub(crate) fn slice_clause<'a>(qb: &mut QueryBuilder<'a, Sqlite>, slice: &'a Slice) {
    slice_clause_on(qb, "id", slice);
}

/// [`slice_clause`] on the id column `id` (qualified when the query joins).
pub(crate) fn slice_clause_on<'a>(qb: &mut QueryBuilder<'a, Sqlite>, id: &str, slice: &'a Slice) {
    if let Some(before) = &slice.before {
        qb.push(format!(" AND {id} < ")).push_bind(before.as_str());
    }
    qb.push(format!(" ORDER BY {id} DESC LIMIT "))
        .push_bind(i64::from(slice.limit));
}

#[async_trait]
impl Tx for SqliteTx {
    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
            SqliteTx::Write(tx, marks, ..) if marks.rolls_back() => {
                tx.rollback().await.map_err(backend)
            }
            SqliteTx::Write(mut tx, marks, ..) => {
                // Other processes on this file (the CLI) poll the counter; see `follow_config_changes`.
                if !marks.workspaces().is_empty() {
                    sqlx::query("UPDATE config_epoch SET seq = seq + 1 WHERE id = 1")
                        .execute(&mut *tx)
                        .await
                        .map_err(backend)?;
                }
                tx.commit().await.map_err(backend)?;
                marks.committed();
                Ok(())
            }
            SqliteTx::Read(..) => Ok(()),
        }
    }

    fn roll_back_at_commit(&mut self) {
        match self {
            SqliteTx::Write(_, marks, ..) => marks.roll_back_at_commit(),
            SqliteTx::Read(..) => debug_assert!(false, "a dry run through a read unit of work"),
        }
    }

    fn mark_config_changed(&mut self, workspace: &WorkspaceId) {
        match self {
            SqliteTx::Write(_, marks, ..) => marks.mark(workspace),
            SqliteTx::Read(..) => {
                debug_assert!(false, "configuration changed through a read unit of work")
            }
        }
    }

    fn config_changed(&self) -> bool {
        matches!(self, SqliteTx::Write(_, marks, ..) if !marks.workspaces().is_empty())
    }

    async fn savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        sqlx::query(&crm_store_sql::savepoint_sql("SAVEPOINT", name)?)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn release_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        sqlx::query(&crm_store_sql::savepoint_sql("RELEASE SAVEPOINT", name)?)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        sqlx::query(&crm_store_sql::savepoint_sql(
            "ROLLBACK TO SAVEPOINT",
            name,
        )?)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }
}
