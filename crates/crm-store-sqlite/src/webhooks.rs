//! Webhooks, deliveries and their attempt log over SQLite. Fan-out and claims run in write
//! transactions, which hold the database's one write lock (`BEGIN IMMEDIATE`): two dispatchers
//! or two claimers never see the same rows.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use crm_app::{
    ports::{
        AttemptOutcome, ClaimedDelivery, DeliveryAttempt, DeliveryRecord, FanOutRow, NewDelivery,
        Slice, WebhookRepo,
    },
    StoreError,
};
use crm_domain::{
    ids::DeliveryId, DeliveryStatus, EventId, EventType, Subscription, Tenant, Timestamp, Webhook,
    WebhookId,
};
use sqlx::{sqlite::SqliteRow, QueryBuilder, Sqlite};

use crate::{
    backend,
    rows::{self, get, tenant_of},
    secrets::{open, seal, WEBHOOKS},
    tx::Secrets,
    SqliteTx,
};

/// Rows per multi-row statement (SQLite allows 32766 bound values).
const CHUNK: usize = 1000;

const WEBHOOK_COLUMNS: &str =
    "id, mode, url, events, description, enabled, secret, created_at, updated_at, version";
const ATTEMPT_COLUMNS: &str =
    "seq, webhook_id, delivery_id, event_id, event_type, attempt, status, response_status, error, duration_ms, next_attempt_at, created_at";

fn event_type(s: &str) -> Result<EventType, StoreError> {
    EventType::parse(s).ok_or_else(|| rows::corrupt("event type"))
}

fn status(s: &str) -> Result<DeliveryStatus, StoreError> {
    DeliveryStatus::parse(s).ok_or_else(|| rows::corrupt("delivery status"))
}

fn events_text(s: &Subscription) -> String {
    serde_json::to_string(&s.names()).unwrap_or_else(|_| "[]".into())
}

fn subscription(text: &str) -> Result<Subscription, StoreError> {
    let names: Vec<String> =
        serde_json::from_str(text).map_err(|_| rows::corrupt("webhook events"))?;
    Ok(Subscription::from_stored(&names))
}

fn webhook(row: &SqliteRow, tenant: &Tenant, secrets: &Secrets) -> Result<Webhook, StoreError> {
    let id: String = get(row, "id")?;
    let secret = open(
        secrets,
        tenant,
        WEBHOOKS,
        &id,
        &get::<String>(row, "secret")?,
    )?;
    Ok(Webhook {
        id: WebhookId::from_trusted(id),
        mode: crm_store_sql::rows::mode(row, "mode")?,
        url: get(row, "url")?,
        events: subscription(&get::<String>(row, "events")?)?,
        description: get(row, "description")?,
        enabled: get(row, "enabled")?,
        secret,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
        updated_at: Timestamp::from_millis(get(row, "updated_at")?),
        version: get(row, "version")?,
    })
}

fn attempt(row: &SqliteRow) -> Result<DeliveryAttempt, StoreError> {
    Ok(DeliveryAttempt {
        seq: get(row, "seq")?,
        webhook_id: WebhookId::from_trusted(get(row, "webhook_id")?),
        delivery_id: DeliveryId::from_trusted(get(row, "delivery_id")?),
        event_id: EventId::from_trusted(get(row, "event_id")?),
        event_type: event_type(&get::<String>(row, "event_type")?)?,
        attempt: get::<i64>(row, "attempt")? as u32,
        status: status(&get::<String>(row, "status")?)?,
        response_status: get::<Option<i64>>(row, "response_status")?.map(|s| s as u16),
        error: get(row, "error")?,
        duration_ms: get::<i64>(row, "duration_ms")?.max(0) as u64,
        next_attempt_at: crm_store_sql::rows::opt_ts(row, "next_attempt_at")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
    })
}

/// How long a due delivery that cannot be sent (its webhook is disabled) waits before it is
/// looked at again.
const PARKED_MS: i64 = 60_000;

/// Sets when deliveries come due next, and their claim token.
async fn set_due(
    tx: &mut SqliteTx,
    keys: &[(&Tenant, &DeliveryId)],
    at: Timestamp,
    token: Option<&str>,
) -> Result<(), StoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<Sqlite>::new("UPDATE webhook_deliveries SET next_attempt_at = ");
    qb.push_bind(at.millis())
        .push(", claim_token = ")
        .push_bind(token)
        .push(" WHERE (workspace_id, mode, id) IN (");
    let mut sep = qb.separated(", ");
    for (t, id) in keys {
        sep.push("(")
            .push_bind_unseparated(t.workspace_id.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(t.mode.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(id.as_str())
            .push_unseparated(")");
    }
    qb.push(")");
    qb.build().execute(tx.conn()).await.map_err(backend)?;
    Ok(())
}

/// Records outcomes of distinct deliveries: each delivery is updated only under its claim token
/// and only for the webhook and event its outcome names; only updated ones get their attempt
/// logged. Returns how many.
async fn record_round(tx: &mut SqliteTx, round: &[&AttemptOutcome]) -> Result<u64, StoreError> {
    let mut qb = QueryBuilder::<Sqlite>::new(
        "WITH v(workspace_id, mode, id, webhook_id, event_id, token, status, attempts, next_at, updated_at) AS (VALUES ",
    );
    let mut sep = qb.separated(", ");
    for o in round {
        let a = &o.attempt;
        sep.push("(")
            .push_bind_unseparated(o.tenant.workspace_id.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(o.tenant.mode.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(o.delivery_id.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(a.webhook_id.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(a.event_id.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(&o.claim_token)
            .push_unseparated(", ")
            .push_bind_unseparated(o.status.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(i64::from(a.attempt))
            .push_unseparated(", ")
            .push_bind_unseparated(o.next_attempt_at.unwrap_or(a.created_at).millis())
            .push_unseparated(", ")
            .push_bind_unseparated(a.created_at.millis())
            .push_unseparated(")");
    }
    qb.push(
        ") UPDATE webhook_deliveries AS d
           SET status = v.status, attempts = v.attempts, next_attempt_at = v.next_at, claim_token = NULL, updated_at = v.updated_at
           FROM v
           WHERE d.workspace_id = v.workspace_id AND d.mode = v.mode AND d.id = v.id
             AND d.webhook_id = v.webhook_id AND d.event_id = v.event_id AND d.claim_token = v.token
           RETURNING workspace_id, mode, id, event_type",
    );
    let rows = qb.build().fetch_all(tx.conn()).await.map_err(backend)?;
    let mut updated: HashMap<(String, String, String), String> = HashMap::with_capacity(rows.len());
    for r in &rows {
        updated.insert(
            (get(r, "workspace_id")?, get(r, "mode")?, get(r, "id")?),
            get(r, "event_type")?,
        );
    }
    let held: Vec<(&AttemptOutcome, String)> = round
        .iter()
        .filter_map(|o| {
            let key = (
                o.tenant.workspace_id.as_str().to_owned(),
                o.tenant.mode.as_str().to_owned(),
                o.delivery_id.as_str().to_owned(),
            );
            updated.remove(&key).map(|event_type| (*o, event_type))
        })
        .collect();
    if held.is_empty() {
        return Ok(0);
    }
    let n = held.len() as u64;
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "INSERT INTO webhook_delivery_attempts (workspace_id, mode, {ATTEMPT_COLUMNS}) "
    ));
    qb.push_values(held, |mut b, (o, event_type)| {
        let a = &o.attempt;
        b.push_bind(o.tenant.workspace_id.as_str())
            .push_bind(o.tenant.mode.as_str())
            .push_bind(a.seq.as_str())
            .push_bind(a.webhook_id.as_str())
            .push_bind(o.delivery_id.as_str())
            .push_bind(a.event_id.as_str())
            .push_bind(event_type)
            .push_bind(i64::from(a.attempt))
            .push_bind(o.status.as_str())
            .push_bind(a.response_status.map(i64::from))
            .push_bind(a.error.as_deref())
            .push_bind(a.duration_ms as i64)
            .push_bind(a.next_attempt_at.map(Timestamp::millis))
            .push_bind(a.created_at.millis());
    });
    qb.build().execute(tx.conn()).await.map_err(backend)?;
    Ok(n)
}

#[async_trait]
impl WebhookRepo for SqliteTx {
    async fn insert_webhook(&mut self, tenant: &Tenant, w: &Webhook) -> Result<(), StoreError> {
        let secret = seal(&self.secrets(), tenant, WEBHOOKS, w.id.as_str(), &w.secret)?;
        sqlx::query(
            "INSERT INTO webhooks (workspace_id, mode, id, url, events, description, enabled, secret, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(w.id.as_str())
        .bind(&w.url)
        .bind(events_text(&w.events))
        .bind(&w.description)
        .bind(w.enabled)
        .bind(&secret)
        .bind(w.created_at.millis())
        .bind(w.updated_at.millis())
        .bind(w.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn get_webhook(
        &mut self,
        tenant: &Tenant,
        id: &WebhookId,
    ) -> Result<Option<Webhook>, StoreError> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = $1 AND mode = $2 AND id = $3");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        let secrets = self.secrets();
        row.as_ref()
            .map(|r| webhook(r, tenant, &secrets))
            .transpose()
    }

    async fn list_webhooks(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Webhook>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks"));
        crate::tx::tenant_where(&mut qb, tenant);
        crate::tx::slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        let secrets = self.secrets();
        rows.iter().map(|r| webhook(r, tenant, &secrets)).collect()
    }

    async fn update_webhook(&mut self, tenant: &Tenant, w: &Webhook) -> Result<(), StoreError> {
        let secret = seal(&self.secrets(), tenant, WEBHOOKS, w.id.as_str(), &w.secret)?;
        let done = sqlx::query(
            "UPDATE webhooks SET url = $4, events = $5, description = $6, enabled = $7, secret = $8, updated_at = $9, version = $10
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $10 - 1",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(w.id.as_str())
        .bind(&w.url)
        .bind(events_text(&w.events))
        .bind(&w.description)
        .bind(w.enabled)
        .bind(&secret)
        .bind(w.updated_at.millis())
        .bind(w.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::Stale)
        }
    }

    async fn delete_webhook(
        &mut self,
        tenant: &Tenant,
        id: &WebhookId,
    ) -> Result<bool, StoreError> {
        for table in ["webhook_delivery_attempts", "webhook_deliveries"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE workspace_id = $1 AND mode = $2 AND webhook_id = $3"
            ))
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        }
        let done =
            sqlx::query("DELETE FROM webhooks WHERE workspace_id = $1 AND mode = $2 AND id = $3")
                .bind(tenant.workspace_id.as_str())
                .bind(tenant.mode.as_str())
                .bind(id.as_str())
                .execute(self.conn())
                .await
                .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn take_events_to_dispatch(&mut self, limit: u32) -> Result<Vec<FanOutRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT b.workspace_id, b.mode, b.id, b.type, w.id AS webhook_id, w.events AS webhook_events
             FROM (SELECT workspace_id, mode, id, type, created_at FROM event_dispatch_queue ORDER BY created_at, id LIMIT $1) b
             LEFT JOIN webhooks w ON w.workspace_id = b.workspace_id AND w.mode = b.mode AND w.enabled = 1 AND w.created_at <= b.created_at
             ORDER BY b.created_at, b.id, b.workspace_id, b.mode",
        )
        .bind(i64::from(limit))
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        rows.iter()
            .map(|r| {
                let webhook = match get::<Option<String>>(r, "webhook_id")? {
                    Some(id) => Some((
                        WebhookId::from_trusted(id),
                        subscription(&get::<String>(r, "webhook_events")?)?,
                    )),
                    None => None,
                };
                Ok(FanOutRow {
                    tenant: tenant_of(r)?,
                    event_id: EventId::from_trusted(get(r, "id")?),
                    event_type: event_type(&get::<String>(r, "type")?)?,
                    webhook,
                })
            })
            .collect()
    }

    async fn insert_deliveries(&mut self, deliveries: &[NewDelivery]) -> Result<u64, StoreError> {
        let mut inserted = 0;
        for chunk in deliveries.chunks(CHUNK) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO webhook_deliveries (workspace_id, mode, id, webhook_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at) ",
            );
            qb.push_values(chunk, |mut b, d| {
                b.push_bind(d.tenant.workspace_id.as_str())
                    .push_bind(d.tenant.mode.as_str())
                    .push_bind(d.id.as_str())
                    .push_bind(d.webhook_id.as_str())
                    .push_bind(d.event_id.as_str())
                    .push_bind(d.event_type.as_str())
                    .push_bind(DeliveryStatus::Pending.as_str())
                    .push_bind(0i64)
                    .push_bind(d.created_at.millis())
                    .push_bind(d.created_at.millis())
                    .push_bind(d.created_at.millis());
            });
            qb.push(" ON CONFLICT (workspace_id, mode, event_id, webhook_id) DO NOTHING");
            inserted += qb
                .build()
                .execute(self.conn())
                .await
                .map_err(backend)?
                .rows_affected();
        }
        Ok(inserted)
    }

    async fn mark_events_dispatched(
        &mut self,
        events: &[(Tenant, EventId)],
    ) -> Result<(), StoreError> {
        for chunk in events.chunks(CHUNK) {
            // By primary key: SQLite's planner takes it for a list of row values.
            let mut qb = QueryBuilder::<Sqlite>::new(
                "DELETE FROM event_dispatch_queue WHERE (workspace_id, mode, id) IN (",
            );
            let mut sep = qb.separated(", ");
            for (t, id) in chunk {
                sep.push("(")
                    .push_bind_unseparated(t.workspace_id.as_str())
                    .push_unseparated(", ")
                    .push_bind_unseparated(t.mode.as_str())
                    .push_unseparated(", ")
                    .push_bind_unseparated(id.as_str())
                    .push_unseparated(")");
            }
            qb.push(")");
            qb.build().execute(self.conn()).await.map_err(backend)?;
        }
        Ok(())
    }

    async fn claim_deliveries(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        // The due scan walks the partial due index in order and stops at the limit; deliveries
        // of a disabled webhook (or whose event is gone) are not handed out but looked at again
        // after PARKED_MS.
        let rows = sqlx::query(
            "SELECT d.workspace_id, d.mode, d.id, d.webhook_id, d.event_id, d.event_type, d.attempts, w.url, w.secret, w.enabled, e.body
             FROM (SELECT workspace_id, mode, id, webhook_id, event_id, event_type, attempts FROM webhook_deliveries
                   WHERE status IN ('pending', 'retrying') AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2) d
             JOIN webhooks w ON w.workspace_id = d.workspace_id AND w.mode = d.mode AND w.id = d.webhook_id
             LEFT JOIN events e ON e.workspace_id = d.workspace_id AND e.mode = d.mode AND e.id = d.event_id",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut claimed = Vec::with_capacity(rows.len());
        let mut parked = Vec::new();
        let secrets = self.secrets();
        for r in &rows {
            let t = tenant_of(r)?;
            let id = DeliveryId::from_trusted(get(r, "id")?);
            let body: Option<String> = get(r, "body")?;
            let webhook_id: String = get(r, "webhook_id")?;
            // One webhook whose secret does not open must not hold up every other delivery: its
            // deliveries are parked like a disabled webhook's.
            let secret = match open(
                &secrets,
                &t,
                WEBHOOKS,
                &webhook_id,
                &get::<String>(r, "secret")?,
            ) {
                Ok(secret) => Some(secret),
                Err(e) => {
                    tracing::error!(webhook_id, error = %e, "a webhook's stored secret does not decrypt; its deliveries wait");
                    None
                }
            };
            match (body, secret) {
                (Some(body), Some(secret)) if get::<bool>(r, "enabled")? => {
                    claimed.push(ClaimedDelivery {
                        secret,
                        tenant: t,
                        id,
                        webhook_id: WebhookId::from_trusted(get(r, "webhook_id")?),
                        event_id: EventId::from_trusted(get(r, "event_id")?),
                        event_type: event_type(&get::<String>(r, "event_type")?)?,
                        attempts: get::<i64>(r, "attempts")?.max(0) as u32,
                        url: get(r, "url")?,
                        body,
                        claim_token: claim_token.to_owned(),
                    })
                }
                _ => parked.push((t, id)),
            }
        }
        let keys: Vec<(&Tenant, &DeliveryId)> =
            claimed.iter().map(|c| (&c.tenant, &c.id)).collect();
        set_due(self, &keys, lease_until, Some(claim_token)).await?;
        let parked_keys: Vec<(&Tenant, &DeliveryId)> =
            parked.iter().map(|(t, id)| (t, id)).collect();
        set_due(self, &parked_keys, now.plus_millis(PARKED_MS), None).await?;
        Ok(claimed)
    }

    async fn record_attempts(&mut self, outcomes: &[AttemptOutcome]) -> Result<u64, StoreError> {
        // Two statements per round, not two per outcome: every statement is a round trip to the
        // connection's thread while the write lock is held, and creates and claims wait for it.
        // At most 14 bound values per outcome: 500 stay far below SQLite's 32,766.
        let mut recorded = 0;
        for chunk in outcomes.chunks(CHUNK / 2) {
            // A round names each delivery once, so that a row the update returns is that one
            // outcome's; a second outcome for a delivery (a stale claim's beside its current
            // holder's) waits for the next round, and whichever of them holds the claim is the
            // one recorded.
            let mut pending: Vec<&AttemptOutcome> = chunk.iter().collect();
            while !pending.is_empty() {
                let mut named = HashSet::new();
                let (round, later): (Vec<&AttemptOutcome>, Vec<&AttemptOutcome>) = pending
                    .into_iter()
                    .partition(|o| named.insert((&o.tenant, &o.delivery_id)));
                pending = later;
                recorded += record_round(self, &round).await?;
            }
        }
        Ok(recorded)
    }

    async fn get_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
    ) -> Result<Option<DeliveryRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, webhook_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at
             FROM webhook_deliveries WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND webhook_id = $4",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(id.as_str())
        .bind(webhook_id.as_str())
        .fetch_optional(self.conn())
        .await
        .map_err(backend)?;
        row.map(|r| {
            Ok(DeliveryRecord {
                id: DeliveryId::from_trusted(get(&r, "id")?),
                webhook_id: WebhookId::from_trusted(get(&r, "webhook_id")?),
                event_id: EventId::from_trusted(get(&r, "event_id")?),
                event_type: event_type(&get::<String>(&r, "event_type")?)?,
                status: status(&get::<String>(&r, "status")?)?,
                attempts: get::<i64>(&r, "attempts")?.max(0) as u32,
                next_attempt_at: Timestamp::from_millis(get(&r, "next_attempt_at")?),
                created_at: Timestamp::from_millis(get(&r, "created_at")?),
                updated_at: Timestamp::from_millis(get(&r, "updated_at")?),
            })
        })
        .transpose()
    }

    async fn requeue_dead_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $5, claim_token = NULL, updated_at = $5
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND webhook_id = $4 AND status = 'dead_lettered'",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(id.as_str())
        .bind(webhook_id.as_str())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_delivery_attempts(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        slice: &Slice,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ATTEMPT_COLUMNS} FROM webhook_delivery_attempts WHERE workspace_id = "
        ));
        qb.push_bind(tenant.workspace_id.as_str())
            .push(" AND mode = ")
            .push_bind(tenant.mode.as_str());
        qb.push(" AND webhook_id = ").push_bind(webhook_id.as_str());
        if let Some(before) = &slice.before {
            qb.push(" AND seq < ").push_bind(before.as_str());
        }
        qb.push(" ORDER BY seq DESC LIMIT ")
            .push_bind(i64::from(slice.limit));
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(attempt).collect()
    }
}
