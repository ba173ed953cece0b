//! Webhooks: subscriptions, fan-out of events into deliveries, claimed delivery.

use async_trait::async_trait;
use crm_domain::{
    ids::DeliveryId, DeliveryStatus, EventId, EventType, Subscription, Tenant, Timestamp, Webhook,
    WebhookId,
};

use super::{Slice, StoreError};

/// An event waiting for fan-out, with one enabled webhook of its tenant created no later than
/// it (or `None` when its tenant has none: the event is still marked dispatched).
#[derive(Debug, Clone, PartialEq)]
pub struct FanOutRow {
    pub tenant: Tenant,
    pub event_id: EventId,
    pub event_type: EventType,
    pub webhook: Option<(WebhookId, Subscription)>,
}

/// A delivery to create: one per (event, webhook).
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    pub tenant: Tenant,
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub created_at: Timestamp,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub status: DeliveryStatus,
    /// Attempts recorded so far.
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A delivery claimed by a worker, with what sending it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedDelivery {
    pub tenant: Tenant,
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: EventType,
    /// Attempts recorded before this one.
    pub attempts: u32,
    pub url: String,
    pub secret: String,
    /// The event as stored (its snapshot JSON): the exact body to send.
    pub body: String,
    pub claim_token: String,
}

/// One attempt, logged; the `status` is the delivery's after it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryAttempt {
    /// Orders the log (time-ordered, unique).
    pub seq: String,
    pub webhook_id: WebhookId,
    pub delivery_id: DeliveryId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub attempt: u32,
    pub status: DeliveryStatus,
    pub response_status: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// The outcome of an attempt on a claimed delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptOutcome {
    pub tenant: Tenant,
    pub delivery_id: DeliveryId,
    pub claim_token: String,
    /// The delivery's new state; `next_attempt_at` is when it comes due again (`Retrying`).
    pub status: DeliveryStatus,
    pub next_attempt_at: Option<Timestamp>,
    pub attempt: DeliveryAttempt,
}

#[async_trait]
pub trait WebhookRepo {
    async fn insert_webhook(
        &mut self,
        tenant: &Tenant,
        webhook: &Webhook,
    ) -> Result<(), StoreError>;
    async fn get_webhook(
        &mut self,
        tenant: &Tenant,
        id: &WebhookId,
    ) -> Result<Option<Webhook>, StoreError>;
    /// Newest first.
    async fn list_webhooks(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Webhook>, StoreError>;
    /// Writes url, events, description, enabled, secret, updated_at and version; `Stale` unless
    /// the row is at `version - 1`.
    async fn update_webhook(
        &mut self,
        tenant: &Tenant,
        webhook: &Webhook,
    ) -> Result<(), StoreError>;
    /// Deletes the webhook with its deliveries and their attempts; returns whether it existed.
    async fn delete_webhook(&mut self, tenant: &Tenant, id: &WebhookId)
        -> Result<bool, StoreError>;

    /// Takes up to `limit` undispatched events of every tenant, oldest first, and locks them
    /// (`FOR UPDATE SKIP LOCKED` on Postgres: concurrent dispatchers take disjoint batches).
    /// Returns one row per (event, enabled webhook of its tenant and mode created no later than
    /// the event), and one row with `webhook: None` for an event that has no such webhook. Write
    /// transactions only.
    async fn take_events_to_dispatch(&mut self, limit: u32) -> Result<Vec<FanOutRow>, StoreError>;
    /// Inserts the deliveries (status `pending`, due at their `created_at`) in one statement,
    /// skipping any (event, webhook) pair that already has one; returns how many were inserted.
    async fn insert_deliveries(&mut self, deliveries: &[NewDelivery]) -> Result<u64, StoreError>;
    /// Marks events as dispatched: `take_events_to_dispatch` returns them no more.
    async fn mark_events_dispatched(
        &mut self,
        events: &[(Tenant, EventId)],
    ) -> Result<(), StoreError>;

    /// Claims up to `limit` deliveries of enabled webhooks due by `now` (pending or retrying),
    /// earliest due first: each gets `claim_token` and comes due again at `lease_until`, so a
    /// claim that is never recorded expires and the delivery is claimed again. Two concurrent
    /// claims never return the same delivery (`FOR UPDATE SKIP LOCKED` on Postgres; the single
    /// writer on SQLite). Write transactions only.
    async fn claim_deliveries(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError>;
    /// Records attempts: for each outcome whose delivery still holds its `claim_token`, sets
    /// status, `attempts` (= the attempt's number), `next_attempt_at` (the attempt's end when
    /// none) and clears the token, and logs the attempt. Outcomes whose claim was lost (lease
    /// expired and re-claimed) are skipped, and so are outcomes whose attempt names another
    /// webhook or event than its delivery's. Returns how many were recorded.
    async fn record_attempts(&mut self, outcomes: &[AttemptOutcome]) -> Result<u64, StoreError>;
    async fn get_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
    ) -> Result<Option<DeliveryRecord>, StoreError>;
    /// Makes a dead-lettered delivery pending again, due at `now`; returns whether it was
    /// dead-lettered (otherwise nothing changes).
    async fn requeue_dead_delivery(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The webhook's attempt log, newest first (`before` is a `seq`).
    async fn list_delivery_attempts(
        &mut self,
        tenant: &Tenant,
        webhook_id: &WebhookId,
        slice: &Slice,
    ) -> Result<Vec<DeliveryAttempt>, StoreError>;
}
