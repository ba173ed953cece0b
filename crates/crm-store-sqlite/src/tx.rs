//! The unit of work: a write transaction on the single writer connection, or a plain reader
//! connection for reads.

use async_trait::async_trait;
use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::{IdemRecord, StoredReply},
    ports::{
        CompanyFilter, CompanyRepo, ConfigMarks, ContactFilter, ContactRepo, EventRepo,
        IdempotencyRepo, RecordRepo, Reference, RegistryRepo, Slice, WorkspaceRepo,
    },
    StoreError, Tx,
};
use crm_domain::{
    registry::{DataType, EnumValue, FieldDef},
    ApiKeyId, Company, CompanyId, Contact, ContactId, Email, Event, ObjectKind, ObjectType,
    Registry, Tenant, Timestamp, WorkspaceId,
};
use sqlx::{
    pool::PoolConnection, sqlite::SqliteRow, QueryBuilder, Row, Sqlite, SqliteConnection,
    Transaction,
};

use std::sync::Arc;

use crate::{backend, owner::Owner, rows};

/// The box secrets are sealed and opened with (`crm_app::secrets`), shared by the store's units.
pub(crate) type Secrets = std::sync::Arc<dyn crm_app::secrets::SecretBox>;

pub enum SqliteTx {
    /// A transaction, its configuration marks, the process owning the claims it writes, and the
    /// box that seals secrets.
    Write(Transaction<'static, Sqlite>, ConfigMarks, Arc<Owner>, Secrets),
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

/// Was this a violation of a UNIQUE or PRIMARY KEY constraint?
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// `%q%` with LIKE's wildcards escaped (with `\`).
pub(crate) fn like_pattern(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 2);
    p.push('%');
    for c in q.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// The FTS5 query for the substring `q`: one phrase, quoted.
fn fts_phrase(q: &str) -> String {
    format!("\"{}\"", q.to_lowercase().replace('"', "\"\""))
}

/// A case-insensitive substring condition on the table's `search_text`: through its FTS5 trigram
/// index when the needle has at least three characters (the shortest a trigram can match),
/// else a LIKE over the column.
pub(crate) fn push_search(qb: &mut QueryBuilder<'_, Sqlite>, fts_table: &'static str, q: &str) {
    // Counted lower-cased, as the index sees it; the helpers lower the needle themselves.
    if q.to_lowercase().chars().count() >= 3 {
        qb.push(" AND rowid IN (SELECT rowid FROM ")
            .push(fts_table)
            .push(" WHERE ")
            .push(fts_table)
            .push(" MATCH ")
            .push_bind(fts_phrase(q))
            .push(")");
    } else {
        qb.push(" AND search_text LIKE ")
            .push_bind(like_pattern(q))
            .push(" ESCAPE '\\'");
    }
}

/// The needle of a text search that [`search_page`] can answer: three characters or more (the
/// trigram index's shortest), all printable ASCII. Its first step filters with `LIKE`, which
/// folds only ASCII letters (as `lower()` does when `search_text` is generated), where the
/// trigram index folds every letter: for "josé" against "JOSÉ" they disagree, so such a needle
/// keeps the one statement, all through the trigram index. (A control character would end
/// `LIKE`'s pattern early: a NUL makes `%ab\0cd%` match text ending in "ab".)
pub(crate) fn trigram_needle(q: Option<&String>) -> Option<&str> {
    q.map(String::as_str)
        .filter(|q| q.len() >= 3 && q.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
}

/// `search_text` as the trigram index sees it for an ASCII needle: of all the letters its case
/// folding takes to another, only these two land in ASCII (the KELVIN SIGN and the long s), so
/// with them replaced `LIKE` and the index agree on every printable ASCII needle.
const SEARCH_TEXT_FOLDED: &str = "replace(replace(search_text, '\u{212A}', 'k'), '\u{17F}', 's')";

/// ` AND deleted_at IS NULL` unless deleted rows are asked for.
pub(crate) fn push_not_deleted(qb: &mut QueryBuilder<'_, Sqlite>, include_deleted: bool) {
    if !include_deleted {
        qb.push(" AND deleted_at IS NULL");
    }
}

/// How many of a tenant's newest rows a text search reads per row of its page before it asks
/// the trigram index for the rest: a needle in one row of 40 or more fills its page there.
const SEARCH_WINDOW_PER_ROW: u32 = 40;

/// How many of the older rows' trigram matches a text search reads, per row of its window,
/// before it takes the needle for a common one after all.
const SEARCH_MATCHES_PER_WINDOW_ROW: u32 = 5;

/// A text search's page (needles of three characters or more), in statements whose cost does not
/// grow with the tenant's rows unless its matches do. In one statement SQLite walks the primary
/// key newest first and checks each row against the needle's trigram matches, which it first
/// reads in full: a common needle read every one of them (3.8 ms at 1,000,000 contacts) and a
/// rare one walked the rows until the page was full (7.3 ms), both in proportion to the table.
/// Here, as on Postgres:
/// 1. the tenant's newest `window` rows (from the cursor on) are walked newest first and filtered
///    by `LIKE`: a page of a needle common among them ends there;
/// 2. if the page is not full, the trigram matches drive: each is looked up by rowid and kept if
///    it is the tenant's, older than the window and passes the filters, up to `5 × window` of
///    them, then sorted and cut to the rest of the page;
/// 3. only if that cap was reached (a needle common among the older rows but rare among the
///    newest, such as an old import's domain) does the one statement read the rest.
///
/// `include_deleted`: the list's one other condition here (lists filtered by an indexed column or
/// a custom field keep one statement: that index serves them better).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn search_page<'a, T>(
    tx: &mut SqliteTx,
    tenant: &'a Tenant,
    (table, fts, columns): (&'static str, &'static str, &'static str),
    q: &'a str,
    slice: &'a Slice,
    include_deleted: bool,
    map: fn(&SqliteRow) -> Result<T, StoreError>,
    id_of: fn(&T) -> &str,
) -> Result<Vec<T>, StoreError> {
    let window = slice.limit.max(25) * SEARCH_WINDOW_PER_ROW;
    let cap = window * SEARCH_MATCHES_PER_WINDOW_ROW;
    let newest = |qb: &mut QueryBuilder<'a, Sqlite>| {
        tenant_where(qb, tenant);
        if let Some(before) = &slice.before {
            qb.push(" AND id < ").push_bind(before.as_str());
        }
    };
    // The window's last row: the tenant's `window`-th newest (from the cursor on), none when it
    // has fewer rows.
    let edge = |qb: &mut QueryBuilder<'a, Sqlite>| {
        qb.push(format!("(SELECT id FROM {table}"));
        newest(qb);
        qb.push(format!(" ORDER BY id DESC LIMIT 1 OFFSET {})", window - 1));
    };
    // The window walked newest first by primary key, stopping at the page's end: a common needle
    // reads a few rows, a rare one at most the window.
    let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM {table}"));
    newest(&mut qb);
    push_not_deleted(&mut qb, include_deleted);
    qb.push(" AND id >= coalesce(");
    edge(&mut qb);
    qb.push(format!(", '') AND {SEARCH_TEXT_FOLDED} LIKE "))
        .push_bind(like_pattern(q))
        .push(" ESCAPE '\\' ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(slice.limit));
    let mut page = fetch_all(tx, &mut qb, map).await?;
    if page.len() >= slice.limit as usize {
        return Ok(page);
    }
    // The rows older than the window (a tenant with fewer rows has none: `id < NULL`), and than
    // the page so far (rows written since the first statement move the window, and a row it
    // returned must not come again).
    let oldest = page.last().map(|row| id_of(row).to_owned());
    let older = |qb: &mut QueryBuilder<'a, Sqlite>| {
        tenant_where(qb, tenant);
        push_not_deleted(qb, include_deleted);
        qb.push(" AND id < ");
        edge(qb);
        // The same edge again as a term of its own: a constant, which SQLite tests once before
        // its loops, so a tenant smaller than the window skips the read altogether. Inside
        // `id < ...` it is tested per trigram match, of every tenant (1.7 ms against 0.08 ms for
        // a common needle at 50,000 rows).
        qb.push(" AND ");
        edge(qb);
        qb.push(" IS NOT NULL");
        if let Some(oldest) = oldest.clone() {
            qb.push(" AND id < ").push_bind(oldest);
        }
    };
    let rest = i64::from(slice.limit) - page.len() as i64;
    // CROSS JOIN keeps the trigram matches the outer loop: left to itself the planner walks the
    // tenant's older rows by primary key instead, the whole table for a rare needle.
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "WITH hits AS MATERIALIZED (SELECT {columns} FROM (SELECT rowid AS hit FROM {fts} WHERE {fts} MATCH "
    ));
    qb.push_bind(fts_phrase(q))
        .push(format!(") CROSS JOIN {table} ON {table}.rowid = hit"));
    older(&mut qb);
    qb.push(format!(
        " LIMIT {cap}) SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT "
    ))
    .push_bind(rest);
    let hits = fetch_all(tx, &mut qb, |row| {
        Ok((map(row)?, row.try_get::<i64, _>("found").map_err(backend)?))
    })
    .await?;
    if hits
        .first()
        .is_none_or(|(_, found)| *found < i64::from(cap))
    {
        page.extend(hits.into_iter().map(|(row, _)| row));
        return Ok(page);
    }
    let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM {table}"));
    older(&mut qb);
    push_search(&mut qb, fts, q);
    qb.push(" ORDER BY id DESC LIMIT ").push_bind(rest);
    page.extend(fetch_all(tx, &mut qb, map).await?);
    Ok(page)
}

async fn fetch_all<T>(
    tx: &mut SqliteTx,
    qb: &mut QueryBuilder<'_, Sqlite>,
    map: impl Fn(&SqliteRow) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let rows = qb.build().fetch_all(tx.conn()).await.map_err(backend)?;
    rows.iter().map(map).collect()
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
impl WorkspaceRepo for SqliteTx {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO workspaces (id, name, plan, created_at, overage_cap_usd, rate_limit_override, included_requests_override)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ws.id.as_str())
        .bind(&ws.name)
        .bind(ws.plan.as_str())
        .bind(ws.created_at.millis())
        .bind(ws.overage_cap_usd)
        .bind(ws.rate_limit_override.map(i64::from))
        .bind(ws.included_requests_override.map(|v| v as i64))
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError> {
        let sql = format!(
            "SELECT {} FROM workspaces w WHERE w.id = $1",
            rows::WORKSPACE_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::workspace).transpose()
    }

    async fn has_workspaces(&mut self) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM workspaces)")
            .fetch_one(self.conn())
            .await
            .map_err(backend)?;
        row.try_get::<bool, _>(0).map_err(backend)
    }

    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (workspace_id, mode, id, name, scopes, key_hash, created_at, last_used_at, revoked_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(key.workspace_id.as_str())
        .bind(key.mode.as_str())
        .bind(key.id.as_str())
        .bind(&key.name)
        .bind(serde_json::to_string(&key.scopes).unwrap_or_else(|_| "[]".into()))
        .bind(&key.key_hash)
        .bind(key.created_at.millis())
        .bind(key.last_used_at.map(Timestamp::millis))
        .bind(key.revoked_at.map(Timestamp::millis))
        .bind(key.expires_at.map(Timestamp::millis))
        .execute(self.conn())
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Duplicate } else { backend(e) })?;
        Ok(())
    }

    async fn find_api_key(
        &mut self,
        hash: &str,
    ) -> Result<Option<(ApiKeyRecord, Workspace)>, StoreError> {
        let sql = format!(
            "SELECT {}, {} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.key_hash = $1",
            rows::KEY_COLUMNS,
            rows::WORKSPACE_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(hash)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.map(|r| Ok((rows::api_key(&r)?, rows::workspace(&r)?)))
            .transpose()
    }

    async fn get_api_key(
        &mut self,
        tenant: &Tenant,
        id: &ApiKeyId,
    ) -> Result<Option<ApiKeyRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM api_keys k WHERE k.workspace_id = $1 AND k.mode = $2 AND k.id = $3",
            rows::KEY_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::api_key).transpose()
    }
}

#[async_trait]
impl RegistryRepo for SqliteTx {
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError> {
        let (ws, mode) = (tenant.workspace_id.as_str(), tenant.mode.as_str());
        let field_rows = sqlx::query(
            "SELECT key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3 ORDER BY position, key",
        )
        .bind(ws)
        .bind(mode)
        .bind(object.as_str())
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        let mut registry = Registry::default();
        for r in &field_rows {
            registry.fields.push(field_def(r, object)?);
        }
        let groups =
            sqlx::query("SELECT grp FROM enum_groups WHERE workspace_id = $1 AND mode = $2")
                .bind(ws)
                .bind(mode)
                .fetch_all(self.conn())
                .await
                .map_err(backend)?;
        for g in &groups {
            registry
                .enums
                .insert(g.try_get("grp").map_err(backend)?, Vec::new());
        }
        let values = sqlx::query(
            "SELECT grp, value, label FROM enum_values WHERE workspace_id = $1 AND mode = $2 ORDER BY grp, position",
        )
        .bind(ws)
        .bind(mode)
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        for v in &values {
            let group: String = v.try_get("grp").map_err(backend)?;
            registry.enums.entry(group).or_default().push(EnumValue {
                value: v.try_get("value").map_err(backend)?,
                label: v.try_get("label").map_err(backend)?,
            });
        }
        Ok(registry)
    }

    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO enum_groups (workspace_id, mode, grp, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(group)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_enum_value(
        &mut self,
        tenant: &Tenant,
        group: &str,
        value: &str,
        label: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.insert_enum_group(tenant, group, now).await?;
        let done = sqlx::query(
            "INSERT INTO enum_values (workspace_id, mode, grp, value, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, COALESCE(MAX(position), 0) + 1 FROM enum_values
             WHERE workspace_id = $1 AND mode = $2 AND grp = $3
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(group)
        .bind(value)
        .bind(label)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    // The single writer connection serializes write transactions, so reading the highest
    // position and inserting after it cannot interleave with another registration.
    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO custom_fields (workspace_id, mode, object, key, label, data_type, enum_group, required, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE(MAX(position), 0) + 1 FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(field.object.as_str())
        .bind(&field.key)
        .bind(field.label.as_deref())
        .bind(field.data_type.as_str())
        .bind(field.enum_group.as_deref())
        .bind(field.required)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError> {
        let rows = sqlx::query(
            "SELECT object, key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 ORDER BY object, position, key",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        rows.iter()
            .map(|r| {
                let object: String = r.try_get("object").map_err(backend)?;
                field_def(
                    r,
                    ObjectKind::parse(&object).ok_or_else(|| rows::corrupt("object"))?,
                )
            })
            .collect()
    }

    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        t: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO object_types (workspace_id, mode, key, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, COALESCE(MAX(position), 0) + 1 FROM object_types
             WHERE workspace_id = $1 AND mode = $2
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(&t.key)
        .bind(t.label.as_deref())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError> {
        let rows = sqlx::query("SELECT key, label FROM object_types WHERE workspace_id = $1 AND mode = $2 ORDER BY position, key")
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .fetch_all(self.conn())
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|r| {
                Ok(ObjectType {
                    key: r.try_get("key").map_err(backend)?,
                    label: r.try_get("label").map_err(backend)?,
                })
            })
            .collect()
    }
}

fn field_def(r: &SqliteRow, object: ObjectKind) -> Result<FieldDef, StoreError> {
    let data_type: String = r.try_get("data_type").map_err(backend)?;
    Ok(FieldDef {
        object,
        key: r.try_get("key").map_err(backend)?,
        label: r.try_get("label").map_err(backend)?,
        data_type: DataType::parse(&data_type).ok_or_else(|| rows::corrupt("data_type"))?,
        enum_group: r.try_get("enum_group").map_err(backend)?,
        required: r.try_get("required").map_err(backend)?,
    })
}

fn bind_contact<'q>(
    q: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    c: &'q Contact,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    q.bind(c.first_name.as_deref())
        .bind(c.last_name.as_deref())
        .bind(c.email.as_ref().map(Email::as_str))
        .bind(c.phone.as_deref())
        .bind(c.linkedin_url.as_deref())
        .bind(c.company_id.as_ref().map(CompanyId::as_str))
        .bind(c.contact_type.as_deref())
        .bind(json_text(&c.custom_fields))
        .bind(c.updated_at.millis())
        .bind(c.version)
        .bind(c.deleted_at.map(Timestamp::millis))
}

#[async_trait]
impl ContactRepo for SqliteTx {
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError> {
        // The references are checked by the INSERT itself, as on Postgres: every statement is a
        // round trip to the connection's thread, taken while the write lock is held. (`WHERE
        // true` keeps SQLite from reading `ON CONFLICT` as part of the SELECT.)
        let mut sql = String::from(
            "INSERT INTO contacts (first_name, last_name, email, phone, linkedin_url, company_id, type, custom_fields,
                                   updated_at, version, deleted_at, workspace_id, mode, id, created_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 WHERE true",
        );
        for (i, r) in refs.iter().enumerate() {
            let (table, n) = (record_table(r.object), 16 + i);
            sql.push_str(&format!(" AND EXISTS (SELECT 1 FROM {table} WHERE workspace_id = $12 AND mode = $13 AND id = ${n})"));
        }
        sql.push_str(" ON CONFLICT DO NOTHING");
        let q = bind_contact(sqlx::query(&sql), c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.created_at.millis());
        let done = refs
            .iter()
            .fold(q, |q, r| q.bind(r.id))
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() > 0 {
            return Ok(());
        }
        // Only a failed insert pays these reads: the first missing reference, else the
        // uniqueness rule `ON CONFLICT DO NOTHING` hit.
        for (i, r) in refs.iter().enumerate() {
            if !self.record_exists(tenant, r.object, r.id).await? {
                return Err(StoreError::MissingReference(i));
            }
        }
        Err(StoreError::Duplicate)
    }

    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        // One statement per 500 contacts (15 parameters each, under SQLite's 32,766): every
        // statement is a round trip to the connection's thread under the write lock. In the
        // caller's order (`ORDER BY n`), so of two with one email the first is kept.
        let mut inserted = Vec::with_capacity(contacts.len());
        for chunk in contacts.chunks(500) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "WITH v(n, id, created_at, first_name, last_name, email, phone, linkedin_url, company_id, type, custom_fields,
                        updated_at, version, deleted_at) AS (",
            );
            qb.push_values(chunk.iter().enumerate(), |mut b, (n, c)| {
                b.push_bind(n as i64)
                    .push_bind(c.id.as_str())
                    .push_bind(c.created_at.millis())
                    .push_bind(c.first_name.as_deref())
                    .push_bind(c.last_name.as_deref())
                    .push_bind(c.email.as_ref().map(Email::as_str))
                    .push_bind(c.phone.as_deref())
                    .push_bind(c.linkedin_url.as_deref())
                    .push_bind(c.company_id.as_ref().map(CompanyId::as_str))
                    .push_bind(c.contact_type.as_deref())
                    .push_bind(json_text(&c.custom_fields))
                    .push_bind(c.updated_at.millis())
                    .push_bind(c.version)
                    .push_bind(c.deleted_at.map(Timestamp::millis));
            });
            qb.push(
                ") INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url, company_id,
                                         type, custom_fields, updated_at, version, deleted_at)
                  SELECT w.workspace_id, w.mode, v.id, v.created_at, v.first_name, v.last_name, v.email, v.phone, v.linkedin_url,
                         v.company_id, v.type, v.custom_fields, v.updated_at, v.version, v.deleted_at
                  FROM v, (SELECT ",
            );
            qb.push_bind(tenant.workspace_id.as_str()).push(" AS workspace_id, ").push_bind(tenant.mode.as_str()).push(
                " AS mode) w
                  WHERE v.company_id IS NULL
                     OR EXISTS (SELECT 1 FROM companies c WHERE c.workspace_id = w.workspace_id AND c.mode = w.mode AND c.id = v.company_id)
                  ORDER BY v.n
                  ON CONFLICT DO NOTHING
                  RETURNING id",
            );
            let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
            for row in &rows {
                inserted.push(ContactId::from_trusted(
                    row.try_get::<String, _>("id").map_err(backend)?,
                ));
            }
        }
        Ok(inserted)
    }

    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::CONTACT_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::contact).transpose()
    }

    async fn get_contact_by_email(
        &mut self,
        tenant: &Tenant,
        email: &Email,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND email = $3",
            rows::CONTACT_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(email.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::contact).transpose()
    }

    async fn update_contact(&mut self, tenant: &Tenant, c: &Contact) -> Result<(), StoreError> {
        let q = sqlx::query(
            "UPDATE contacts SET first_name = $1, last_name = $2, email = $3, phone = $4, linkedin_url = $5, company_id = $6,
                    type = $7, custom_fields = $8, updated_at = $9, version = $10, deleted_at = $11
             WHERE workspace_id = $12 AND mode = $13 AND id = $14 AND version = $15",
        );
        let done = bind_contact(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.version - 1)
            .execute(self.conn())
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Duplicate
                } else {
                    backend(e)
                }
            })?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn list_contacts(
        &mut self,
        tenant: &Tenant,
        filter: &ContactFilter,
        slice: &Slice,
    ) -> Result<Vec<Contact>, StoreError> {
        let indexed_filter =
            filter.email.is_some() || filter.company_id.is_some() || filter.contact_type.is_some();
        if let Some(q) = trigram_needle(filter.q.as_ref())
            .filter(|_| filter.custom_fields.is_empty() && !indexed_filter)
        {
            return search_page(
                self,
                tenant,
                ("contacts", "contacts_fts", rows::CONTACT_COLUMNS),
                q,
                slice,
                filter.include_deleted,
                rows::contact,
                |c| c.id.as_str(),
            )
            .await;
        }
        let (mut qb, id_column) = match filter.custom_fields.split_first() {
            None => {
                let mut qb = QueryBuilder::<Sqlite>::new(format!(
                    "SELECT {} FROM contacts",
                    rows::CONTACT_COLUMNS
                ));
                tenant_where(&mut qb, tenant);
                (qb, "id")
            }
            // Driven by the first custom-field filter's key range, which is in id order: the page
            // is the first `limit` rows of that range that pass the other filters.
            Some((first, rest)) => {
                let mut qb = QueryBuilder::<Sqlite>::new(format!(
                    "SELECT {} FROM contact_field_values v JOIN contacts c \
                     ON c.workspace_id = v.workspace_id AND c.mode = v.mode AND c.id = v.contact_id \
                     WHERE v.workspace_id = ",
                    rows::CONTACT_COLUMNS
                ));
                qb.push_bind(tenant.workspace_id.as_str())
                    .push(" AND v.mode = ")
                    .push_bind(tenant.mode.as_str());
                qb.push(" AND v.field_key = ")
                    .push_bind(first.key.as_str())
                    .push(" AND v.value = ");
                push_field_value(&mut qb, &first.value);
                for f in rest {
                    qb.push(" AND EXISTS (SELECT 1 FROM contact_field_values w WHERE w.workspace_id = v.workspace_id AND w.mode = v.mode AND w.field_key = ")
                        .push_bind(f.key.as_str())
                        .push(" AND w.value = ");
                    push_field_value(&mut qb, &f.value);
                    qb.push(" AND w.contact_id = v.contact_id)");
                }
                for f in &filter.custom_fields {
                    if let Some(full) = f
                        .value
                        .as_str()
                        .filter(|s| s.chars().nth(INDEXED_TEXT_CHARS).is_some())
                    {
                        // json_each of a path yields the value itself, or each element of an array.
                        qb.push(" AND EXISTS (SELECT 1 FROM json_each(c.custom_fields, ")
                            .push_bind(format!("$.{}", f.key))
                            .push(") e WHERE e.value = ")
                            .push_bind(full.to_owned())
                            .push(")");
                    }
                }
                (qb, "v.contact_id")
            }
        };
        push_not_deleted(&mut qb, filter.include_deleted);
        if let Some(email) = &filter.email {
            qb.push(" AND email = ").push_bind(email.as_str());
        }
        if let Some(company) = &filter.company_id {
            qb.push(" AND company_id = ").push_bind(company.as_str());
        }
        if let Some(t) = &filter.contact_type {
            qb.push(" AND type = ").push_bind(t.as_str());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "contacts_fts", q);
        }
        slice_clause_on(&mut qb, id_column, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::contact).collect()
    }
}

/// Text custom-field values are keyed by their first [`INDEXED_TEXT_CHARS`] characters
/// (migration 0010, as on Postgres, so both stores answer alike).
const INDEXED_TEXT_CHARS: usize = 200;

/// Binds a filter value as `contact_field_values.value` holds it: the SQL value `json_each`
/// gives (text, an integer or a real; booleans as 1 and 0), text cut to its indexed prefix.
fn push_field_value(qb: &mut QueryBuilder<'_, Sqlite>, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => qb.push_bind(s.chars().take(INDEXED_TEXT_CHARS).collect::<String>()),
        Value::Bool(b) => qb.push_bind(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => qb.push_bind(i),
            None => qb.push_bind(n.as_f64().unwrap_or(f64::NAN)),
        },
        // The registry only yields strings, numbers and booleans; nothing is stored as null.
        _ => qb.push("NULL"),
    };
}

fn bind_company<'q>(
    q: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    c: &'q Company,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    q.bind(&c.name)
        .bind(c.domain.as_deref())
        .bind(json_text(&c.custom_fields))
        .bind(c.updated_at.millis())
        .bind(c.version)
        .bind(c.deleted_at.map(Timestamp::millis))
}

#[async_trait]
impl CompanyRepo for SqliteTx {
    async fn insert_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = sqlx::query(
            "INSERT INTO companies (name, domain, custom_fields, updated_at, version, deleted_at, workspace_id, mode, id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        );
        bind_company(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.created_at.millis())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError> {
        let sql = format!(
            "SELECT {} FROM companies WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::COMPANY_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::company).transpose()
    }

    async fn update_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = sqlx::query(
            "UPDATE companies SET name = $1, domain = $2, custom_fields = $3, updated_at = $4, version = $5, deleted_at = $6
             WHERE workspace_id = $7 AND mode = $8 AND id = $9 AND version = $10",
        );
        let done = bind_company(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.version - 1)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        if let Some(q) = trigram_needle(filter.q.as_ref()).filter(|_| filter.domain.is_none()) {
            return search_page(
                self,
                tenant,
                ("companies", "companies_fts", rows::COMPANY_COLUMNS),
                q,
                slice,
                filter.include_deleted,
                rows::company,
                |c| c.id.as_str(),
            )
            .await;
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {} FROM companies", rows::COMPANY_COLUMNS));
        tenant_where(&mut qb, tenant);
        push_not_deleted(&mut qb, filter.include_deleted);
        if let Some(domain) = &filter.domain {
            qb.push(" AND domain = ").push_bind(domain.to_lowercase());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "companies_fts", q);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::company).collect()
    }
}

fn record_table(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

#[async_trait]
impl RecordRepo for SqliteTx {
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError> {
        let table = record_table(object);
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = $3)");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id)
            .fetch_one(self.conn())
            .await
            .map_err(backend)?;
        row.try_get::<bool, _>(0).map_err(backend)
    }
}

/// Every event is queued for dispatch (`event_dispatch_queue`, migration 0011) in the
/// transaction that inserts it.
#[async_trait]
impl EventRepo for SqliteTx {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError> {
        self.insert_events(tenant, std::slice::from_ref(event))
            .await
    }

    /// Two statements per 1,000 events (6 parameters each, under SQLite's 32,766): the events,
    /// then their queue rows.
    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        for chunk in events.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO events (workspace_id, mode, id, type, created_at, body) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.event_type.as_str())
                    .push_bind(e.created_at.millis())
                    .push_bind(e.snapshot().to_string());
            });
            qb.build().execute(self.conn()).await.map_err(backend)?;
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.event_type.as_str())
                    .push_bind(e.created_at.millis());
            });
            qb.build().execute(self.conn()).await.map_err(backend)?;
        }
        Ok(())
    }

    async fn list_events(
        &mut self,
        tenant: &Tenant,
        event_type: Option<&str>,
        slice: &Slice,
    ) -> Result<Vec<Event>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT body FROM events");
        tenant_where(&mut qb, tenant);
        if let Some(t) = event_type {
            qb.push(" AND type = ").push_bind(t);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter()
            .map(|r: &SqliteRow| {
                let body: String = r.try_get("body").map_err(backend)?;
                let v: serde_json::Value =
                    serde_json::from_str(&body).map_err(|_| rows::corrupt("event body"))?;
                Event::from_snapshot(&v).ok_or_else(|| rows::corrupt("event body"))
            })
            .collect()
    }
}

fn idem_record(r: &SqliteRow, owner_alive: bool) -> Result<IdemRecord, StoreError> {
    let status: Option<i64> = r.try_get("reply_status").map_err(backend)?;
    let body: Option<Vec<u8>> = r.try_get("reply_body").map_err(backend)?;
    Ok(IdemRecord {
        key: r.try_get("key").map_err(backend)?,
        fingerprint: r.try_get("fingerprint").map_err(backend)?,
        reply: status.map(|s| StoredReply {
            status: s as u16,
            body: body.unwrap_or_default(),
        }),
        created_at: Timestamp::from_millis(r.try_get("created_at").map_err(backend)?),
        locked_until: Timestamp::from_millis(r.try_get("locked_until").map_err(backend)?),
        owner_alive,
    })
}

impl SqliteTx {
    /// The process writing claims in this transaction; a read unit of work writes none.
    fn owner(&self) -> Option<&Owner> {
        match self {
            SqliteTx::Write(_, _, owner, _) => Some(owner),
            SqliteTx::Read(..) => None,
        }
    }
}

#[async_trait]
impl IdempotencyRepo for SqliteTx {
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<bool, StoreError> {
        let owner = self.owner().map(|o| o.id);
        let done = sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.clone()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    /// The single writer already keeps other writers out until commit. An owner is looked up
    /// only for an unfinished claim, and only in a write transaction (a read answers alive and
    /// leaves it to the lease).
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT key, fingerprint, reply_status, reply_body, created_at, locked_until, owner FROM idempotency_keys
             WHERE workspace_id = $1 AND mode = $2 AND key = $3",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(key)
        .fetch_optional(self.conn())
        .await
        .map_err(backend)?;
        let Some(row) = row else { return Ok(None) };
        let status: Option<i64> = row.try_get("reply_status").map_err(backend)?;
        let owner: Option<i64> = row.try_get("owner").map_err(backend)?;
        let alive = match (status, owner, self.owner()) {
            (None, Some(id), Some(me)) => me.is_alive(id),
            _ => true,
        };
        idem_record(&row, alive).map(Some)
    }

    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<(), StoreError> {
        self.delete_idempotency(tenant, &rec.key).await?;
        self.insert_idempotency(tenant, rec).await?;
        Ok(())
    }

    async fn delete_idempotency(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(key)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn finish_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
        reply: &StoredReply,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE idempotency_keys SET reply_status = $1, reply_body = $2
             WHERE workspace_id = $3 AND mode = $4 AND key = $5",
        )
        .bind(i64::from(reply.status))
        .bind(reply.body.as_slice())
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(key)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }
}

/// Savepoint names come from our own code, never from input; still, refuse anything but a plain
/// identifier rather than splice it into SQL unchecked.
fn savepoint_sql(verb: &str, name: &str) -> Result<String, StoreError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(StoreError::Backend(
            format!("invalid savepoint name {name:?}").into(),
        ));
    }
    Ok(format!("{verb} {name}"))
}

#[async_trait]
impl Tx for SqliteTx {
    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
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
        sqlx::query(&savepoint_sql("SAVEPOINT", name)?)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn release_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        sqlx::query(&savepoint_sql("RELEASE SAVEPOINT", name)?)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), StoreError> {
        sqlx::query(&savepoint_sql("ROLLBACK TO SAVEPOINT", name)?)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }
}
