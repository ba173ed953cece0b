//! Webhooks, their deliveries' records and attempt log (`WebhookRepo`): the row decoding, how a
//! subscription is stored, and the statements both backends take alike. Fan-out, claims and the
//! recording of attempts differ per backend (locking, bulk syntax) and stay in each store.

use crm_app::{
    ports::{DeliveryAttempt, DeliveryRecord, Slice},
    secrets::{open_row, seal_row, WEBHOOKS},
    StoreError,
};
use crm_domain::{
    ids::DeliveryId, DeliveryStatus, EventId, EventType, Subscription, Tenant, Timestamp, Webhook,
    WebhookId,
};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    corrupt,
    rows::{mode, opt_ts, ts},
    sql::{Col, PushArg},
    Arg, Secrets, Sql, SqlQuery, Unit,
};

pub const WEBHOOK_COLUMNS: &str =
    "id, mode, url, events, description, enabled, secret, created_at, updated_at, version";

pub const ATTEMPT_COLUMNS: &str = "seq, webhook_id, delivery_id, event_id, event_type, attempt, \
     status, response_status, error, duration_ms, next_attempt_at, created_at";

pub fn event_type(s: &str) -> Result<EventType, StoreError> {
    EventType::parse(s).ok_or_else(|| corrupt("event type"))
}

pub fn status(s: &str) -> Result<DeliveryStatus, StoreError> {
    DeliveryStatus::parse(s).ok_or_else(|| corrupt("delivery status"))
}

/// A subscription as the `events` column holds it: a JSON array of event names.
pub fn events_text(s: &Subscription) -> String {
    serde_json::to_string(&s.names()).unwrap_or_else(|_| "[]".into())
}

/// An `events` column read back.
pub fn subscription(text: &str) -> Result<Subscription, StoreError> {
    let names: Vec<String> = serde_json::from_str(text).map_err(|_| corrupt("webhook events"))?;
    Ok(Subscription::from_stored(&names))
}

pub fn webhook<R: Row>(row: &R, tenant: &Tenant, secrets: &Secrets) -> Result<Webhook, StoreError>
where
    R::Database: Sql,
{
    let id: String = row.col("id")?;
    let secret = open_row(
        secrets,
        tenant,
        WEBHOOKS,
        &id,
        &row.col::<String>("secret")?,
    )?;
    Ok(Webhook {
        id: WebhookId::from_trusted(id),
        mode: mode(row, "mode")?,
        url: row.col("url")?,
        events: subscription(&row.col::<String>("events")?)?,
        description: row.col("description")?,
        enabled: row.col("enabled")?,
        secret,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

fn attempt<R: Row>(row: &R) -> Result<DeliveryAttempt, StoreError>
where
    R::Database: Sql,
{
    Ok(DeliveryAttempt {
        seq: row.col("seq")?,
        webhook_id: WebhookId::from_trusted(row.col("webhook_id")?),
        delivery_id: DeliveryId::from_trusted(row.col("delivery_id")?),
        event_id: EventId::from_trusted(row.col("event_id")?),
        event_type: event_type(&row.col::<String>("event_type")?)?,
        attempt: row.col::<i32>("attempt")?.max(0) as u32,
        status: status(&row.col::<String>("status")?)?,
        response_status: row.col::<Option<i32>>("response_status")?.map(|s| s as u16),
        error: row.col("error")?,
        duration_ms: row.col::<i64>("duration_ms")?.max(0) as u64,
        next_attempt_at: opt_ts(row, "next_attempt_at")?,
        created_at: ts(row, "created_at")?,
    })
}

/// A webhook's id and settings with its sealed secret, `$3` to `$8`, as its insert and its
/// update take them.
fn bind_webhook<'q, DB: Sql>(
    q: SqlQuery<'q, DB>,
    w: &'q Webhook,
    sealed_secret: String,
) -> SqlQuery<'q, DB> {
    q.arg(w.id.as_str())
        .arg(w.url.as_str())
        .arg(events_text(&w.events))
        .arg(w.description.as_deref())
        .arg(w.enabled)
        .arg(sealed_secret)
}

pub async fn insert_webhook<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    w: &Webhook,
) -> Result<(), StoreError> {
    let secret = seal_row(tx.secret_box(), tenant, WEBHOOKS, w.id.as_str(), &w.secret)?;
    let q = tenant_query::<U::Db>(
        "INSERT INTO webhooks (workspace_id, mode, id, url, events, description, enabled, secret, created_at, updated_at, version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        tenant,
    );
    let q = bind_webhook(q, w, secret)
        .arg(w.created_at.millis())
        .arg(w.updated_at.millis())
        .arg(w.version);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_webhook<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &WebhookId,
) -> Result<Option<Webhook>, StoreError> {
    let sql = format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let secrets = tx.secret_box().clone();
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, |r| webhook(r, tenant, &secrets)).await
}

pub async fn list_webhooks<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Webhook>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    let secrets = tx.secret_box().clone();
    tx.all_built(&mut qb, |r| webhook(r, tenant, &secrets))
        .await
}

pub async fn update_webhook<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    w: &Webhook,
) -> Result<(), StoreError> {
    let secret = seal_row(tx.secret_box(), tenant, WEBHOOKS, w.id.as_str(), &w.secret)?;
    let q = tenant_query::<U::Db>(
        "UPDATE webhooks SET url = $4, events = $5, description = $6, enabled = $7, secret = $8, updated_at = $9, version = $10
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $10 - 1",
        tenant,
    );
    let q = bind_webhook(q, w, secret)
        .arg(w.updated_at.millis())
        .arg(w.version);
    match tx.execute(q).await? {
        1 => Ok(()),
        _ => Err(StoreError::Stale),
    }
}

/// The webhook with its deliveries and their attempts.
pub async fn delete_webhook<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &WebhookId,
) -> Result<bool, StoreError> {
    for table in ["webhook_delivery_attempts", "webhook_deliveries"] {
        let sql = format!(
            "DELETE FROM {table} WHERE workspace_id = $1 AND mode = $2 AND webhook_id = $3"
        );
        tx.execute(tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()))
            .await?;
    }
    let q = tenant_query::<U::Db>(
        "DELETE FROM webhooks WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn get_delivery<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    webhook_id: &WebhookId,
    id: &DeliveryId,
) -> Result<Option<DeliveryRecord>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT id, webhook_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at
         FROM webhook_deliveries WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND webhook_id = $4",
        tenant,
    )
    .arg(id.as_str())
    .arg(webhook_id.as_str());
    tx.optional(q, |r| {
        Ok(DeliveryRecord {
            id: DeliveryId::from_trusted(r.col("id")?),
            webhook_id: WebhookId::from_trusted(r.col("webhook_id")?),
            event_id: EventId::from_trusted(r.col("event_id")?),
            event_type: event_type(&r.col::<String>("event_type")?)?,
            status: status(&r.col::<String>("status")?)?,
            attempts: r.col::<i32>("attempts")?.max(0) as u32,
            next_attempt_at: ts(r, "next_attempt_at")?,
            created_at: ts(r, "created_at")?,
            updated_at: ts(r, "updated_at")?,
        })
    })
    .await
}

pub async fn requeue_dead_delivery<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    webhook_id: &WebhookId,
    id: &DeliveryId,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $5, claim_token = NULL, updated_at = $5
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND webhook_id = $4 AND status = 'dead_lettered'",
        tenant,
    )
    .arg(id.as_str())
    .arg(webhook_id.as_str())
    .arg(now.millis());
    Ok(tx.execute(q).await? == 1)
}

pub async fn list_delivery_attempts<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    webhook_id: &WebhookId,
    slice: &Slice,
) -> Result<Vec<DeliveryAttempt>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT {ATTEMPT_COLUMNS} FROM webhook_delivery_attempts"
    ));
    tenant_where(&mut qb, tenant);
    qb.push(" AND webhook_id = ").push_arg(webhook_id.as_str());
    if let Some(before) = &slice.before {
        qb.push(" AND seq < ").push_arg(before.as_str());
    }
    qb.push(" ORDER BY seq DESC LIMIT ")
        .push_arg(i64::from(slice.limit));
    tx.all_built(&mut qb, attempt).await
}

/// `impl WebhookRepo for $tx` with the statements above, and the store's own methods (fan-out,
/// claims, attempts) in the braces.
#[macro_export]
macro_rules! impl_webhook_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::WebhookRepo, $tx, webhooks, [
            fn insert_webhook(tenant: &$crate::reexport::Tenant, w: &$crate::reexport::Webhook) -> Result<(), $crate::reexport::StoreError>;
            fn get_webhook(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::WebhookId) -> Result<Option<$crate::reexport::Webhook>, $crate::reexport::StoreError>;
            fn list_webhooks(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Webhook>, $crate::reexport::StoreError>;
            fn update_webhook(tenant: &$crate::reexport::Tenant, w: &$crate::reexport::Webhook) -> Result<(), $crate::reexport::StoreError>;
            fn delete_webhook(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::WebhookId) -> Result<bool, $crate::reexport::StoreError>;
            fn get_delivery(tenant: &$crate::reexport::Tenant, webhook_id: &$crate::reexport::WebhookId, id: &$crate::reexport::DeliveryId) -> Result<Option<$crate::reexport::DeliveryRecord>, $crate::reexport::StoreError>;
            fn requeue_dead_delivery(tenant: &$crate::reexport::Tenant, webhook_id: &$crate::reexport::WebhookId, id: &$crate::reexport::DeliveryId, now: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn list_delivery_attempts(tenant: &$crate::reexport::Tenant, webhook_id: &$crate::reexport::WebhookId, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::DeliveryAttempt>, $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
