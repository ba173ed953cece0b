//! The audit log (`AuditRepo`) and the retention job's deletes (`RetentionRepo`): the same
//! statements on both backends.

use crm_app::{
    ports::{AuditFilter, RetentionSettings, Slice},
    StoreError,
};
use crm_domain::{audit::AuditEntry, AuditId, ChangeId, Tenant, Timestamp, WorkspaceId};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{and_equals, slice_clause_on, tenant_where},
    corrupt,
    sql::{Col, PushArg},
    Arg, Sql, Unit,
};

pub async fn insert_audit<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    entries: &[AuditEntry],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<U::Db>::new(
        "INSERT INTO audit_entries (workspace_id, mode, id, at, action, target_id, actor_id, body) ",
    );
    qb.push_values(entries, |mut b, e| {
        b.push_arg(tenant.workspace_id.as_str())
            .push_arg(tenant.mode.as_str())
            .push_arg(e.id.as_str())
            .push_arg(e.at.millis())
            .push_arg(e.action.as_str())
            .push_arg(e.target.id.as_str())
            .push_arg(e.actor.id.as_deref())
            .push_arg(crate::stored::audit::entry_json(e).to_string());
        b.push_unseparated(U::JSON);
    });
    tx.execute_built(&mut qb).await?;
    Ok(())
}

pub async fn list_audit<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    filter: &AuditFilter,
    slice: &Slice,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut qb =
        QueryBuilder::<U::Db>::new("SELECT id, CAST(body AS TEXT) AS body FROM audit_entries");
    tenant_where(&mut qb, tenant);
    and_equals(&mut qb, "action", filter.action.as_deref());
    and_equals(&mut qb, "target_id", filter.target_id.as_deref());
    and_equals(&mut qb, "actor_id", filter.actor_id.as_deref());
    slice_clause_on(&mut qb, "id", slice);
    tx.all_built(&mut qb, entry).await
}

pub async fn delete_audit_before<U: Unit>(
    tx: &mut U,
    before: Timestamp,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM audit_entries WHERE at < $1").arg(before.millis());
    tx.execute(q).await
}

fn entry<R: Row>(row: &R) -> Result<AuditEntry, StoreError>
where
    R::Database: Sql,
{
    let body: serde_json::Value = serde_json::from_str(&row.col::<String>("body")?)
        .map_err(|_| corrupt("audit entry body"))?;
    crate::stored::audit::entry_from_json(AuditId::from_trusted(row.col("id")?), &body)
        .ok_or_else(|| corrupt("audit entry body"))
}

pub async fn retention_settings<U: Unit>(tx: &mut U) -> Result<Vec<RetentionSettings>, StoreError> {
    let q = sqlx::query::<U::Db>(
        "SELECT id, history_retention_days, email_retention_days FROM workspaces
         WHERE history_retention_days IS NOT NULL OR email_retention_days IS NOT NULL",
    );
    tx.all(q, |row| {
        let days = |name: &'static str| -> Result<Option<u32>, StoreError> {
            row.col::<Option<i64>>(name)?
                .map(|v| u32::try_from(v).map_err(|_| corrupt(name)))
                .transpose()
        };
        Ok(RetentionSettings {
            workspace_id: WorkspaceId::from_trusted(row.col("id")?),
            history_days: days("history_retention_days")?,
            email_days: days("email_retention_days")?,
        })
    })
    .await
}

pub async fn delete_changes_before<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    before: Timestamp,
) -> Result<u64, StoreError> {
    // Entry ids are time-ordered: every id below the first possible one of `before` is older.
    let floor = ChangeId::first_at(before);
    let q = sqlx::query::<U::Db>("DELETE FROM record_changes WHERE workspace_id = $1 AND id < $2")
        .arg(workspace.as_str())
        .arg(floor.as_str());
    tx.execute(q).await
}

pub async fn delete_emails_before<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    before: Timestamp,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>(
        "DELETE FROM emails WHERE workspace_id = $1 AND created_at < $2 AND status <> 'queued'",
    )
    .arg(workspace.as_str())
    .arg(before.millis());
    tx.execute(q).await
}

/// `impl AuditRepo for $tx` and `impl RetentionRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_audit_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::AuditRepo, $tx, audit, [
            fn insert_audit(tenant: &$crate::reexport::Tenant, entries: &[$crate::reexport::AuditEntry]) -> Result<(), $crate::reexport::StoreError>;
            fn list_audit(tenant: &$crate::reexport::Tenant, filter: &$crate::reexport::AuditFilter, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::AuditEntry>, $crate::reexport::StoreError>;
            fn delete_audit_before(before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
        $crate::port_impl!($crate::reexport::RetentionRepo, $tx, audit, [
            fn retention_settings() -> Result<Vec<$crate::reexport::RetentionSettings>, $crate::reexport::StoreError>;
            fn delete_changes_before(workspace: &$crate::reexport::WorkspaceId, before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn delete_emails_before(workspace: &$crate::reexport::WorkspaceId, before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
    };
}
