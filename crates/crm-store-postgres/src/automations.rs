//! Automations and their runs over Postgres.

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
use sqlx::{postgres::PgRow, Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crate::{
    rows::{corrupt, get, json_value},
    tx::{slice_clause, tenant_query, tenant_where},
    PostgresTx,
};

const AUTOMATION_COLUMNS: &str =
    "id, name, trigger_event, conditions::text AS conditions, actions::text AS actions, enabled, created_at, updated_at, version";

fn automation(row: &PgRow) -> Result<Automation, StoreError> {
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

const RUN_COLUMNS: &str = "id, automation_id, event_id, event_type, record_id, matched, actions::text AS actions, created_at";

fn run(row: &PgRow) -> Result<AutomationRun, StoreError> {
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
impl AutomationRepo for PostgresTx {
    async fn insert_automation(
        &mut self,
        tenant: &Tenant,
        a: &Automation,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO automations (workspace_id, mode, id, name, trigger_event, conditions, actions, enabled, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, $8, $9, $10, $11)",
            tenant,
        )
        .bind(a.id.as_str())
        .bind(&a.def.name)
        .bind(a.def.trigger_event.as_str())
        .bind(conditions_text(a))
        .bind(actions_text(a))
        .bind(a.enabled)
        .bind(a.created_at.millis())
        .bind(a.updated_at.millis())
        .bind(a.version);
        self.execute(q).await?;
        Ok(())
    }

    async fn get_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<Option<Automation>, StoreError> {
        let sql = format!("SELECT {AUTOMATION_COLUMNS} FROM automations WHERE workspace_id = $1 AND mode = $2 AND id = $3{}", self.for_update());
        let q = tenant_query(&sql, tenant).bind(id.as_str());
        self.optional(q, automation).await
    }

    async fn update_automation(
        &mut self,
        tenant: &Tenant,
        a: &Automation,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE automations SET name = $4, trigger_event = $5, conditions = $6::json, actions = $7::json, enabled = $8, updated_at = $9,
             version = $10 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $10 - 1",
            tenant,
        )
        .bind(a.id.as_str())
        .bind(&a.def.name)
        .bind(a.def.trigger_event.as_str())
        .bind(conditions_text(a))
        .bind(actions_text(a))
        .bind(a.enabled)
        .bind(a.updated_at.millis())
        .bind(a.version);
        match self.execute(q).await? {
            1 => Ok(()),
            _ => Err(StoreError::Stale),
        }
    }

    async fn delete_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<bool, StoreError> {
        let q = tenant_query("DELETE FROM automation_runs WHERE workspace_id = $1 AND mode = $2 AND automation_id = $3", tenant).bind(id.as_str());
        self.execute(q).await?;
        let q = tenant_query(
            "DELETE FROM automations WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_automations(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Automation>, StoreError> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {AUTOMATION_COLUMNS} FROM automations"));
        tenant_where(&mut qb, tenant);
        slice_clause(&mut qb, slice);
        self.all(qb.build(), automation).await
    }

    async fn active_automations(
        &mut self,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Automation>, StoreError> {
        let types: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
        let sql = format!(
            "SELECT {AUTOMATION_COLUMNS} FROM automations WHERE workspace_id = $1 AND mode = $2 AND enabled AND trigger_event = ANY($3) ORDER BY id"
        );
        let q = tenant_query(&sql, tenant).bind(types);
        self.all(q, automation).await
    }

    async fn insert_automation_runs(
        &mut self,
        tenant: &Tenant,
        runs: &[AutomationRun],
    ) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut qb = QueryBuilder::<Postgres>::new(
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
                .push_unseparated("::json")
                .push_bind(r.created_at.millis());
        });
        self.execute(qb.build()).await?;
        Ok(())
    }

    async fn list_automation_runs(
        &mut self,
        tenant: &Tenant,
        automation_id: &AutomationId,
        slice: &Slice,
    ) -> Result<Vec<AutomationRun>, StoreError> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {RUN_COLUMNS} FROM automation_runs"));
        tenant_where(&mut qb, tenant);
        qb.push(" AND automation_id = ")
            .push_bind(automation_id.as_str());
        slice_clause(&mut qb, slice);
        self.all(qb.build(), run).await
    }

    async fn count_active_automations(&mut self, tenant: &Tenant) -> Result<u64, StoreError> {
        let q = tenant_query("SELECT COUNT(*) AS n FROM automations WHERE workspace_id = $1 AND mode = $2 AND enabled", tenant);
        let n = self.optional(q, |r| get::<i64>(r, "n")).await?.unwrap_or(0);
        Ok(n.max(0) as u64)
    }
}
