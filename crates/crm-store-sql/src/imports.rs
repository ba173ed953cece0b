//! Bulk imports (`ImportRepo`): the same statements on both backends. The claim ends with the
//! backend's `SKIP LOCKED` clause where it has one.

use crm_app::{
    ports::{ImportChunk, ImportError, Slice},
    StoreError,
};
use crm_domain::{
    import::{Import, ImportCounts, ImportStatus, OnDuplicate},
    ImportId, ObjectKind, Tenant, Timestamp,
};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    corrupt, jobs,
    rows::{json_value, opt_ts, ts},
    sql::{Col, PushArg, SqlQuery},
    stored::import::{author_from_json, author_json, targets_from_json, targets_json},
    Arg, Sql, Unit,
};

const IMPORT_COLUMNS: &str = "workspace_id, mode, id, object, status, on_duplicate, dry_run, targets, author, \
    rows_total, rows_done, created, updated, skipped, failed, chunks_total, chunks_done, error, malformed_row, \
    malformed_reason, idempotency_key, fingerprint, created_at, finished_at";

fn import<R: Row>(row: &R) -> Result<Import, StoreError>
where
    R::Database: Sql,
{
    let object =
        ObjectKind::parse(&row.col::<String>("object")?).ok_or_else(|| corrupt("import object"))?;
    let error: Option<String> = row.col("error")?;
    let malformed_row: Option<i64> = row.col("malformed_row")?;
    let malformed_reason: Option<String> = row.col("malformed_reason")?;
    Ok(Import {
        id: ImportId::from_trusted(row.col("id")?),
        object,
        status: ImportStatus::parse(&row.col::<String>("status")?)
            .ok_or_else(|| corrupt("import status"))?,
        on_duplicate: OnDuplicate::parse(&row.col::<String>("on_duplicate")?)
            .ok_or_else(|| corrupt("import on_duplicate"))?,
        dry_run: row.col("dry_run")?,
        targets: targets_from_json(object, &json_value(row, "targets")?)
            .ok_or_else(|| corrupt("import targets"))?,
        counts: ImportCounts {
            rows_total: row.col("rows_total")?,
            rows_done: row.col("rows_done")?,
            created: row.col("created")?,
            updated: row.col("updated")?,
            skipped: row.col("skipped")?,
            failed: row.col("failed")?,
        },
        chunks_total: row.col("chunks_total")?,
        chunks_done: row.col("chunks_done")?,
        author: author_from_json(&json_value(row, "author")?)
            .ok_or_else(|| corrupt("import author"))?,
        error: error
            .map(|e| serde_json::from_str(&e).map_err(|_| corrupt("import error")))
            .transpose()?,
        malformed: malformed_row.zip(malformed_reason),
        idempotency_key: row.col("idempotency_key")?,
        fingerprint: row.col("fingerprint")?,
        created_at: ts(row, "created_at")?,
        finished_at: opt_ts(row, "finished_at")?,
    })
}

/// Binds the columns an import's progress changes, in the order both statements below name
/// them: `status` through `finished_at`.
fn bind_progress<'q, DB: Sql>(q: SqlQuery<'q, DB>, i: &'q Import) -> SqlQuery<'q, DB> {
    q.arg(i.status.as_str())
        .arg(i.counts.rows_total)
        .arg(i.counts.rows_done)
        .arg(i.counts.created)
        .arg(i.counts.updated)
        .arg(i.counts.skipped)
        .arg(i.counts.failed)
        .arg(i.chunks_total)
        .arg(i.chunks_done)
        .arg(i.error.as_ref().map(|e| e.to_string()))
        .arg(i.malformed.as_ref().map(|m| m.0))
        .arg(i.malformed.as_ref().map(|m| m.1.clone()))
        .arg(i.idempotency_key.clone())
        .arg(i.fingerprint.clone())
        .arg(i.finished_at.map(|t| t.millis()))
}

pub async fn insert_import<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    i: &Import,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO imports (workspace_id, mode, id, status, rows_total, rows_done, created, updated, skipped, \
         failed, chunks_total, chunks_done, error, malformed_row, malformed_reason, idempotency_key, fingerprint, \
         finished_at, object, on_duplicate, dry_run, targets, author, created_at, lease_until) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, 0)",
        tenant,
    )
    .arg(i.id.as_str());
    let q = bind_progress(q, i)
        .arg(i.object.as_str())
        .arg(i.on_duplicate.as_str())
        .arg(i.dry_run)
        .arg(targets_json(&i.targets).to_string())
        .arg(author_json(&i.author).to_string())
        .arg(i.created_at.millis());
    tx.execute_unique(q).await?;
    Ok(())
}

pub async fn update_import<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    i: &Import,
) -> Result<(), StoreError> {
    // A queued import is due at once; a finished one no longer holds a claim.
    let q = tenant_query::<U::Db>(
        "UPDATE imports SET status = $4, rows_total = $5, rows_done = $6, created = $7, updated = $8, skipped = $9, \
         failed = $10, chunks_total = $11, chunks_done = $12, error = $13, malformed_row = $14, malformed_reason = $15, \
         idempotency_key = $16, fingerprint = $17, finished_at = $18, \
         lease_until = CASE WHEN $4 = 'queued' THEN 0 ELSE lease_until END, \
         claim_token = CASE WHEN $4 IN ('running') THEN claim_token ELSE NULL END \
         WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(i.id.as_str());
    tx.execute_unique(bind_progress(q, i)).await?;
    Ok(())
}

pub async fn cancel_import<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE imports SET status = 'cancelled', finished_at = $4, claim_token = NULL \
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND status IN ('queued', 'running')",
        tenant,
    )
    .arg(id.as_str())
    .arg(at.millis());
    Ok(tx.execute(q).await? == 1)
}

pub async fn get_import<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &str,
) -> Result<Option<Import>, StoreError> {
    let sql = format!(
        "SELECT {IMPORT_COLUMNS} FROM imports WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id);
    tx.optional(q, import).await
}

pub async fn get_import_by_key<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    key: &str,
) -> Result<Option<Import>, StoreError> {
    let sql = format!(
        "SELECT {IMPORT_COLUMNS} FROM imports WHERE workspace_id = $1 AND mode = $2 AND idempotency_key = $3"
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(key);
    tx.optional(q, import).await
}

pub async fn list_imports<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Import>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {IMPORT_COLUMNS} FROM imports"));
    tenant_where(&mut qb, tenant);
    qb.push(" AND status <> 'receiving'");
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, import).await
}

pub async fn insert_import_chunk<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    chunk: &ImportChunk,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO import_chunks (workspace_id, mode, import_id, seq, first_row, row_count, data) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        tenant,
    )
    .arg(id.as_str())
    .arg(chunk.seq)
    .arg(chunk.first_row)
    .arg(chunk.row_count)
    .arg(chunk.data.as_slice());
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_import_chunk<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    seq: i64,
) -> Result<Option<ImportChunk>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT seq, first_row, row_count, data FROM import_chunks \
         WHERE workspace_id = $1 AND mode = $2 AND import_id = $3 AND seq = $4",
        tenant,
    )
    .arg(id.as_str())
    .arg(seq);
    tx.optional(q, |r| {
        Ok(ImportChunk {
            seq: r.col("seq")?,
            first_row: r.col("first_row")?,
            row_count: r.col("row_count")?,
            data: r.col("data")?,
        })
    })
    .await
}

pub async fn delete_import_chunks<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    upto: Option<i64>,
) -> Result<u64, StoreError> {
    if upto.is_none() {
        let q = tenant_query::<U::Db>(
            "DELETE FROM import_keys WHERE workspace_id = $1 AND mode = $2 AND import_id = $3",
            tenant,
        )
        .arg(id.as_str());
        tx.execute(q).await?;
    }
    let q = tenant_query::<U::Db>(
        "DELETE FROM import_chunks WHERE workspace_id = $1 AND mode = $2 AND import_id = $3 AND seq <= $4",
        tenant,
    )
    .arg(id.as_str())
    .arg(upto.unwrap_or(i64::MAX));
    tx.execute(q).await
}

pub async fn insert_import_keys<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    keys: &[String],
) -> Result<(), StoreError> {
    // At most 1,000 keys a statement (4,000 parameters), within every backend's bind limit.
    for part in keys.chunks(1000) {
        let mut qb = QueryBuilder::<U::Db>::new(
            "INSERT INTO import_keys (workspace_id, mode, import_id, key) ",
        );
        qb.push_values(part, |mut b, k| {
            b.push_arg(tenant.workspace_id.as_str())
                .push_arg(tenant.mode.as_str())
                .push_arg(id.as_str())
                .push_arg(k.as_str());
        });
        qb.push(" ON CONFLICT DO NOTHING");
        tx.execute_built(&mut qb).await?;
    }
    Ok(())
}

pub async fn import_keys_among<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    keys: &[String],
) -> Result<Vec<String>, StoreError> {
    let mut found = Vec::new();
    for part in keys.chunks(1000) {
        let mut qb = QueryBuilder::<U::Db>::new("SELECT key FROM import_keys");
        tenant_where(&mut qb, tenant);
        qb.push(" AND import_id = ").push_arg(id.as_str());
        U::push_in(&mut qb, "key", part.iter().map(String::as_str));
        found.extend(tx.all_built(&mut qb, |r| r.col::<String>("key")).await?);
    }
    Ok(found)
}

pub async fn delete_import<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
) -> Result<(), StoreError> {
    delete_import_chunks(tx, tenant, id, None).await?;
    for sql in [
        "DELETE FROM import_errors WHERE workspace_id = $1 AND mode = $2 AND import_id = $3",
        "DELETE FROM imports WHERE workspace_id = $1 AND mode = $2 AND id = $3",
    ] {
        tx.execute(tenant_query::<U::Db>(sql, tenant).arg(id.as_str()))
            .await?;
    }
    Ok(())
}

pub async fn insert_import_errors<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    errors: &[ImportError],
) -> Result<(), StoreError> {
    // At most 1,000 rows a statement: a chunk's errors, within every backend's bind limit.
    for part in errors.chunks(1000) {
        let mut qb = QueryBuilder::<U::Db>::new(
            "INSERT INTO import_errors (workspace_id, mode, import_id, row_no, problem) ",
        );
        qb.push_values(part, |mut b, e| {
            b.push_arg(tenant.workspace_id.as_str())
                .push_arg(tenant.mode.as_str())
                .push_arg(id.as_str())
                .push_arg(e.row)
                .push_arg(e.problem.to_string());
        });
        qb.push(" ON CONFLICT DO NOTHING");
        tx.execute_built(&mut qb).await?;
    }
    Ok(())
}

pub async fn list_import_errors<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    after: Option<i64>,
    limit: u32,
) -> Result<Vec<ImportError>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT row_no, problem FROM import_errors \
         WHERE workspace_id = $1 AND mode = $2 AND import_id = $3 AND row_no > $4 ORDER BY row_no LIMIT $5",
        tenant,
    )
    .arg(id.as_str())
    .arg(after.unwrap_or(0))
    .arg(i64::from(limit));
    tx.all(q, |r| {
        Ok(ImportError {
            row: r.col("row_no")?,
            problem: json_value(r, "problem")?,
        })
    })
    .await
}

pub async fn claim_import<U: Unit>(
    tx: &mut U,
    now: Timestamp,
    lease_until: Timestamp,
    claim_token: &str,
) -> Result<Option<(Tenant, Import)>, StoreError> {
    jobs::claim_next(
        tx,
        "imports",
        IMPORT_COLUMNS,
        now,
        lease_until,
        claim_token,
        import,
    )
    .await
}

pub async fn claim_import_by_id<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    now: Timestamp,
    lease_until: Timestamp,
    claim_token: &str,
) -> Result<Option<Import>, StoreError> {
    let sql = format!(
        "UPDATE imports SET status = 'running', claim_token = $4, lease_until = $5
         WHERE workspace_id = $1 AND mode = $2 AND id = $3
           AND status IN ('queued', 'running') AND lease_until <= $6
         RETURNING {IMPORT_COLUMNS}"
    );
    let q = tenant_query::<U::Db>(&sql, tenant)
        .arg(id.as_str())
        .arg(claim_token)
        .arg(lease_until.millis())
        .arg(now.millis());
    tx.optional(q, import).await
}

pub async fn renew_import_claim<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ImportId,
    claim_token: &str,
    lease_until: Timestamp,
) -> Result<bool, StoreError> {
    jobs::renew_claim(tx, "imports", tenant, id.as_str(), claim_token, lease_until).await
}

pub async fn purge_imports<U: Unit>(
    tx: &mut U,
    errors_before: Timestamp,
    receiving_before: Timestamp,
) -> Result<u64, StoreError> {
    let mut gone = tx
        .execute(
            sqlx::query::<U::Db>(
                "DELETE FROM import_errors WHERE (workspace_id, mode, import_id) IN (
                 SELECT workspace_id, mode, id FROM imports WHERE finished_at IS NOT NULL AND finished_at < $1)",
            )
            .arg(errors_before.millis()),
        )
        .await?;
    let stale =
        "SELECT workspace_id, mode, id FROM imports WHERE status = 'receiving' AND created_at < $1";
    gone += tx
        .execute(
            sqlx::query::<U::Db>(&format!(
                "DELETE FROM import_chunks WHERE (workspace_id, mode, import_id) IN ({stale})"
            ))
            .arg(receiving_before.millis()),
        )
        .await?;
    gone += tx
        .execute(
            sqlx::query::<U::Db>(&format!(
                "DELETE FROM imports WHERE (workspace_id, mode, id) IN ({stale})"
            ))
            .arg(receiving_before.millis()),
        )
        .await?;
    Ok(gone)
}

/// `impl ImportRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_import_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::ImportRepo, $tx, imports, [
            fn insert_import(tenant: &$crate::reexport::Tenant, import: &$crate::reexport::Import) -> Result<(), $crate::reexport::StoreError>;
            fn insert_import_chunk(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, chunk: &$crate::reexport::ImportChunk) -> Result<(), $crate::reexport::StoreError>;
            fn get_import(tenant: &$crate::reexport::Tenant, id: &str) -> Result<Option<$crate::reexport::Import>, $crate::reexport::StoreError>;
            fn get_import_by_key(tenant: &$crate::reexport::Tenant, key: &str) -> Result<Option<$crate::reexport::Import>, $crate::reexport::StoreError>;
            fn list_imports(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Import>, $crate::reexport::StoreError>;
            fn update_import(tenant: &$crate::reexport::Tenant, import: &$crate::reexport::Import) -> Result<(), $crate::reexport::StoreError>;
            fn cancel_import(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, at: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn get_import_chunk(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, seq: i64) -> Result<Option<$crate::reexport::ImportChunk>, $crate::reexport::StoreError>;
            fn delete_import_chunks(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, upto: Option<i64>) -> Result<u64, $crate::reexport::StoreError>;
            fn insert_import_keys(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, keys: &[String]) -> Result<(), $crate::reexport::StoreError>;
            fn import_keys_among(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, keys: &[String]) -> Result<Vec<String>, $crate::reexport::StoreError>;
            fn delete_import(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId) -> Result<(), $crate::reexport::StoreError>;
            fn insert_import_errors(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, errors: &[$crate::reexport::ImportError]) -> Result<(), $crate::reexport::StoreError>;
            fn list_import_errors(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, after: Option<i64>, limit: u32) -> Result<Vec<$crate::reexport::ImportError>, $crate::reexport::StoreError>;
            fn claim_import(now: $crate::reexport::Timestamp, lease_until: $crate::reexport::Timestamp, claim_token: &str) -> Result<Option<($crate::reexport::Tenant, $crate::reexport::Import)>, $crate::reexport::StoreError>;
            fn claim_import_by_id(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, now: $crate::reexport::Timestamp, lease_until: $crate::reexport::Timestamp, claim_token: &str) -> Result<Option<$crate::reexport::Import>, $crate::reexport::StoreError>;
            fn renew_import_claim(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ImportId, claim_token: &str, lease_until: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn purge_imports(errors_before: $crate::reexport::Timestamp, receiving_before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
    };
}
