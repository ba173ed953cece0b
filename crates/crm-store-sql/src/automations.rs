//! Automations and their runs (`AutomationRepo`). A rule's conditions and actions and a run's
//! outcomes are JSON columns, encoded by [`crate::stored::rule`].

use crm_app::{ports::RowLock, ports::Slice, StoreError};
use crm_domain::{
    rule::{Automation, AutomationRun},
    AutomationId, AutomationRunId, EventId, EventType, Tenant,
};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    corrupt,
    rows::{json_value, ts},
    sql::{Col, PushArg},
    Arg, Sql, SqlQuery, Unit,
};

const AUTOMATION_COLUMNS: &str =
    "id, name, trigger_event, CAST(conditions AS TEXT) AS conditions, \
     CAST(actions AS TEXT) AS actions, enabled, created_at, updated_at, version";

fn automation<R: Row>(row: &R) -> Result<Automation, StoreError>
where
    R::Database: Sql,
{
    let def = crate::stored::rule::automation_def(
        row.col("name")?,
        &row.col::<String>("trigger_event")?,
        &json_value(row, "conditions")?,
        &json_value(row, "actions")?,
    )
    .ok_or_else(|| corrupt("automation"))?;
    Ok(Automation {
        id: AutomationId::from_trusted(row.col("id")?),
        def,
        enabled: row.col("enabled")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

const RUN_COLUMNS: &str = "id, automation_id, event_id, event_type, record_id, matched, \
     CAST(actions AS TEXT) AS actions, created_at";

fn run<R: Row>(row: &R) -> Result<AutomationRun, StoreError>
where
    R::Database: Sql,
{
    let actions = crate::stored::rule::outcomes_from_json(&json_value(row, "actions")?)
        .ok_or_else(|| corrupt("run actions"))?;
    Ok(AutomationRun {
        id: AutomationRunId::from_trusted(row.col("id")?),
        automation_id: AutomationId::from_trusted(row.col("automation_id")?),
        event_id: EventId::from_trusted(row.col("event_id")?),
        event_type: EventType::parse(&row.col::<String>("event_type")?)
            .ok_or_else(|| corrupt("event_type"))?,
        record_id: row.col("record_id")?,
        matched: row.col("matched")?,
        actions,
        created_at: ts(row, "created_at")?,
    })
}

fn conditions_text(a: &Automation) -> String {
    crate::stored::rule::conditions_json(&a.def.conditions).to_string()
}

fn actions_text(a: &Automation) -> String {
    crate::stored::rule::actions_json(&a.def.actions).to_string()
}

/// An automation's id and definition, `$3` to `$8`, as its insert and its update take them.
fn bind_automation<'q, DB: Sql>(q: SqlQuery<'q, DB>, a: &'q Automation) -> SqlQuery<'q, DB> {
    q.arg(a.id.as_str())
        .arg(a.def.name.as_str())
        .arg(a.def.trigger_event.as_str())
        .arg(conditions_text(a))
        .arg(actions_text(a))
        .arg(a.enabled)
}

pub async fn insert_automation<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Automation,
) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO automations (workspace_id, mode, id, name, trigger_event, conditions, actions, enabled, created_at, updated_at, version)
         VALUES ($1, $2, $3, $4, $5, $6{json}, $7{json}, $8, $9, $10, $11)",
        json = U::JSON
    );
    let q = bind_automation(tenant_query::<U::Db>(&sql, tenant), a)
        .arg(a.created_at.millis())
        .arg(a.updated_at.millis())
        .arg(a.version);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_automation<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &AutomationId,
) -> Result<Option<Automation>, StoreError> {
    let sql = format!(
        "SELECT {AUTOMATION_COLUMNS} FROM automations WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(RowLock::Update)
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, automation).await
}

pub async fn update_automation<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Automation,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE automations SET name = $4, trigger_event = $5, conditions = $6{json}, actions = $7{json}, enabled = $8,
         updated_at = $9, version = $10 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $10 - 1",
        json = U::JSON
    );
    let q = bind_automation(tenant_query::<U::Db>(&sql, tenant), a)
        .arg(a.updated_at.millis())
        .arg(a.version);
    match tx.execute(q).await? {
        1 => Ok(()),
        _ => Err(StoreError::Stale),
    }
}

pub async fn delete_automation<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &AutomationId,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM automation_runs WHERE workspace_id = $1 AND mode = $2 AND automation_id = $3",
        tenant,
    )
    .arg(id.as_str());
    tx.execute(q).await?;
    let q = tenant_query::<U::Db>(
        "DELETE FROM automations WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn list_automations<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Automation>, StoreError> {
    let mut qb =
        QueryBuilder::<U::Db>::new(format!("SELECT {AUTOMATION_COLUMNS} FROM automations"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, automation).await
}

/// The enabled automations triggered by any of `events`, oldest first.
pub async fn active_automations<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    events: &[EventType],
) -> Result<Vec<Automation>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb =
        QueryBuilder::<U::Db>::new(format!("SELECT {AUTOMATION_COLUMNS} FROM automations"));
    tenant_where(&mut qb, tenant);
    qb.push(" AND enabled = TRUE");
    U::push_in(&mut qb, "trigger_event", events.iter().map(|e| e.as_str()));
    qb.push(" ORDER BY id");
    tx.all_built(&mut qb, automation).await
}

pub async fn insert_automation_runs<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    runs: &[AutomationRun],
) -> Result<(), StoreError> {
    if runs.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<U::Db>::new(
        "INSERT INTO automation_runs (workspace_id, mode, id, automation_id, event_id, event_type, record_id, matched, actions, created_at) ",
    );
    qb.push_values(runs, |mut b, r| {
        b.push_arg(tenant.workspace_id.as_str())
            .push_arg(tenant.mode.as_str())
            .push_arg(r.id.as_str())
            .push_arg(r.automation_id.as_str())
            .push_arg(r.event_id.as_str())
            .push_arg(r.event_type.as_str())
            .push_arg(r.record_id.as_str())
            .push_arg(r.matched)
            .push_arg(crate::stored::rule::outcomes_json(&r.actions));
        b.push_unseparated(U::JSON).push_arg(r.created_at.millis());
    });
    tx.execute_built(&mut qb).await?;
    Ok(())
}

pub async fn list_automation_runs<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    automation_id: &AutomationId,
    slice: &Slice,
) -> Result<Vec<AutomationRun>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {RUN_COLUMNS} FROM automation_runs"));
    tenant_where(&mut qb, tenant);
    qb.push(" AND automation_id = ")
        .push_arg(automation_id.as_str());
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, run).await
}

pub async fn count_active_automations<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT COUNT(*) AS n FROM automations WHERE workspace_id = $1 AND mode = $2 AND enabled = TRUE",
        tenant,
    );
    let n = tx.optional(q, |r| r.col::<i64>("n")).await?.unwrap_or(0);
    Ok(n.max(0) as u64)
}

/// `impl AutomationRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_automation_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::AutomationRepo, $tx, automations, [
            fn insert_automation(tenant: &$crate::reexport::Tenant, a: &$crate::reexport::rule::Automation) -> Result<(), $crate::reexport::StoreError>;
            fn get_automation(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::AutomationId) -> Result<Option<$crate::reexport::rule::Automation>, $crate::reexport::StoreError>;
            fn update_automation(tenant: &$crate::reexport::Tenant, a: &$crate::reexport::rule::Automation) -> Result<(), $crate::reexport::StoreError>;
            fn delete_automation(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::AutomationId) -> Result<bool, $crate::reexport::StoreError>;
            fn list_automations(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::rule::Automation>, $crate::reexport::StoreError>;
            fn active_automations(tenant: &$crate::reexport::Tenant, events: &[$crate::reexport::EventType]) -> Result<Vec<$crate::reexport::rule::Automation>, $crate::reexport::StoreError>;
            fn insert_automation_runs(tenant: &$crate::reexport::Tenant, runs: &[$crate::reexport::rule::AutomationRun]) -> Result<(), $crate::reexport::StoreError>;
            fn list_automation_runs(tenant: &$crate::reexport::Tenant, automation_id: &$crate::reexport::AutomationId, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::rule::AutomationRun>, $crate::reexport::StoreError>;
            fn count_active_automations(tenant: &$crate::reexport::Tenant) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
    };
}
