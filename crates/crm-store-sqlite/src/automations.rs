//! Automations and their runs over SQLite.

use async_trait::async_trait;
use crm_app::{
    ports::{AutomationRepo, Slice},
    StoreError,
};
use crm_domain::{
    rule::{ActionOutcome, Automation, AutomationDef, AutomationRun},
    AutomationId, AutomationRunId, EventId, EventType, Tenant, Timestamp,
};
use serde_json::Value;
use sqlx::{sqlite::SqliteRow, QueryBuilder, Row, Sqlite};

use crate::{
    backend,
    rows::{corrupt, get, json_value},
    tx::{slice_clause, tenant_where},
    SqliteTx,
};

const AUTOMATION_COLUMNS: &str =
    "id, name, trigger_event, conditions, actions, enabled, created_at, updated_at, version";

fn automation(row: &SqliteRow) -> Result<Automation, StoreError> {
    let def = AutomationDef::from_stored(
        get(row, "name")?,
        &get::<String>(row, "trigger_event")?,
        &json_value(row, "conditions")?,
        &json_value(row, "actions")?,
    )
    .ok_or_else(|| corrupt("automation"))?;
    Ok(Automation {
        id: AutomationId::from_trusted(get(row, "id")?),
        def,
        enabled: get(row, "enabled")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
        updated_at: Timestamp::from_millis(get(row, "updated_at")?),
        version: get(row, "version")?,
    })
}

const RUN_COLUMNS: &str =
    "id, automation_id, event_id, event_type, record_id, matched, actions, created_at";

fn run(row: &SqliteRow) -> Result<AutomationRun, StoreError> {
    let actions = match json_value(row, "actions")? {
        Value::Array(items) => items
            .iter()
            .map(ActionOutcome::from_snapshot)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| corrupt("run actions"))?,
        _ => return Err(corrupt("run actions")),
    };
    Ok(AutomationRun {
        id: AutomationRunId::from_trusted(get(row, "id")?),
        automation_id: AutomationId::from_trusted(get(row, "automation_id")?),
        event_id: EventId::from_trusted(get(row, "event_id")?),
        event_type: EventType::parse(&get::<String>(row, "event_type")?)
            .ok_or_else(|| corrupt("event_type"))?,
        record_id: get(row, "record_id")?,
        matched: get(row, "matched")?,
        actions,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
    })
}

fn conditions_text(a: &Automation) -> String {
    Value::Array(a.def.conditions.iter().map(|c| c.snapshot()).collect()).to_string()
}

fn actions_text(a: &Automation) -> String {
    Value::Array(a.def.actions.iter().map(|c| c.snapshot()).collect()).to_string()
}

#[async_trait]
impl AutomationRepo for SqliteTx {
    async fn insert_automation(
        &mut self,
        tenant: &Tenant,
        a: &Automation,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO automations (workspace_id, mode, id, name, trigger_event, conditions, actions, enabled, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(a.id.as_str())
        .bind(&a.def.name)
        .bind(a.def.trigger_event.as_str())
        .bind(conditions_text(a))
        .bind(actions_text(a))
        .bind(a.enabled)
        .bind(a.created_at.millis())
        .bind(a.updated_at.millis())
        .bind(a.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn get_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<Option<Automation>, StoreError> {
        let sql = format!("SELECT {AUTOMATION_COLUMNS} FROM automations WHERE workspace_id = $1 AND mode = $2 AND id = $3");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(automation).transpose()
    }

    async fn update_automation(
        &mut self,
        tenant: &Tenant,
        a: &Automation,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE automations SET name = $4, trigger_event = $5, conditions = $6, actions = $7, enabled = $8, updated_at = $9, version = $10
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $10 - 1",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(a.id.as_str())
        .bind(&a.def.name)
        .bind(a.def.trigger_event.as_str())
        .bind(conditions_text(a))
        .bind(actions_text(a))
        .bind(a.enabled)
        .bind(a.updated_at.millis())
        .bind(a.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::Stale)
        }
    }

    async fn delete_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<bool, StoreError> {
        for table in [
            "automation_runs WHERE workspace_id = $1 AND mode = $2 AND automation_id = $3",
            "automations WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        ] {
            let done = sqlx::query(&format!("DELETE FROM {table}"))
                .bind(tenant.workspace_id.as_str())
                .bind(tenant.mode.as_str())
                .bind(id.as_str())
                .execute(self.conn())
                .await
                .map_err(backend)?;
            if table.starts_with("automations ") {
                return Ok(done.rows_affected() == 1);
            }
        }
        Ok(false)
    }

    async fn list_automations(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Automation>, StoreError> {
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {AUTOMATION_COLUMNS} FROM automations"));
        tenant_where(&mut qb, tenant);
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(automation).collect()
    }

    async fn active_automations(
        &mut self,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Automation>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {AUTOMATION_COLUMNS} FROM automations"));
        tenant_where(&mut qb, tenant);
        qb.push(" AND enabled = 1 AND trigger_event IN (");
        let mut list = qb.separated(", ");
        for e in events {
            list.push_bind(e.as_str());
        }
        qb.push(") ORDER BY id");
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(automation).collect()
    }

    async fn insert_automation_runs(
        &mut self,
        tenant: &Tenant,
        runs: &[AutomationRun],
    ) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT INTO automation_runs (workspace_id, mode, id, automation_id, event_id, event_type, record_id, matched, actions, created_at) ",
        );
        qb.push_values(runs, |mut b, r| {
            b.push_bind(tenant.workspace_id.as_str())
                .push_bind(tenant.mode.as_str())
                .push_bind(r.id.as_str())
                .push_bind(r.automation_id.as_str())
                .push_bind(r.event_id.as_str())
                .push_bind(r.event_type.as_str())
                .push_bind(r.record_id.as_str())
                .push_bind(r.matched)
                .push_bind(r.actions_json().to_string())
                .push_bind(r.created_at.millis());
        });
        qb.build().execute(self.conn()).await.map_err(backend)?;
        Ok(())
    }

    async fn list_automation_runs(
        &mut self,
        tenant: &Tenant,
        automation_id: &AutomationId,
        slice: &Slice,
    ) -> Result<Vec<AutomationRun>, StoreError> {
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {RUN_COLUMNS} FROM automation_runs"));
        tenant_where(&mut qb, tenant);
        qb.push(" AND automation_id = ")
            .push_bind(automation_id.as_str());
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(run).collect()
    }

    async fn count_active_automations(&mut self, tenant: &Tenant) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM automations WHERE workspace_id = $1 AND mode = $2 AND enabled = 1")
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .fetch_one(self.conn())
            .await
            .map_err(backend)?;
        let n: i64 = row.try_get(0).map_err(backend)?;
        Ok(n.max(0) as u64)
    }
}
