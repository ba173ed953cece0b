//! Webhooks (spec "Webhook", "Events", decisions §11): the subscription record and its checks,
//! the signing secret, both signatures every delivery carries, the retry schedule, and the
//! states of a delivery.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::{
    error::ValidationError,
    event::EventType,
    ids::{DeliveryId, WebhookId},
    tenant::Mode,
    time::Timestamp,
};

/// Attempts a delivery gets before it is dead-lettered (spec, Limits).
pub const MAX_ATTEMPTS: u32 = 6;
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a secret (base64: 32 characters).
pub const SECRET_BYTES: usize = 24;
pub const MAX_DESCRIPTION_LEN: usize = 500;

/// What a webhook subscribes to: every event, or a set of the five types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    All,
    Only(Vec<EventType>),
}

impl Subscription {
    /// Checks `["*"]` or a non-empty list of event names (duplicates dropped, order kept).
    pub fn parse(names: &[String]) -> Result<Subscription, ValidationError> {
        if names.is_empty() {
            return Err(ValidationError::invalid(
                "events",
                "events must name at least one event type, or be [\"*\"] for all",
            ));
        }
        if names.iter().any(|n| n == "*") {
            if names.len() > 1 {
                return Err(ValidationError::invalid(
                    "events",
                    "\"*\" subscribes to every event and must stand alone",
                ));
            }
            return Ok(Subscription::All);
        }
        let mut types: Vec<EventType> = Vec::with_capacity(names.len());
        for n in names {
            let t = EventType::parse(n).ok_or_else(|| ValidationError::UnknownValue {
                field: "events".into(),
                value: n.clone(),
                valid_options: Self::valid_options(),
            })?;
            if !types.contains(&t) {
                types.push(t);
            }
        }
        Ok(Subscription::Only(types))
    }

    pub fn valid_options() -> Vec<String> {
        std::iter::once("*")
            .chain(EventType::ALL.iter().map(|t| t.as_str()))
            .map(String::from)
            .collect()
    }

    pub fn matches(&self, t: EventType) -> bool {
        match self {
            Subscription::All => true,
            Subscription::Only(types) => types.contains(&t),
        }
    }

    /// The names as the API shows them: `["*"]` or the event types.
    pub fn names(&self) -> Vec<String> {
        match self {
            Subscription::All => vec!["*".into()],
            Subscription::Only(types) => types.iter().map(|t| t.as_str().to_owned()).collect(),
        }
    }

    /// Reads back the stored names (written by [`Subscription::names`]).
    pub fn from_stored(names: &[String]) -> Subscription {
        if names.iter().any(|n| n == "*") {
            Subscription::All
        } else {
            Subscription::Only(names.iter().filter_map(|n| EventType::parse(n)).collect())
        }
    }
}

/// Whether an event of `event_type` reaches a webhook subscribed to `events` (decisions §11,
/// §24): the one rule both the fan-out worker and a dry run apply, among the enabled webhooks of
/// the event's workspace and mode created no later than the event (see [`Webhook::receives`]).
pub fn reaches(events: &Subscription, event_type: EventType) -> bool {
    events.matches(event_type)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub id: WebhookId,
    pub mode: Mode,
    /// As the URL parser normalised it.
    pub url: String,
    pub events: Subscription,
    pub description: Option<String>,
    pub enabled: bool,
    /// `whsec_...`; shown once, at creation (and when rolled).
    pub secret: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

/// A description: trimmed, empty means none, at most 500 characters.
impl Webhook {
    /// Whether an event of `event_type` written at `at` in this webhook's workspace and mode
    /// reaches it: it is enabled, existed by then, and [`reaches`] says so.
    pub fn receives(&self, event_type: EventType, at: Timestamp) -> bool {
        self.enabled && self.created_at <= at && reaches(&self.events, event_type)
    }
}

pub fn check_description(d: Option<String>) -> Result<Option<String>, ValidationError> {
    let d = d.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    if d.as_ref()
        .is_some_and(|s| s.chars().count() > MAX_DESCRIPTION_LEN)
    {
        return Err(ValidationError::invalid(
            "description",
            format!("description is at most {MAX_DESCRIPTION_LEN} characters"),
        ));
    }
    Ok(d)
}

/// `whsec_` + base64 of the random bytes.
pub fn new_secret(random: [u8; SECRET_BYTES]) -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(random))
}

/// The `Svc-Signature` header: `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, keyed with the whole
/// secret string (as Stripe does).
pub fn svc_signature(secret: &str, unix_seconds: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={unix_seconds},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// The Standard Webhooks `webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.t.body">`, keyed
/// with the base64-decoded part of the secret after `whsec_`.
pub fn standard_signature(secret: &str, msg_id: &str, unix_seconds: i64, body: &[u8]) -> String {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| encoded.as_bytes().to_vec());
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Every header of one delivery attempt besides `content-type`.
pub fn delivery_headers(
    secret: &str,
    delivery: &DeliveryId,
    event_type: &str,
    unix_seconds: i64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    vec![
        ("svc-event", event_type.to_owned()),
        ("svc-delivery", delivery.as_str().to_owned()),
        ("svc-signature", svc_signature(secret, unix_seconds, body)),
        ("webhook-id", delivery.as_str().to_owned()),
        ("webhook-timestamp", unix_seconds.to_string()),
        (
            "webhook-signature",
            standard_signature(secret, delivery.as_str(), unix_seconds, body),
        ),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    Pending,
    Retrying,
    Succeeded,
    DeadLettered,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Retrying => "retrying",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::DeadLettered => "dead_lettered",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        [
            DeliveryStatus::Pending,
            DeliveryStatus::Retrying,
            DeliveryStatus::Succeeded,
            DeliveryStatus::DeadLettered,
        ]
        .into_iter()
        .find(|d| d.as_str() == s)
    }
}

/// The waits between attempts: after attempt 1 the first, ..., after attempt 5 the fifth (a
/// shorter list repeats its last entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    delays_ms: Vec<i64>,
}

impl Default for Backoff {
    /// 1 min, 5 min, 30 min, 2 h, 6 h.
    fn default() -> Self {
        Backoff {
            delays_ms: vec![60_000, 300_000, 1_800_000, 7_200_000, 21_600_000],
        }
    }
}

/// A duration such as `250ms`, `1s`, `5m`, `2h` (a bare number is seconds), in milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, factor) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3_600_000)
    } else {
        (s, 1_000)
    };
    let n: i64 = num.trim().parse().ok()?;
    (n >= 0).then(|| n.checked_mul(factor)).flatten()
}

impl Backoff {
    /// Parses `CRM_WEBHOOK_BACKOFF`: 1 to 5 comma-separated durations, e.g. `1s,1s,1s,1s,1s`.
    pub fn parse(s: &str) -> Result<Backoff, String> {
        let delays: Option<Vec<i64>> = s.split(',').map(parse_duration_ms).collect();
        match delays {
            Some(d) if !d.is_empty() && d.len() < MAX_ATTEMPTS as usize => Ok(Backoff { delays_ms: d }),
            _ => Err(format!(
                "`{s}` is not a backoff schedule: give 1 to {} comma-separated durations such as 1m,5m,30m,2h,6h (units ms, s, m, h)",
                MAX_ATTEMPTS - 1
            )),
        }
    }

    /// The wait after failed attempt `attempt` (1-based), before jitter.
    pub fn delay_ms(&self, attempt: u32) -> i64 {
        let i = (attempt.max(1) as usize - 1).min(self.delays_ms.len() - 1);
        self.delays_ms[i]
    }
}

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextStep {
    pub status: DeliveryStatus,
    /// When to try again (`Retrying` only).
    pub next_attempt_at: Option<Timestamp>,
}

/// The state after attempt number `attempt` (1-based) ended at `now`. `jitter` in `[0, 1)` adds
/// up to 10 % to the wait. An attempt beyond the sixth (a manual retry of a dead-lettered
/// delivery) that fails is dead-lettered again.
pub fn after_attempt(
    attempt: u32,
    succeeded: bool,
    now: Timestamp,
    backoff: &Backoff,
    jitter: f64,
) -> NextStep {
    if succeeded {
        return NextStep {
            status: DeliveryStatus::Succeeded,
            next_attempt_at: None,
        };
    }
    if attempt >= MAX_ATTEMPTS {
        return NextStep {
            status: DeliveryStatus::DeadLettered,
            next_attempt_at: None,
        };
    }
    let base = backoff.delay_ms(attempt);
    let extra = (base as f64 * 0.1 * jitter.clamp(0.0, 0.999_999)) as i64;
    NextStep {
        status: DeliveryStatus::Retrying,
        next_attempt_at: Some(now.plus_millis(base + extra)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn subscriptions_accept_the_five_types_or_star() {
        let s =
            |v: &[&str]| Subscription::parse(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["*"]).unwrap(), Subscription::All);
        assert_eq!(
            s(&["deal.created", "deal.created"]).unwrap(),
            Subscription::Only(vec![EventType::DealCreated])
        );
        match s(&["deal.created", "deal.deleted"]).unwrap_err() {
            ValidationError::UnknownValue {
                field,
                value,
                valid_options,
            } => {
                assert_eq!((field.as_str(), value.as_str()), ("events", "deal.deleted"));
                assert_eq!(valid_options.len(), 6);
            }
            other => panic!("{other:?}"),
        }
        assert!(s(&[]).is_err());
        assert!(s(&["*", "deal.created"]).is_err());
        assert!(Subscription::All.matches(EventType::ContactUpdated));
        assert!(!s(&["contact.created"])
            .unwrap()
            .matches(EventType::ContactUpdated));
        let only = s(&["contact.updated", "deal.stage_changed"]).unwrap();
        assert_eq!(Subscription::from_stored(&only.names()), only);
    }

    #[test]
    fn secrets_are_whsec_and_32_base64_characters() {
        let s = new_secret([7; SECRET_BYTES]);
        assert!(s.starts_with("whsec_"));
        assert_eq!(s.len(), 6 + 32);
        assert_eq!(STANDARD.decode(&s[6..]).unwrap(), vec![7; SECRET_BYTES]);
    }

    #[test]
    fn svc_signature_matches_a_known_vector() {
        // printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'whsec_test'
        let sig = svc_signature("whsec_test", 1_700_000_000, br#"{"a":1}"#);
        let mut mac = Hmac::<Sha256>::new_from_slice(b"whsec_test").unwrap();
        mac.update(br#"1700000000.{"a":1}"#);
        assert_eq!(
            sig,
            format!(
                "t=1700000000,v1={}",
                hex::encode(mac.finalize().into_bytes())
            )
        );
    }

    #[test]
    fn standard_signature_matches_the_spec_example() {
        // The example of the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = standard_signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn backoff_follows_the_schedule_then_dead_letters() {
        let b = Backoff::default();
        let now = Timestamp::from_millis(0);
        let waits: Vec<i64> = (1..=5)
            .map(|a| {
                after_attempt(a, false, now, &b, 0.0)
                    .next_attempt_at
                    .unwrap()
                    .millis()
            })
            .collect();
        assert_eq!(
            waits,
            vec![60_000, 300_000, 1_800_000, 7_200_000, 21_600_000]
        );
        assert_eq!(
            after_attempt(6, false, now, &b, 0.5).status,
            DeliveryStatus::DeadLettered
        );
        assert_eq!(
            after_attempt(7, false, now, &b, 0.5).status,
            DeliveryStatus::DeadLettered
        );
        assert_eq!(
            after_attempt(6, true, now, &b, 0.5).status,
            DeliveryStatus::Succeeded
        );
        assert_eq!(
            after_attempt(1, false, now, &b, 0.999)
                .next_attempt_at
                .unwrap()
                .millis(),
            65_994
        );
    }

    #[test]
    fn backoff_parses_durations() {
        assert_eq!(Backoff::parse("1s,1s,1s,1s,1s").unwrap().delay_ms(5), 1000);
        let b = Backoff::parse("100ms, 2m").unwrap();
        assert_eq!(
            (b.delay_ms(1), b.delay_ms(2), b.delay_ms(5)),
            (100, 120_000, 120_000)
        );
        assert_eq!(Backoff::parse("1h").unwrap().delay_ms(3), 3_600_000);
        for bad in ["", "1x", "-1s", "1s,1s,1s,1s,1s,1s", "1s,,1s"] {
            assert!(Backoff::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn jitter_stays_within_ten_percent(attempt in 1u32..6, jitter in 0.0f64..1.0, now in 0i64..4_000_000_000_000) {
            let b = Backoff::default();
            let step = after_attempt(attempt, false, Timestamp::from_millis(now), &b, jitter);
            let wait = step.next_attempt_at.unwrap().millis() - now;
            let base = b.delay_ms(attempt);
            prop_assert!(wait >= base && wait < base + base / 10 + 1);
            prop_assert_eq!(step.status, DeliveryStatus::Retrying);
        }
    }
}
