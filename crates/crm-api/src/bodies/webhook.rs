//! Webhook bodies: the webhook (with its secret once), its delivery attempts and deliveries.

use crm_app::ports::{DeliveryAttempt, DeliveryRecord};
use crm_domain::Webhook;
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts, versioned};

/// A webhook as the API returns it. The secret is not part of it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Webhook")]
pub struct WebhookBody {
    /// `wh_` prefix.
    pub id: String,
    /// Always `webhook`.
    pub object: &'static str,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    /// `test` or `live`: the webhook receives only events of its own mode.
    pub mode: &'static str,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(WebhookBody);

impl From<&Webhook> for WebhookBody {
    fn from(w: &Webhook) -> Self {
        WebhookBody {
            id: w.id.as_str().to_owned(),
            object: "webhook",
            url: w.url.clone(),
            events: w.events.names(),
            description: w.description.clone(),
            enabled: w.enabled,
            mode: w.mode.as_str(),
            created_at: ts(w.created_at),
            updated_at: ts(w.updated_at),
            version: w.version,
        }
    }
}

/// A webhook just created, or whose secret was rolled, with its signing secret: shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "WebhookWithSecret")]
pub struct WebhookWithSecretBody {
    #[serde(flatten)]
    pub webhook: WebhookBody,
    /// `whsec_` + base64 of 24 random bytes. `Svc-Signature` is keyed with this whole string;
    /// the Standard Webhooks `webhook-signature` with the base64-decoded part after `whsec_`.
    pub secret: String,
}

impl super::Versioned for WebhookWithSecretBody {
    fn version(&self) -> i64 {
        self.webhook.version
    }
}

impl From<&Webhook> for WebhookWithSecretBody {
    fn from(w: &Webhook) -> Self {
        WebhookWithSecretBody {
            webhook: w.into(),
            secret: w.secret.clone(),
        }
    }
}

/// One attempt to deliver an event.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "DeliveryAttempt")]
pub struct DeliveryAttemptBody {
    /// Always `webhook_delivery_attempt`.
    pub object: &'static str,
    /// `dlv_` prefix: the `Svc-Delivery` header, the same on every attempt of the delivery.
    pub delivery_id: String,
    pub event_id: String,
    pub event_type: &'static str,
    /// 1 to 6 (more after a manual retry of a dead-lettered delivery).
    pub attempt: u32,
    /// The delivery's status after this attempt: `succeeded`, `retrying` or `dead_lettered`.
    pub status: &'static str,
    /// The receiver's HTTP status, when it answered.
    pub response_status: Option<u16>,
    /// Why the attempt failed (timeout, refused address, connection error, non-2xx status).
    pub error: Option<String>,
    pub duration_ms: u64,
    /// When the next attempt is due (`retrying` only).
    pub next_attempt_at: Option<String>,
    pub created_at: String,
}

impl From<&DeliveryAttempt> for DeliveryAttemptBody {
    fn from(a: &DeliveryAttempt) -> Self {
        DeliveryAttemptBody {
            object: "webhook_delivery_attempt",
            delivery_id: a.delivery_id.as_str().to_owned(),
            event_id: a.event_id.as_str().to_owned(),
            event_type: a.event_type.as_str(),
            attempt: a.attempt,
            status: a.status.as_str(),
            response_status: a.response_status,
            error: a.error.clone(),
            duration_ms: a.duration_ms,
            next_attempt_at: opt_ts(a.next_attempt_at),
            created_at: ts(a.created_at),
        }
    }
}

/// A delivery queued again by a manual retry.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Delivery")]
pub struct DeliveryBody {
    /// `dlv_` prefix.
    pub id: String,
    /// Always `webhook_delivery`.
    pub object: &'static str,
    pub webhook_id: String,
    pub event_id: String,
    pub event_type: &'static str,
    /// `pending`, `retrying`, `succeeded` or `dead_lettered`.
    pub status: &'static str,
    /// Attempts made so far.
    pub attempts: u32,
    pub next_attempt_at: String,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&DeliveryRecord> for DeliveryBody {
    fn from(d: &DeliveryRecord) -> Self {
        DeliveryBody {
            id: d.id.as_str().to_owned(),
            object: "webhook_delivery",
            webhook_id: d.webhook_id.as_str().to_owned(),
            event_id: d.event_id.as_str().to_owned(),
            event_type: d.event_type.as_str(),
            status: d.status.as_str(),
            attempts: d.attempts,
            next_attempt_at: ts(d.next_attempt_at),
            created_at: ts(d.created_at),
            updated_at: ts(d.updated_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{
        ids::DeliveryId, DeliveryStatus, EventId, EventType, Mode, Subscription, Timestamp,
        WebhookId,
    };
    use serde_json::{json, Value};
    use uuid::Uuid;

    /// The webhook bodies as the handlers rendered them by hand before they had types.
    fn old_render(w: &Webhook) -> Value {
        json!({
            "id": w.id.as_str(),
            "object": "webhook",
            "url": w.url,
            "events": w.events.names(),
            "description": w.description,
            "enabled": w.enabled,
            "mode": w.mode.as_str(),
            "created_at": w.created_at.to_string(),
            "updated_at": w.updated_at.to_string(),
            "version": w.version,
        })
    }

    #[test]
    fn serializes_as_the_handlers_rendered() {
        let w = Webhook {
            id: WebhookId::from_uuid(Uuid::nil()),
            mode: Mode::Test,
            url: "https://example.com/".into(),
            events: Subscription::All,
            description: Some("d".into()),
            enabled: true,
            secret: "whsec_x".into(),
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(1),
            version: 1,
        };
        crate::bodies::assert_same_json(&WebhookBody::from(&w), &old_render(&w));
        let mut with_secret = old_render(&w);
        with_secret["secret"] = Value::from(w.secret.as_str());
        crate::bodies::assert_same_json(&WebhookWithSecretBody::from(&w), &with_secret);
        let a = DeliveryAttempt {
            seq: "x".into(),
            webhook_id: w.id.clone(),
            delivery_id: DeliveryId::from_uuid(Uuid::nil()),
            event_id: EventId::from_uuid(Uuid::nil()),
            event_type: EventType::DealCreated,
            attempt: 1,
            status: DeliveryStatus::Retrying,
            response_status: Some(500),
            error: None,
            duration_ms: 3,
            next_attempt_at: Some(Timestamp::from_millis(2)),
            created_at: Timestamp::from_millis(0),
        };
        let old_attempt = json!({
            "object": "webhook_delivery_attempt",
            "delivery_id": a.delivery_id.as_str(),
            "event_id": a.event_id.as_str(),
            "event_type": a.event_type.as_str(),
            "attempt": a.attempt,
            "status": a.status.as_str(),
            "response_status": a.response_status,
            "error": a.error,
            "duration_ms": a.duration_ms,
            "next_attempt_at": a.next_attempt_at.map(|t| t.to_string()),
            "created_at": a.created_at.to_string(),
        });
        crate::bodies::assert_same_json(&DeliveryAttemptBody::from(&a), &old_attempt);
        let d = DeliveryRecord {
            id: a.delivery_id.clone(),
            webhook_id: w.id.clone(),
            event_id: a.event_id.clone(),
            event_type: a.event_type,
            status: DeliveryStatus::Pending,
            attempts: 6,
            next_attempt_at: Timestamp::from_millis(0),
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
        };
        let old_delivery = json!({
            "id": d.id.as_str(),
            "object": "webhook_delivery",
            "webhook_id": d.webhook_id.as_str(),
            "event_id": d.event_id.as_str(),
            "event_type": d.event_type.as_str(),
            "status": d.status.as_str(),
            "attempts": d.attempts,
            "next_attempt_at": d.next_attempt_at.to_string(),
            "created_at": d.created_at.to_string(),
            "updated_at": d.updated_at.to_string(),
        });
        crate::bodies::assert_same_json(&DeliveryBody::from(&d), &old_delivery);
    }
}
