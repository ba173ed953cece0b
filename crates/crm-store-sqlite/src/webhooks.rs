//! Webhooks, deliveries and their attempt log over SQLite. Fan-out and claims run in write
//! transactions, which hold the database's one write lock (`BEGIN IMMEDIATE`): two dispatchers
//! or two claimers never see the same rows.

use std::collections::{HashMap, HashSet};

use crm_app::{
    ports::{AttemptOutcome, ClaimedDelivery, FanOutRow, NewDelivery},
    StoreError,
};
use crm_domain::{ids::DeliveryId, DeliveryStatus, EventId, Tenant, Timestamp, WebhookId};
use sqlx::{QueryBuilder, Sqlite};

use crm_store_sql::webhooks::{event_type, subscription, ATTEMPT_COLUMNS};

use crate::{
    backend,
    rows::{get, tenant_of},
    secrets::{open, WEBHOOKS},
    SqliteTx,
};

/// Rows per multi-row statement (SQLite allows 32766 bound values).
const CHUNK: usize = 1000;

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

crm_store_sql::impl_webhook_repo!(crate::SqliteTx, {
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
});
