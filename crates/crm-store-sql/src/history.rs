//! Field history (`HistoryRepo`): the same statements on both backends.

use crm_app::{ports::Slice, StoreError};
use crm_domain::{history::Change, ChangeId, ObjectKind, Tenant};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause_on, tenant_where},
    corrupt,
    sql::{Col, PushArg},
    Sql, Unit,
};

pub async fn insert_changes<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    changes: &[Change],
) -> Result<(), StoreError> {
    if changes.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<U::Db>::new(
        "INSERT INTO record_changes (workspace_id, mode, record_id, id, object, body) ",
    );
    qb.push_values(changes, |mut b, c| {
        b.push_arg(tenant.workspace_id.as_str())
            .push_arg(tenant.mode.as_str())
            .push_arg(c.record_id.as_str())
            .push_arg(c.id.as_str())
            .push_arg(c.object.as_str())
            .push_arg(crate::stored::history::change_json(c).to_string());
        b.push_unseparated(U::JSON);
    });
    tx.execute_built(&mut qb).await?;
    Ok(())
}

pub async fn list_changes<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    record_id: &str,
    slice: &Slice,
) -> Result<Vec<Change>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(
        "SELECT id, object, record_id, CAST(body AS TEXT) AS body FROM record_changes",
    );
    tenant_where(&mut qb, tenant);
    qb.push(" AND record_id = ").push_arg(record_id);
    slice_clause_on(&mut qb, "id", slice);
    tx.all_built(&mut qb, change).await
}

fn change<R: Row>(row: &R) -> Result<Change, StoreError>
where
    R::Database: Sql,
{
    let body: serde_json::Value = serde_json::from_str(&row.col::<String>("body")?)
        .map_err(|_| corrupt("history entry body"))?;
    let object = ObjectKind::parse(&row.col::<String>("object")?)
        .ok_or_else(|| corrupt("history entry object"))?;
    crate::stored::history::change_from_json(
        ChangeId::from_trusted(row.col("id")?),
        object,
        row.col("record_id")?,
        &body,
    )
    .ok_or_else(|| corrupt("history entry body"))
}

/// `impl HistoryRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_history_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::HistoryRepo, $tx, history, [
            fn insert_changes(tenant: &$crate::reexport::Tenant, changes: &[$crate::reexport::Change]) -> Result<(), $crate::reexport::StoreError>;
            fn list_changes(tenant: &$crate::reexport::Tenant, record_id: &str, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Change>, $crate::reexport::StoreError>;
        ], []);
    };
}
