//! Webhooks (spec "Webhook", "Events"; decisions §11): the subscription use cases, and the steps
//! of delivery the worker runs: fan-out of new events into deliveries, claiming due deliveries
//! under a lease, sending one signed attempt, and recording outcomes.

use std::net::IpAddr;

use async_trait::async_trait;
use crm_domain::{
    ids::DeliveryId,
    ssrf::{self, Host, Policy},
    webhook::{
        self, after_attempt, check_description, Backoff, DeliveryStatus, Subscription, Webhook,
        SECRET_BYTES,
    },
    Mode, Tenant, ValidationError, WebhookId,
};
use rand::{Rng, RngCore};

use crm_domain::audit::{changes, secret_changed};
use serde_json::{json, Value};

use crate::{
    audit::Audited,
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{
        AttemptOutcome, ClaimedDelivery, DeliveryAttempt, DeliveryRecord, NewDelivery, StoreError,
        Tx,
    },
    App,
};

const LIST: &str = "webhooks";

/// What the audit log shows of a webhook; its secret only as redacted.
fn audit_shape(w: &Webhook) -> Value {
    json!({
        "url": w.url,
        "events": w.events.names(),
        "description": w.description,
        "enabled": w.enabled,
        "secret": w.secret,
    })
}
const ATTEMPTS_LIST: &str = "webhook_deliveries";

/// One HTTP request of a delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboundRequest {
    pub url: String,
    /// What the URL may reach (the webhook's mode).
    pub policy: Policy,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// The response status, when a response came.
    pub status: Option<u16>,
    /// Why no 2xx came (timeout, refused address, connection error, non-2xx status).
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl SendResult {
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// The network as webhooks need it: resolving a host for the registration check, and sending an
/// attempt (which resolves again, checks every address against the policy, connects only to an
/// address that passed, follows no redirect and uses no proxy).
#[async_trait]
pub trait Outbound: Send + Sync {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String>;
    async fn send(&self, request: OutboundRequest) -> SendResult;
}

/// A webhook just created or with a rolled secret: the secret is in it this once.
pub type WebhookWithSecret = Webhook;

/// What `PATCH /webhooks/{id}` may change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebhookPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    /// `Some(None)` clears it.
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
}

pub fn policy_for(mode: Mode) -> Policy {
    match mode {
        Mode::Live => Policy::LIVE,
        Mode::Test => Policy::TEST,
    }
}

fn webhook_id(id: &str) -> Result<WebhookId, AppError> {
    WebhookId::parse(id).map_err(|_| AppError::not_found("webhook", id))
}

fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    webhook::new_secret(bytes)
}

impl App {
    /// Checks a URL for the caller's mode: statically, then (live mode, a name) by resolving it:
    /// a name that does not resolve, or resolves to any blocked address, is refused.
    async fn check_webhook_url(&self, mode: Mode, raw: &str) -> Result<String, AppError> {
        let policy = policy_for(mode);
        let checked =
            ssrf::check_url(raw, policy).map_err(|e| ValidationError::invalid("url", e.detail))?;
        if mode == Mode::Live {
            if let Host::Name(name) = &checked.host {
                let outbound = self.outbound.as_ref().ok_or_else(|| {
                    AppError::Internal("no outbound adapter to resolve webhook hosts".into())
                })?;
                let addrs = outbound.resolve(name, checked.port).await.map_err(|e| {
                    ValidationError::invalid(
                        "url",
                        format!("url: the host {name} does not resolve ({e})"),
                    )
                })?;
                if addrs.is_empty() {
                    return Err(ValidationError::invalid(
                        "url",
                        format!("url: the host {name} does not resolve"),
                    )
                    .into());
                }
                for ip in addrs {
                    if let Err(b) = policy.allows_ip(ip) {
                        return Err(ValidationError::invalid(
                            "url",
                            format!("url: the host {name} resolves to {ip}, {}, which webhooks may not reach", b.describe()),
                        )
                        .into());
                    }
                }
            }
        }
        Ok(checked.url)
    }

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_webhook(
        &self,
        caller: &Caller,
        url: Option<String>,
        events: Option<Vec<String>>,
        description: Option<String>,
    ) -> Result<WebhookWithSecret, AppError> {
        let tenant = &caller.tenant;
        let url = url.ok_or_else(|| ValidationError::invalid("url", "url is required"))?;
        let events = events.ok_or_else(|| {
            ValidationError::invalid(
                "events",
                "events is required: a list of event types, or [\"*\"] for all",
            )
        })?;
        let events = Subscription::parse(&events)?;
        let description = check_description(description)?;
        let url = self.check_webhook_url(tenant.mode, &url).await?;
        let now = self.clock.now();
        let hook = Webhook {
            id: WebhookId::from_uuid(self.ids.new_uuid()),
            mode: tenant.mode,
            url,
            events,
            description,
            enabled: true,
            secret: new_secret(),
            created_at: now,
            updated_at: now,
            version: 1,
        };
        let mut tx = self.store.begin_write().await?;
        tx.insert_webhook(tenant, &hook).await?;
        let diff = changes(None, Some(&audit_shape(&hook)));
        let what = Audited::new("webhook.created", "webhook", hook.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(hook)
    }

    pub async fn list_webhooks(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Webhook>, AppError> {
        let slice = slice_for(&page, &caller.tenant, LIST, "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_webhooks(&caller.tenant, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, LIST, "", |w| {
            w.id.to_string()
        }))
    }

    /// Every webhook of the tenant, read in `tx` (a dry run's: one it creates counts too).
    pub(crate) async fn all_webhooks(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
    ) -> Result<Vec<Webhook>, AppError> {
        const PAGE: u32 = 100;
        let mut all: Vec<Webhook> = Vec::new();
        loop {
            let slice = crate::ports::Slice {
                before: all.last().map(|w| w.id.to_string()),
                limit: PAGE,
            };
            let rows = tx.list_webhooks(tenant, &slice).await?;
            let done = rows.len() < PAGE as usize;
            all.extend(rows);
            if done {
                return Ok(all);
            }
        }
    }

    pub async fn get_webhook(&self, caller: &Caller, id: &str) -> Result<Webhook, AppError> {
        let id = webhook_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_webhook(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("webhook", id.as_str()))
    }

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_webhook(
        &self,
        caller: &Caller,
        id: &str,
        patch: WebhookPatch,
        expected_version: Option<i64>,
    ) -> Result<Webhook, AppError> {
        let tenant = &caller.tenant;
        let id = webhook_id(id)?;
        // Validate (and resolve) before opening the write transaction: no network under a lock.
        let url = match patch.url {
            Some(u) => Some(self.check_webhook_url(tenant.mode, &u).await?),
            None => None,
        };
        let events = patch
            .events
            .as_deref()
            .map(Subscription::parse)
            .transpose()?;
        let description = patch.description.map(check_description).transpose()?;
        let mut tx = self.store.begin_write().await?;
        let mut hook = tx
            .get_webhook(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("webhook", id.as_str()))?;
        if expected_version.is_some_and(|v| v != hook.version) {
            return Err(AppError::VersionConflict {
                current: hook.version,
            });
        }
        let before = hook.clone();
        if let Some(u) = url {
            hook.url = u;
        }
        if let Some(e) = events {
            hook.events = e;
        }
        if let Some(d) = description {
            hook.description = d;
        }
        if let Some(e) = patch.enabled {
            hook.enabled = e;
        }
        if hook == before {
            return Ok(hook);
        }
        hook.version += 1;
        hook.updated_at = self.clock.now();
        match tx.update_webhook(tenant, &hook).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: hook.version - 1,
                })
            }
            other => other?,
        }
        let diff = changes(Some(&audit_shape(&before)), Some(&audit_shape(&hook)));
        let what = Audited::new("webhook.updated", "webhook", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(hook)
    }

    /// Deletes a webhook for good, with its deliveries.
    pub async fn delete_webhook(&self, caller: &Caller, id: &str) -> Result<WebhookId, AppError> {
        let id = webhook_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let before = tx.get_webhook(&caller.tenant, &id).await?;
        if !tx.delete_webhook(&caller.tenant, &id).await? {
            return Err(AppError::not_found("webhook", id.as_str()));
        }
        let diff = changes(before.as_ref().map(audit_shape).as_ref(), None);
        let what = Audited::new("webhook.deleted", "webhook", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// A new secret, returned this once; deliveries from now on are signed with it.
    pub async fn roll_webhook_secret(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<WebhookWithSecret, AppError> {
        let tenant = &caller.tenant;
        let id = webhook_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut hook = tx
            .get_webhook(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("webhook", id.as_str()))?;
        hook.secret = new_secret();
        hook.version += 1;
        hook.updated_at = self.clock.now();
        tx.update_webhook(tenant, &hook).await?;
        let what = Audited::new(
            "webhook.secret_rolled",
            "webhook",
            id.as_str(),
            vec![secret_changed("secret")],
        );
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(hook)
    }

    /// Every attempt of the webhook's deliveries, newest first.
    pub async fn list_webhook_deliveries(
        &self,
        caller: &Caller,
        id: &str,
        page: PageParams,
    ) -> Result<Page<DeliveryAttempt>, AppError> {
        let id = webhook_id(id)?;
        let slice = slice_for(&page, &caller.tenant, ATTEMPTS_LIST, id.as_str())?;
        let mut tx = self.store.begin_read().await?;
        if tx.get_webhook(&caller.tenant, &id).await?.is_none() {
            return Err(AppError::not_found("webhook", id.as_str()));
        }
        let rows = tx
            .list_delivery_attempts(&caller.tenant, &id, &slice)
            .await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            ATTEMPTS_LIST,
            id.as_str(),
            |a| a.seq.clone(),
        ))
    }

    /// Sends a dead-lettered delivery again, now (one more attempt; failing, it is dead-lettered
    /// again). Any other status: 409 `conflict`.
    pub async fn retry_webhook_delivery(
        &self,
        caller: &Caller,
        id: &str,
        delivery: &str,
    ) -> Result<DeliveryRecord, AppError> {
        let tenant = &caller.tenant;
        let id = webhook_id(id)?;
        let dlv = DeliveryId::parse(delivery)
            .map_err(|_| AppError::not_found("webhook delivery", delivery))?;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        if tx.get_webhook(tenant, &id).await?.is_none() {
            return Err(AppError::not_found("webhook", id.as_str()));
        }
        let record = tx
            .get_delivery(tenant, &id, &dlv)
            .await?
            .ok_or_else(|| AppError::not_found("webhook delivery", dlv.as_str()))?;
        if !tx.requeue_dead_delivery(tenant, &id, &dlv, now).await? {
            return Err(AppError::Conflict {
                detail: format!(
                    "delivery {} is {}; only a dead_lettered delivery can be retried",
                    dlv.as_str(),
                    record.status.as_str()
                ),
                existing: None,
            });
        }
        tx.commit().await?;
        Ok(DeliveryRecord {
            status: DeliveryStatus::Pending,
            next_attempt_at: now,
            updated_at: now,
            ..record
        })
    }

    // ---- the worker's steps ----

    /// Turns up to `limit` undispatched events into deliveries, in one transaction; returns how
    /// many events it took (0: nothing to do) and how many deliveries it made of them.
    pub async fn dispatch_events(&self, limit: u32) -> Result<Dispatched, AppError> {
        let mut tx = self.store.begin_write().await?;
        let rows = tx.take_events_to_dispatch(limit).await?;
        if rows.is_empty() {
            return Ok(Dispatched::default());
        }
        let now = self.clock.now();
        let mut events: Vec<(Tenant, crm_domain::EventId)> = Vec::new();
        let mut deliveries = Vec::new();
        for row in rows {
            if events
                .last()
                .is_none_or(|(t, e)| *t != row.tenant || *e != row.event_id)
            {
                events.push((row.tenant.clone(), row.event_id.clone()));
            }
            if let Some((webhook_id, subscription)) = row.webhook {
                if webhook::reaches(&subscription, row.event_type) {
                    deliveries.push(NewDelivery {
                        tenant: row.tenant,
                        id: DeliveryId::from_uuid(self.ids.new_uuid()),
                        webhook_id,
                        event_id: row.event_id,
                        event_type: row.event_type,
                        created_at: now,
                    });
                }
            }
        }
        if !deliveries.is_empty() {
            tx.insert_deliveries(&deliveries).await?;
        }
        tx.mark_events_dispatched(&events).await?;
        tx.commit().await?;
        Ok(Dispatched {
            events: events.len(),
            deliveries: deliveries.len(),
        })
    }

    /// Claims up to `limit` due deliveries for `lease_ms`.
    pub async fn claim_deliveries(
        &self,
        limit: u32,
        lease_ms: i64,
    ) -> Result<Vec<ClaimedDelivery>, AppError> {
        let now = self.clock.now();
        let token = crm_domain::encode_uuid(self.ids.new_uuid());
        let mut tx = self.store.begin_write().await?;
        let claimed = tx
            .claim_deliveries(now, now.plus_millis(lease_ms), &token, limit)
            .await?;
        // Committed even when nothing was handed out: deliveries of disabled webhooks were parked.
        tx.commit().await?;
        Ok(claimed)
    }

    /// Sends one attempt of a claimed delivery (signed now) and says what follows it.
    pub async fn attempt_delivery(
        &self,
        outbound: &dyn Outbound,
        claimed: ClaimedDelivery,
        backoff: &Backoff,
    ) -> AttemptOutcome {
        let body = claimed.body.into_bytes();
        let headers = webhook::delivery_headers(
            &claimed.secret,
            &claimed.id,
            claimed.event_type.as_str(),
            self.clock.now().unix_seconds(),
            &body,
        );
        let request = OutboundRequest {
            url: claimed.url,
            policy: policy_for(claimed.tenant.mode),
            headers,
            body,
        };
        let result = outbound.send(request).await;
        let attempt = claimed.attempts + 1;
        let now = self.clock.now();
        let jitter: f64 = rand::thread_rng().gen_range(0.0..1.0);
        let step = after_attempt(attempt, result.succeeded(), now, backoff, jitter);
        let error = match (&result.error, result.status) {
            (Some(e), _) => Some(e.clone()),
            (None, Some(s)) if !result.succeeded() => Some(format!("the endpoint answered {s}")),
            _ => None,
        };
        AttemptOutcome {
            tenant: claimed.tenant,
            delivery_id: claimed.id.clone(),
            claim_token: claimed.claim_token,
            status: step.status,
            next_attempt_at: step.next_attempt_at,
            attempt: DeliveryAttempt {
                seq: crm_domain::encode_uuid(self.ids.new_uuid()),
                webhook_id: claimed.webhook_id,
                delivery_id: claimed.id,
                event_id: claimed.event_id,
                event_type: claimed.event_type,
                attempt,
                status: step.status,
                response_status: result.status,
                error,
                duration_ms: result.duration_ms,
                next_attempt_at: step.next_attempt_at,
                created_at: now,
            },
        }
    }

    /// Records a batch of outcomes in one transaction; returns how many still held their claim.
    pub async fn record_attempts(&self, outcomes: &[AttemptOutcome]) -> Result<u64, AppError> {
        if outcomes.is_empty() {
            return Ok(0);
        }
        let mut tx = self.store.begin_write().await?;
        let n = tx.record_attempts(outcomes).await?;
        tx.commit().await?;
        Ok(n)
    }
}

/// What one fan-out transaction did ([`App::dispatch_events`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dispatched {
    /// Events taken from the queue.
    pub events: usize,
    /// Deliveries made of them (none when no webhook matched).
    pub deliveries: usize,
}
