//! Exports (`ExportRepo`): the same statements on both backends; the claim is [`crate::jobs`]'.

use crm_app::StoreError;
use crm_domain::{
    export::{Export, ExportFormat, ExportStatus},
    ExportId, ObjectKind, Tenant, Timestamp,
};
use serde_json::Value;
use sqlx::Row;

use crate::{
    clauses::tenant_query,
    corrupt, jobs,
    rows::{json_value, opt_ts, ts},
    sql::Col,
    stored::import::{author_from_json, author_json},
    Arg, Sql, Unit,
};

const EXPORT_COLUMNS: &str = "workspace_id, mode, id, object, format, status, list_filter, csv_columns, \
    author, rows_total, rows_done, resume_after, chunks_total, error, created_at, finished_at, expires_at";

fn export<R: Row>(row: &R) -> Result<Export, StoreError>
where
    R::Database: Sql,
{
    let columns = json_value(row, "csv_columns")?;
    let error: Option<String> = row.col("error")?;
    Ok(Export {
        id: ExportId::from_trusted(row.col("id")?),
        object: ObjectKind::parse(&row.col::<String>("object")?)
            .ok_or_else(|| corrupt("export object"))?,
        format: ExportFormat::parse(&row.col::<String>("format")?)
            .ok_or_else(|| corrupt("export format"))?,
        status: ExportStatus::parse(&row.col::<String>("status")?)
            .ok_or_else(|| corrupt("export status"))?,
        filter: json_value(row, "list_filter")?,
        columns: columns
            .as_array()
            .and_then(|a| a.iter().map(|c| c.as_str().map(str::to_owned)).collect())
            .ok_or_else(|| corrupt("export columns"))?,
        rows_total: row.col("rows_total")?,
        rows_done: row.col("rows_done")?,
        resume_after: row.col("resume_after")?,
        chunks_total: row.col("chunks_total")?,
        author: author_from_json(&json_value(row, "author")?)
            .ok_or_else(|| corrupt("export author"))?,
        error: error
            .map(|e| serde_json::from_str(&e).map_err(|_| corrupt("export error")))
            .transpose()?,
        created_at: ts(row, "created_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        expires_at: opt_ts(row, "expires_at")?,
    })
}

pub async fn insert_export<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    e: &Export,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO exports (workspace_id, mode, id, object, format, status, list_filter, csv_columns, author, \
         rows_total, rows_done, resume_after, chunks_total, error, created_at, finished_at, expires_at, lease_until) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 0)",
        tenant,
    )
    .arg(e.id.as_str().to_owned())
    .arg(e.object.as_str())
    .arg(e.format.as_str())
    .arg(e.status.as_str())
    .arg(e.filter.to_string())
    .arg(Value::from(e.columns.clone()).to_string())
    .arg(author_json(&e.author).to_string())
    .arg(e.rows_total)
    .arg(e.rows_done)
    .arg(e.resume_after.clone())
    .arg(e.chunks_total)
    .arg(e.error.as_ref().map(|v| v.to_string()))
    .arg(e.created_at.millis())
    .arg(e.finished_at.map(|t| t.millis()))
    .arg(e.expires_at.map(|t| t.millis()));
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_export<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &str,
) -> Result<Option<Export>, StoreError> {
    let sql = format!(
        "SELECT {EXPORT_COLUMNS} FROM exports WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id);
    tx.optional(q, export).await
}

pub async fn update_export<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    e: &Export,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE exports SET status = $4, rows_total = $5, rows_done = $6, resume_after = $7, chunks_total = $8, \
         error = $9, finished_at = $10, expires_at = $11, \
         claim_token = CASE WHEN $4 = 'running' THEN claim_token ELSE NULL END \
         WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(e.id.as_str())
    .arg(e.status.as_str())
    .arg(e.rows_total)
    .arg(e.rows_done)
    .arg(e.resume_after.clone())
    .arg(e.chunks_total)
    .arg(e.error.as_ref().map(|v| v.to_string()))
    .arg(e.finished_at.map(|t| t.millis()))
    .arg(e.expires_at.map(|t| t.millis()));
    tx.execute(q).await?;
    Ok(())
}

pub async fn insert_export_chunk<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ExportId,
    seq: i64,
    data: &[u8],
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO export_chunks (workspace_id, mode, export_id, seq, data) VALUES ($1, $2, $3, $4, $5)",
        tenant,
    )
    .arg(id.as_str())
    .arg(seq)
    .arg(data);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_export_chunk<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ExportId,
    seq: i64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT data FROM export_chunks WHERE workspace_id = $1 AND mode = $2 AND export_id = $3 AND seq = $4",
        tenant,
    )
    .arg(id.as_str())
    .arg(seq);
    tx.optional(q, |r| r.col("data")).await
}

pub async fn claim_export<U: Unit>(
    tx: &mut U,
    now: Timestamp,
    lease_until: Timestamp,
    claim_token: &str,
) -> Result<Option<(Tenant, Export)>, StoreError> {
    jobs::claim_next(
        tx,
        "exports",
        EXPORT_COLUMNS,
        now,
        lease_until,
        claim_token,
        export,
    )
    .await
}

pub async fn renew_export_claim<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ExportId,
    claim_token: &str,
    lease_until: Timestamp,
) -> Result<bool, StoreError> {
    jobs::renew_claim(tx, "exports", tenant, id.as_str(), claim_token, lease_until).await
}

pub async fn purge_exports<U: Unit>(tx: &mut U, now: Timestamp) -> Result<u64, StoreError> {
    let expired = "SELECT workspace_id, mode, id FROM exports WHERE expires_at IS NOT NULL AND expires_at < $1";
    tx.execute(
        sqlx::query::<U::Db>(&format!(
            "DELETE FROM export_chunks WHERE (workspace_id, mode, export_id) IN ({expired})"
        ))
        .arg(now.millis()),
    )
    .await?;
    tx.execute(
        sqlx::query::<U::Db>(&format!(
            "DELETE FROM exports WHERE (workspace_id, mode, id) IN ({expired})"
        ))
        .arg(now.millis()),
    )
    .await
}

/// `impl ExportRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_export_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::ExportRepo, $tx, exports, [
            fn insert_export(tenant: &$crate::reexport::Tenant, export: &$crate::reexport::Export) -> Result<(), $crate::reexport::StoreError>;
            fn get_export(tenant: &$crate::reexport::Tenant, id: &str) -> Result<Option<$crate::reexport::Export>, $crate::reexport::StoreError>;
            fn update_export(tenant: &$crate::reexport::Tenant, export: &$crate::reexport::Export) -> Result<(), $crate::reexport::StoreError>;
            fn insert_export_chunk(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ExportId, seq: i64, data: &[u8]) -> Result<(), $crate::reexport::StoreError>;
            fn get_export_chunk(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ExportId, seq: i64) -> Result<Option<Vec<u8>>, $crate::reexport::StoreError>;
            fn claim_export(now: $crate::reexport::Timestamp, lease_until: $crate::reexport::Timestamp, claim_token: &str) -> Result<Option<($crate::reexport::Tenant, $crate::reexport::Export)>, $crate::reexport::StoreError>;
            fn renew_export_claim(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ExportId, claim_token: &str, lease_until: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn purge_exports(now: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
    };
}
