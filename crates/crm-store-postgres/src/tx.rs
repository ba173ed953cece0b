//! The unit of work: a write transaction, or a plain pooled connection for reads.
//!
//! Conventions that keep the statements below short: every tenant-scoped statement takes the
//! workspace as `$1` and the mode as `$2` (`tenant_query`); JSON is bound as text and cast with
//! `::jsonb`, and read back as `::text` (see `rows`).

use async_trait::async_trait;
use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::{IdemRecord, StoredReply},
    ports::{
        CompanyFilter, CompanyRepo, ConfigMarks, ContactFilter, ContactRepo, EventRepo,
        IdempotencyRepo, RecordRepo, Reference, RegistryRepo, RowLock, Slice, WorkspaceRepo,
    },
    StoreError, Tx,
};
use crm_domain::{
    registry::{DataType, EnumValue, FieldDef},
    ApiKeyId, Company, CompanyId, Contact, ContactId, Email, Event, JsonMap, ObjectKind,
    ObjectType, Registry, Tenant, Timestamp, WorkspaceId,
};
use sqlx::{
    postgres::{PgArguments, PgRow},
    query::Query,
    PgConnection, Postgres, QueryBuilder, Row,
};

use crate::{
    backend,
    pool::Lease,
    rows::{self, get},
};

pub(crate) type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

/// The box secrets are sealed and opened with (`crm_app::secrets`), shared by the store's units.
pub(crate) type Secrets = std::sync::Arc<dyn crm_app::secrets::SecretBox>;

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
    fn owner(&self) -> Option<i64> {
        match self {
            PostgresTx::Write(_, _, owner, _) => Some(*owner),
            PostgresTx::Read(..) => None,
        }
    }

    fn lease(&mut self) -> &mut Lease {
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
            (PostgresTx::Write(..), RowLock::Unlocked) => "",
        }
    }

    pub(crate) async fn optional<T>(
        &mut self,
        q: PgQuery<'_>,
        map: impl Fn(&PgRow) -> Result<T, StoreError> + Send,
    ) -> Result<Option<T>, StoreError> {
        let row = q
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        row.as_ref().map(map).transpose()
    }

    pub(crate) async fn all<T>(
        &mut self,
        q: PgQuery<'_>,
        map: impl Fn(&PgRow) -> Result<T, StoreError> + Send,
    ) -> Result<Vec<T>, StoreError> {
        let rows = q.fetch_all(self.conn()).await.map_err(|e| self.failed(e))?;
        rows.iter().map(map).collect()
    }

    /// The single boolean a `SELECT EXISTS (...)` answers.
    pub(crate) async fn exists(&mut self, q: PgQuery<'_>) -> Result<bool, StoreError> {
        let row = q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        row.try_get(0).map_err(backend)
    }

    /// Runs a statement; returns how many rows it touched.
    pub(crate) async fn execute(&mut self, q: PgQuery<'_>) -> Result<u64, StoreError> {
        Ok(q.execute(self.conn())
            .await
            .map_err(|e| self.failed(e))?
            .rows_affected())
    }

    /// Runs a statement that may break a uniqueness rule no `ON CONFLICT` can catch (an UPDATE),
    /// reporting that as `Duplicate`. A failed statement aborts a Postgres transaction, and the
    /// port promises `Duplicate` leaves it usable, so in a write transaction the statement runs
    /// in a savepoint that is rolled back when it fails.
    async fn execute_unique(&mut self, q: PgQuery<'_>) -> Result<u64, StoreError> {
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
            Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
            Err(e) => Err(self.failed(e)),
        }
    }
}

/// Was this a violation of a UNIQUE or PRIMARY KEY constraint?
fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// `sql` with the tenant bound as `$1` (workspace) and `$2` (mode).
pub(crate) fn tenant_query<'q>(sql: &'q str, tenant: &'q Tenant) -> PgQuery<'q> {
    sqlx::query(sql)
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
}

/// The table holding records of `object`.
fn record_table(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

/// Appends to an `INSERT ... SELECT <values>` the condition that every record in `refs` exists,
/// their ids bound from `$first` on (tenant as `$1`, `$2`).
fn push_reference_guard(sql: &mut String, refs: &[Reference<'_>], first: usize) {
    for (i, r) in refs.iter().enumerate() {
        let keyword = if i == 0 { "WHERE" } else { "AND" };
        let table = record_table(r.object);
        let n = first + i;
        sql.push_str(&format!(" {keyword} EXISTS (SELECT 1 FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = ${n})"));
    }
}

impl PostgresTx {
    /// `Store::insert_contact_alone`, on a connection outside any transaction: the contact's
    /// INSERT (guarded by its references, as in `insert_contact`), its event's and the event's
    /// queue row as one statement, which Postgres runs atomically on its own. The event is
    /// written only when the contact was (`EXISTS (SELECT 1 FROM c)`), so a contact skipped by
    /// its guard or its email writes nothing at all.
    pub(crate) async fn insert_contact_alone(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
        event: &Event,
    ) -> Result<(), StoreError> {
        let mut sql = format!("WITH c AS ({INSERT_CONTACT}");
        push_reference_guard(&mut sql, refs, 20);
        sql.push_str(
            " ON CONFLICT DO NOTHING RETURNING 1),
              e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body)
                    SELECT $1, $2, $16, $17, $18, $19::json WHERE EXISTS (SELECT 1 FROM c)
                    RETURNING workspace_id, mode, id, type, created_at)
             INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
        );
        let q = bind_contact(
            tenant_query(&sql, tenant)
                .bind(c.id.as_str())
                .bind(c.created_at.millis()),
            c,
        )
        .bind(event.id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.created_at.millis())
        .bind(event.snapshot().to_string());
        let q = refs.iter().fold(q, |q, r| q.bind(r.id));
        match self.execute(q).await? {
            0 => Err(self.why_not_inserted(tenant, refs).await?),
            _ => Ok(()),
        }
    }

    /// Why an insert guarded by `refs` wrote nothing: the first missing reference, else the
    /// uniqueness rule its `ON CONFLICT DO NOTHING` hit. Only failed inserts pay these reads.
    async fn why_not_inserted(
        &mut self,
        tenant: &Tenant,
        refs: &[Reference<'_>],
    ) -> Result<StoreError, StoreError> {
        for (i, r) in refs.iter().enumerate() {
            if !self.record_exists(tenant, r.object, r.id).await? {
                return Ok(StoreError::MissingReference(i));
            }
        }
        Ok(StoreError::Duplicate)
    }
}

/// `%q%` with LIKE's wildcards escaped (with `\`); the same escaping as the SQLite store. Not
/// lower-cased: see `search_filter`.
fn like_pattern(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 2);
    p.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
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

/// ` AND search_text LIKE lower(p)`: `q` as a case-insensitive, literal substring of the row's
/// `search_text`, a generated column holding the searchable fields lower-cased, with a trigram
/// GIN index (pg_trgm) that serves LIKE with any pattern, bound parameters included.
///
/// The needle is lower-cased by Postgres, not by Rust: `lower()` built `search_text`, and the
/// two disagree at the edges (Rust turns a word-final `Σ` into `ς`, Postgres into `σ`), so only
/// the same function on both sides guarantees that any stored text finds itself.
///
/// A list with this filter must run unprepared ([`planned_per_needle`]).
pub(crate) fn search_filter(qb: &mut QueryBuilder<'_, Postgres>, q: &str) {
    qb.push(" AND search_text LIKE lower(")
        .push_bind(like_pattern(q))
        .push(r") ESCAPE '\'");
}

/// A list query, kept out of the connection's statement cache when it searches text, so that
/// every search is planned for its needle. Cached, a statement switches to a generic plan once
/// five custom ones cost more on average, and the generic plan for `search_text LIKE $n` is
/// always the trigram index: right for a rare needle, but for a common one ("e", "example")
/// it reads every row of the tenant and sorts them, where the plan for the actual needle walks
/// the primary key newest first and stops at the limit (5,000 contacts: about 100 ms against
/// under 1 ms). A burst of selective searches (phone numbers) is enough to make the switch.
pub(crate) fn planned_per_needle<'q>(
    qb: &'q mut QueryBuilder<'_, Postgres>,
    searches_text: bool,
) -> PgQuery<'q> {
    qb.build().persistent(!searches_text)
}

/// How many of a tenant's newest rows a text search reads per row of its page before it asks
/// the trigram index for the rest: a needle in one row of 40 or more fills its page there.
const SEARCH_WINDOW_PER_ROW: u32 = 40;

/// How many of the older rows' trigram matches a text search reads, per row of its window,
/// before it takes the needle for a common one after all.
const SEARCH_MATCHES_PER_WINDOW_ROW: u32 = 5;

/// A text search's page, in plans that rest as little as they can on the planner's guess of how
/// common the needle is. Left to the planner, one statement walks the primary key newest first
/// when it takes the needle for a common one, and reads the needle's trigram matches and sorts
/// them when it takes it for a rare one; that guess comes from a sample, and at 1,000,000
/// contacts a rare needle taken for a common one cost a search over a second
/// (docs/performance.md). Here:
/// 1. the tenant's newest `window` rows (from the cursor on), walked by primary key, are
///    filtered: a page of a needle common among them ends there, whatever the statistics say;
/// 2. if the page is not full, up to `5 × window` matches among the older rows are read into a
///    materialized CTE (no order inside: the trigram index, unless the planner takes the needle
///    for one in about 30 rows or more), sorted and cut to the rest of the page;
/// 3. only if that cap was reached (a needle common among the older rows but rare among the
///    newest, such as an old import's domain) does the planner's own statement read the rest.
///
/// `filters` pushes the list's conditions, the text search among them, as ` AND ...` clauses
/// over `table`'s unqualified columns. Lists filtered by an indexed column as well keep one
/// statement: that column's index serves them better than the newest rows.
pub(crate) async fn search_page<'a, T>(
    tx: &mut PostgresTx,
    tenant: &'a Tenant,
    (table, columns): (&str, &str),
    slice: &'a Slice,
    filters: &(dyn Fn(&mut QueryBuilder<'a, Postgres>) + Sync),
    map: fn(&PgRow) -> Result<T, StoreError>,
    id_of: fn(&T) -> &str,
) -> Result<Vec<T>, StoreError> {
    let window = slice.limit.max(25) * SEARCH_WINDOW_PER_ROW;
    let cap = window * SEARCH_MATCHES_PER_WINDOW_ROW;
    let newest = |qb: &mut QueryBuilder<'a, Postgres>| {
        tenant_where(qb, tenant);
        if let Some(before) = &slice.before {
            qb.push(" AND id < ").push_bind(before.as_str());
        }
    };
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM (SELECT * FROM {table}"));
    newest(&mut qb);
    qb.push(format!(" ORDER BY id DESC LIMIT {window}) r WHERE TRUE"));
    filters(&mut qb);
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(slice.limit));
    let mut page = tx.all(planned_per_needle(&mut qb, true), map).await?;
    if page.len() >= slice.limit as usize {
        return Ok(page);
    }
    // The rows older than the window: older than its last row, read again (a tenant with fewer
    // rows has none, and then nothing is older), and than the page so far (rows created since
    // the first statement move the window, and a row it returned must not come again).
    let oldest = page.last().map(|row| id_of(row).to_owned());
    let older = |qb: &mut QueryBuilder<'a, Postgres>| {
        tenant_where(qb, tenant);
        filters(qb);
        qb.push(format!(" AND id < (SELECT id FROM {table}"));
        newest(qb);
        qb.push(format!(" ORDER BY id DESC OFFSET {} LIMIT 1)", window - 1));
        if let Some(oldest) = oldest.clone() {
            qb.push(" AND id < ").push_bind(oldest);
        }
    };
    let rest = i64::from(slice.limit) - page.len() as i64;
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "WITH hits AS MATERIALIZED (SELECT {columns} FROM {table}"
    ));
    older(&mut qb);
    qb.push(format!(" LIMIT {cap}) SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT "));
    qb.push_bind(rest);
    let hits = tx
        .all(planned_per_needle(&mut qb, true), |row| {
            Ok((map(row)?, rows::get::<i64>(row, "found")?))
        })
        .await?;
    if hits
        .first()
        .is_none_or(|(_, found)| *found < i64::from(cap))
    {
        page.extend(hits.into_iter().map(|(row, _)| row));
        return Ok(page);
    }
    let mut qb = QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM {table}"));
    older(&mut qb);
    qb.push(" ORDER BY id DESC LIMIT ").push_bind(rest);
    page.extend(tx.all(planned_per_needle(&mut qb, true), map).await?);
    Ok(page)
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
impl WorkspaceRepo for PostgresTx {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError> {
        let included = ws
            .included_requests_override
            .map(i64::try_from)
            .transpose()
            .map_err(|_| out_of_range("included_requests_override"))?;
        let q = sqlx::query(
            "INSERT INTO workspaces (id, name, plan, created_at, overage_cap_usd, rate_limit_override, included_requests_override)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ws.id.as_str())
        .bind(&ws.name)
        .bind(ws.plan.as_str())
        .bind(ws.created_at.millis())
        .bind(ws.overage_cap_usd)
        .bind(ws.rate_limit_override.map(i64::from))
        .bind(included);
        self.execute(q).await?;
        Ok(())
    }

    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError> {
        let sql = format!(
            "SELECT {} FROM workspaces w WHERE w.id = $1",
            rows::WORKSPACE_COLUMNS
        );
        self.optional(sqlx::query(&sql).bind(id.as_str()), rows::workspace)
            .await
    }

    async fn has_workspaces(&mut self) -> Result<bool, StoreError> {
        self.exists(sqlx::query("SELECT EXISTS (SELECT 1 FROM workspaces)"))
            .await
    }

    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        let scopes =
            serde_json::to_string(&key.scopes).map_err(|e| StoreError::Backend(Box::new(e)))?;
        // The id and the hash are unique; ON CONFLICT reports a clash without aborting the transaction.
        let q = sqlx::query(
            "INSERT INTO api_keys (workspace_id, mode, id, name, scopes, key_hash, created_at, last_used_at, revoked_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
        )
        .bind(key.workspace_id.as_str())
        .bind(key.mode.as_str())
        .bind(key.id.as_str())
        .bind(&key.name)
        .bind(scopes)
        .bind(&key.key_hash)
        .bind(key.created_at.millis())
        .bind(key.last_used_at.map(Timestamp::millis))
        .bind(key.revoked_at.map(Timestamp::millis))
        .bind(key.expires_at.map(Timestamp::millis));
        match self.execute(q).await? {
            0 => Err(StoreError::Duplicate),
            _ => Ok(()),
        }
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
        self.optional(sqlx::query(&sql).bind(hash), |r| {
            Ok((rows::api_key(r)?, rows::workspace(r)?))
        })
        .await
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
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::api_key)
            .await
    }
}

#[async_trait]
impl RegistryRepo for PostgresTx {
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError> {
        let fields = tenant_query(
            "SELECT key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3 ORDER BY position, key",
            tenant,
        )
        .bind(object.as_str());
        let fields = self.all(fields, |r| field_def(r, object)).await?;
        let groups = tenant_query(
            "SELECT grp FROM enum_groups WHERE workspace_id = $1 AND mode = $2",
            tenant,
        );
        let groups = self.all(groups, |r| get::<String>(r, "grp")).await?;
        let values = tenant_query(
            "SELECT grp, value, label FROM enum_values WHERE workspace_id = $1 AND mode = $2 ORDER BY grp, position",
            tenant,
        );
        let values = self.all(values, enum_value).await?;

        let mut registry = Registry {
            fields,
            ..Registry::default()
        };
        for group in groups {
            registry.enums.insert(group, Vec::new());
        }
        for (group, value) in values {
            registry.enums.entry(group).or_default().push(value);
        }
        Ok(registry)
    }

    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let q = tenant_query(
            "INSERT INTO enum_groups (workspace_id, mode, grp, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(group)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
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
        self.lock_enum_group(tenant, group).await?;
        let q = tenant_query(
            "INSERT INTO enum_values (workspace_id, mode, grp, value, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, COALESCE(MAX(position), 0) + 1 FROM enum_values
             WHERE workspace_id = $1 AND mode = $2 AND grp = $3
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(group)
        .bind(value)
        .bind(label)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.lock_registry_list(tenant, &format!("custom_fields:{}", field.object.as_str()))
            .await?;
        let q = tenant_query(
            "INSERT INTO custom_fields (workspace_id, mode, object, key, label, data_type, enum_group, required, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE(MAX(position), 0) + 1 FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(field.object.as_str())
        .bind(&field.key)
        .bind(field.label.as_deref())
        .bind(field.data_type.as_str())
        .bind(field.enum_group.as_deref())
        .bind(field.required)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError> {
        let q = tenant_query(
            "SELECT object, key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 ORDER BY object, position, key",
            tenant,
        );
        self.all(q, |r| {
            let object: String = get(r, "object")?;
            field_def(
                r,
                ObjectKind::parse(&object).ok_or_else(|| rows::corrupt("object"))?,
            )
        })
        .await
    }

    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        t: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.lock_registry_list(tenant, "object_types").await?;
        let q = tenant_query(
            "INSERT INTO object_types (workspace_id, mode, key, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, COALESCE(MAX(position), 0) + 1 FROM object_types
             WHERE workspace_id = $1 AND mode = $2
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(&t.key)
        .bind(t.label.as_deref())
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError> {
        let q = tenant_query("SELECT key, label FROM object_types WHERE workspace_id = $1 AND mode = $2 ORDER BY position, key", tenant);
        self.all(q, |r| {
            Ok(ObjectType {
                key: get(r, "key")?,
                label: get(r, "label")?,
            })
        })
        .await
    }
}

impl PostgresTx {
    /// Custom fields and object types are appended at the highest position + 1, like enum
    /// values, but have no parent row to lock; a transaction-scoped advisory lock on the tenant
    /// and the list stands in for one (taken by its own statement, for the reason given at
    /// `lock_enum_group`). Registrations are rare, so the serialization costs nothing.
    async fn lock_registry_list(&mut self, tenant: &Tenant, list: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2 || ':' || $3, 0))",
            tenant,
        )
        .bind(list);
        q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Values are appended at the group's highest position + 1. SQLite's single writer makes
    /// that safe; here two transactions appending to one group would read the same highest
    /// position, so the group's row is locked first, by a statement of its own (a READ COMMITTED
    /// statement sees only what had committed when it began, so the locking must be over before
    /// the INSERT reads the highest position).
    async fn lock_enum_group(&mut self, tenant: &Tenant, group: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query("SELECT 1 FROM enum_groups WHERE workspace_id = $1 AND mode = $2 AND grp = $3 FOR UPDATE", tenant)
            .bind(group);
        self.execute(q).await?;
        Ok(())
    }
}

fn field_def(row: &PgRow, object: ObjectKind) -> Result<FieldDef, StoreError> {
    let data_type: String = get(row, "data_type")?;
    Ok(FieldDef {
        object,
        key: get(row, "key")?,
        label: get(row, "label")?,
        data_type: DataType::parse(&data_type).ok_or_else(|| rows::corrupt("data_type"))?,
        enum_group: get(row, "enum_group")?,
        required: get(row, "required")?,
    })
}

fn enum_value(row: &PgRow) -> Result<(String, EnumValue), StoreError> {
    Ok((
        get(row, "grp")?,
        EnumValue {
            value: get(row, "value")?,
            label: get(row, "label")?,
        },
    ))
}

/// One contact's INSERT, its values bound by `tenant_query`, the id and `created_at`, then
/// [`bind_contact`]; a reference guard (`push_reference_guard`) may follow.
const INSERT_CONTACT: &str = "INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url,
                                   company_id, type, custom_fields, updated_at, version, deleted_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15";

/// Binds a contact's writable fields as `$5` to `$15` (after the tenant, the id and one more).
fn bind_contact<'q>(q: PgQuery<'q>, c: &'q Contact) -> PgQuery<'q> {
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
impl ContactRepo for PostgresTx {
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError> {
        // The references are checked by the INSERT itself (one round trip for both); ON
        // CONFLICT, unlike a failed INSERT, leaves the transaction usable.
        let mut sql = String::from(INSERT_CONTACT);
        push_reference_guard(&mut sql, refs, 16);
        sql.push_str(" ON CONFLICT DO NOTHING");
        let q = tenant_query(&sql, tenant)
            .bind(c.id.as_str())
            .bind(c.created_at.millis());
        let q = refs.iter().fold(bind_contact(q, c), |q, r| q.bind(r.id));
        match self.execute(q).await? {
            0 => Err(self.why_not_inserted(tenant, refs).await?),
            _ => Ok(()),
        }
    }

    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        // One statement over arrays, so that its text (and its prepared plan) is the same for
        // any number of contacts. `ORDER BY n` inserts them in the caller's order, so of two
        // with one email the first is kept; `ON CONFLICT DO NOTHING` skips the later one and any
        // whose email is taken, the guard any whose company does not exist.
        let col =
            |f: fn(&Contact) -> Option<&str>| contacts.iter().map(|c| f(c)).collect::<Vec<_>>();
        let q = tenant_query(
            "INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url,
                                   company_id, type, custom_fields, updated_at, version, deleted_at)
             SELECT $1, $2, v.id, v.created_at, v.first_name, v.last_name, v.email, v.phone, v.linkedin_url,
                    v.company_id, v.type, v.custom_fields::jsonb, v.updated_at, v.version, v.deleted_at
             FROM unnest($3::text[], $4::int8[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                         $12::text[], $13::int8[], $14::int8[], $15::int8[])
                  WITH ORDINALITY AS v(id, created_at, first_name, last_name, email, phone, linkedin_url, company_id, type,
                                       custom_fields, updated_at, version, deleted_at, n)
             WHERE v.company_id IS NULL
                OR EXISTS (SELECT 1 FROM companies c WHERE c.workspace_id = $1 AND c.mode = $2 AND c.id = v.company_id COLLATE \"C\")
             ORDER BY v.n
             ON CONFLICT DO NOTHING
             RETURNING id",
            tenant,
        )
        .bind(contacts.iter().map(|c| c.id.as_str()).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.created_at.millis()).collect::<Vec<_>>())
        .bind(col(|c| c.first_name.as_deref()))
        .bind(col(|c| c.last_name.as_deref()))
        .bind(col(|c| c.email.as_ref().map(Email::as_str)))
        .bind(col(|c| c.phone.as_deref()))
        .bind(col(|c| c.linkedin_url.as_deref()))
        .bind(col(|c| c.company_id.as_ref().map(CompanyId::as_str)))
        .bind(col(|c| c.contact_type.as_deref()))
        .bind(contacts.iter().map(|c| json_text(&c.custom_fields)).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.updated_at.millis()).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.version).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.deleted_at.map(Timestamp::millis)).collect::<Vec<_>>());
        self.all(q, |r| Ok(ContactId::from_trusted(get(r, "id")?)))
            .await
    }

    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::CONTACT_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::contact)
            .await
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
        self.optional(
            tenant_query(&sql, tenant).bind(email.as_str()),
            rows::contact,
        )
        .await
    }

    async fn update_contact(&mut self, tenant: &Tenant, c: &Contact) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE contacts SET first_name = $5, last_name = $6, email = $7, phone = $8, linkedin_url = $9, company_id = $10,
                    type = $11, custom_fields = $12::jsonb, updated_at = $13, version = $14, deleted_at = $15
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.version - 1);
        match self.execute_unique(bind_contact(q, c)).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    async fn list_contacts(
        &mut self,
        tenant: &Tenant,
        filter: &ContactFilter,
        slice: &Slice,
    ) -> Result<Vec<Contact>, StoreError> {
        let indexed_filter =
            filter.email.is_some() || filter.company_id.is_some() || filter.contact_type.is_some();
        if filter.custom_fields.is_empty() && !indexed_filter && filter.q.is_some() {
            let table = ("contacts", rows::CONTACT_COLUMNS);
            return search_page(
                self,
                tenant,
                table,
                slice,
                &|qb| contact_conditions(qb, filter),
                rows::contact,
                |c| c.id.as_str(),
            )
            .await;
        }
        let (mut qb, id_column) = match filter.custom_fields.split_first() {
            None => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
                    "SELECT {} FROM contacts",
                    rows::CONTACT_COLUMNS
                ));
                tenant_where(&mut qb, tenant);
                (qb, "id")
            }
            // Driven by the first custom-field filter's key range, which is in id order: the page
            // is the first `limit` rows of that range that pass the other filters.
            Some((first, rest)) => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
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
                    .push(" AND v.value = ")
                    .push_bind(indexed_value(&first.value))
                    .push("::jsonb");
                for f in rest {
                    qb.push(" AND EXISTS (SELECT 1 FROM contact_field_values w WHERE w.workspace_id = v.workspace_id AND w.mode = v.mode AND w.field_key = ")
                        .push_bind(f.key.as_str())
                        .push(" AND w.value = ")
                        .push_bind(indexed_value(&f.value))
                        .push("::jsonb AND w.contact_id = v.contact_id)");
                }
                for f in &filter.custom_fields {
                    if is_truncated(&f.value) {
                        // `->` then `@>`: equal to a string, or an element of a multiselect array.
                        qb.push(" AND (c.custom_fields -> ")
                            .push_bind(f.key.as_str())
                            .push(") @> ")
                            .push_bind(f.value.to_string())
                            .push("::jsonb");
                    }
                }
                (qb, "v.contact_id")
            }
        };
        contact_conditions(&mut qb, filter);
        slice_clause_on(&mut qb, id_column, slice);
        self.all(
            planned_per_needle(&mut qb, filter.q.is_some()),
            rows::contact,
        )
        .await
    }
}

/// A contact list's conditions but the custom fields', as ` AND ...` clauses.
fn contact_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a ContactFilter) {
    if !filter.include_deleted {
        qb.push(" AND deleted_at IS NULL");
    }
    and_equals(qb, "email", filter.email.as_ref().map(Email::as_str));
    and_equals(
        qb,
        "company_id",
        filter.company_id.as_ref().map(CompanyId::as_str),
    );
    and_equals(qb, "type", filter.contact_type.as_deref());
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}

/// Text custom-field values are keyed by their first [`INDEXED_TEXT_CHARS`] characters
/// (migration 0010: B-tree entries are bounded).
const INDEXED_TEXT_CHARS: usize = 200;

/// A filter value as `contact_field_values.value` holds it, as JSON text.
fn indexed_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) if is_truncated(value) => {
            serde_json::Value::String(s.chars().take(INDEXED_TEXT_CHARS).collect()).to_string()
        }
        other => other.to_string(),
    }
}

fn is_truncated(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.chars().nth(INDEXED_TEXT_CHARS).is_some())
}

/// Binds a company's writable fields as `$5` to `$10` (after the tenant, the id and one more).
fn bind_company<'q>(q: PgQuery<'q>, c: &'q Company) -> PgQuery<'q> {
    q.bind(&c.name)
        .bind(c.domain.as_deref())
        .bind(json_text(&c.custom_fields))
        .bind(c.updated_at.millis())
        .bind(c.version)
        .bind(c.deleted_at.map(Timestamp::millis))
}

#[async_trait]
impl CompanyRepo for PostgresTx {
    async fn insert_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO companies (workspace_id, mode, id, created_at, name, domain, custom_fields, updated_at, version, deleted_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.created_at.millis());
        self.execute(bind_company(q, c)).await?;
        Ok(())
    }

    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError> {
        let sql = format!(
            "SELECT {} FROM companies WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::COMPANY_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::company)
            .await
    }

    async fn update_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        // Companies have no uniqueness rule beyond their id, so no savepoint is needed.
        let q = tenant_query(
            "UPDATE companies SET name = $5, domain = $6, custom_fields = $7::jsonb, updated_at = $8, version = $9, deleted_at = $10
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.version - 1);
        match self.execute(bind_company(q, c)).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        if filter.q.is_some() && filter.domain.is_none() {
            let table = ("companies", rows::COMPANY_COLUMNS);
            return search_page(
                self,
                tenant,
                table,
                slice,
                &|qb| company_conditions(qb, filter),
                rows::company,
                |c| c.id.as_str(),
            )
            .await;
        }
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {} FROM companies",
            rows::COMPANY_COLUMNS
        ));
        tenant_where(&mut qb, tenant);
        company_conditions(&mut qb, filter);
        slice_clause(&mut qb, slice);
        self.all(
            planned_per_needle(&mut qb, filter.q.is_some()),
            rows::company,
        )
        .await
    }
}

/// A company list's conditions, as ` AND ...` clauses.
fn company_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a CompanyFilter) {
    if !filter.include_deleted {
        qb.push(" AND deleted_at IS NULL");
    }
    if let Some(domain) = &filter.domain {
        qb.push(" AND domain = ").push_bind(domain.to_lowercase());
    }
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}

#[async_trait]
impl RecordRepo for PostgresTx {
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE workspace_id = $1 AND mode = $2 AND id = $3)",
            record_table(object)
        );
        self.exists(tenant_query(&sql, tenant).bind(id)).await
    }
}

/// Every event is queued for dispatch (`event_dispatch_queue`, migration 0011) by the statement
/// that inserts it: one round trip, and no write can leave an event out of the queue.
#[async_trait]
impl EventRepo for PostgresTx {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError> {
        let q = tenant_query(
            "WITH e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body) VALUES ($1, $2, $3, $4, $5, $6::json)
                        RETURNING workspace_id, mode, id, type, created_at)
             INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
            tenant,
        )
        .bind(event.id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.created_at.millis())
        .bind(event.snapshot().to_string());
        self.execute(q).await?;
        Ok(())
    }

    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        match events {
            [] => Ok(()),
            [one] => self.insert_event(tenant, one).await,
            _ => {
                let q = tenant_query(
                    "WITH e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body)
                                SELECT $1, $2, v.id, v.type, v.created_at, v.body::json
                                FROM unnest($3::text[], $4::text[], $5::int8[], $6::text[]) WITH ORDINALITY AS v(id, type, created_at, body, n)
                                ORDER BY v.n
                                RETURNING workspace_id, mode, id, type, created_at)
                     INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
                    tenant,
                )
                .bind(events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
                .bind(events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>())
                .bind(events.iter().map(|e| e.created_at.millis()).collect::<Vec<_>>())
                .bind(events.iter().map(|e| e.snapshot().to_string()).collect::<Vec<_>>());
                self.execute(q).await.map(drop)
            }
        }
    }

    async fn list_events(
        &mut self,
        tenant: &Tenant,
        event_type: Option<&str>,
        slice: &Slice,
    ) -> Result<Vec<Event>, StoreError> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {} FROM events", rows::EVENT_COLUMNS));
        tenant_where(&mut qb, tenant);
        if let Some(t) = event_type {
            qb.push(" AND type = ").push_bind(t);
        }
        slice_clause(&mut qb, slice);
        self.all(qb.build(), rows::event).await
    }
}

#[async_trait]
impl IdempotencyRepo for PostgresTx {
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<bool, StoreError> {
        let owner = self.owner();
        let q = tenant_query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.as_slice()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner);
        Ok(self.execute(q).await? == 1)
    }

    /// Locked `FOR UPDATE` in a write. An unfinished claim of another owner is alive while that
    /// owner's session holds its lock: trying the lock for this transaction tells (and, when it
    /// is free, keeps it until this transaction ends, which is harmless: the owner is gone).
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError> {
        let sql = format!(
            "SELECT {}, owner FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3{}",
            rows::IDEM_COLUMNS,
            self.for_update()
        );
        let found = self
            .optional(tenant_query(&sql, tenant).bind(key), |row| {
                Ok((rows::idem_record(row)?, get::<Option<i64>>(row, "owner")?))
            })
            .await?;
        let Some((mut record, owner)) = found else {
            return Ok(None);
        };
        if let (None, Some(owner)) = (&record.reply, owner) {
            if Some(owner) != self.owner() {
                let q = sqlx::query("SELECT pg_try_advisory_xact_lock($1, $2)")
                    .bind(crate::owner::OWNER_LOCK_CLASS)
                    .bind(crate::owner::lock_key(owner));
                let free = self.exists(q).await?;
                record.owner_alive = !free;
            }
        }
        Ok(Some(record))
    }

    /// In place, so that a writer waiting on the row's lock reads the new claim once this
    /// transaction commits.
    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<(), StoreError> {
        let owner = self.owner();
        let q = tenant_query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (workspace_id, mode, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
               reply_status = EXCLUDED.reply_status, reply_body = EXCLUDED.reply_body,
               created_at = EXCLUDED.created_at, locked_until = EXCLUDED.locked_until, owner = EXCLUDED.owner",
            tenant,
        )
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.as_slice()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner);
        self.execute(q).await?;
        Ok(())
    }

    async fn delete_idempotency(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError> {
        let q = tenant_query(
            "DELETE FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3",
            tenant,
        )
        .bind(key);
        self.execute(q).await?;
        Ok(())
    }

    async fn finish_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
        reply: &StoredReply,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE idempotency_keys SET reply_status = $4, reply_body = $5 WHERE workspace_id = $1 AND mode = $2 AND key = $3",
            tenant,
        )
        .bind(key)
        .bind(i64::from(reply.status))
        .bind(reply.body.as_slice());
        self.execute(q).await?;
        Ok(())
    }
}

#[async_trait]
impl Tx for PostgresTx {
    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
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
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain {
            return Err(StoreError::Backend(
                format!("invalid savepoint name {name:?}").into(),
            ));
        }
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        // Not prepared: nothing to gain, and one cached statement per name and connection.
        let sql = format!("{verb} {name}");
        self.execute(sqlx::query(&sql).persistent(false)).await?;
        Ok(())
    }
}
