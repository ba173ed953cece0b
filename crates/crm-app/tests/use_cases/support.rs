//! What every use-case test stands on: an application over a fresh SQLite database, a clock the
//! test moves, and fakes of the infrastructure ports.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc, Mutex,
    },
};

use async_trait::async_trait;
use crm_app::{
    ports::{NoBackground, NoConfigCache, NoOutboxSignal, UsageMeter},
    secrets::{SecretBox, SecretError, SecretSlot},
    views::RecordViews,
    workspaces::Overrides,
    App, Caller, Clock, IdSource, Infrastructure, RateLimiter, RateStatus, StoreError,
};
use crm_domain::{
    condition::Condition,
    rule::{Action, AutomationDef, AutomationDraft},
    sequence::{SequenceDef, SequenceDraft, Step},
    Allowance, ApiKeyId, Period, Plan, Tenant, Timestamp,
};
use serde_json::json;
use uuid::Uuid;

/// A clock that stands still until the test moves it.
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}

pub struct Ids;

impl IdSource for Ids {
    fn new_uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}

/// A limiter that admits every request, with a full budget.
pub struct AdmitAll;

#[async_trait]
impl RateLimiter for AdmitAll {
    async fn acquire(&self, _: &Tenant, per_minute: u32) -> RateStatus {
        full_budget(per_minute)
    }
    fn acquire_now(&self, _: &Tenant, per_minute: u32) -> Option<RateStatus> {
        Some(full_budget(per_minute))
    }
}

pub fn full_budget(per_minute: u32) -> RateStatus {
    RateStatus {
        allowed: true,
        limit: per_minute,
        remaining: per_minute,
        reset_secs: 0,
        retry_after_secs: 0,
    }
}

/// A meter that counts in memory and refuses a capped request once the allowance is used,
/// touching no store.
#[derive(Default)]
pub struct CountingMeter {
    counts: Mutex<HashMap<(Tenant, Timestamp), u64>>,
    touches: Mutex<HashMap<ApiKeyId, Timestamp>>,
}

impl CountingMeter {
    pub fn counted(&self, tenant: &Tenant) -> u64 {
        let counts = self.counts.lock().unwrap();
        counts
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, n)| *n)
            .sum()
    }
}

#[async_trait]
impl UsageMeter for CountingMeter {
    fn count_now(&self, _: &Tenant, _: Period, _: Allowance, _: Timestamp) -> bool {
        false
    }

    async fn count(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        _: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut counts = self.counts.lock().unwrap();
        let used = counts.entry((tenant.clone(), period.start)).or_default();
        if let Allowance::Capped { requests, .. } = allowance {
            if *used >= requests {
                return Ok(false);
            }
        }
        *used += 1;
        Ok(true)
    }

    async fn pending(&self, tenant: &Tenant, period: Period) -> u64 {
        let counts = self.counts.lock().unwrap();
        counts
            .get(&(tenant.clone(), period.start))
            .copied()
            .unwrap_or(0)
    }

    fn touch(&self, _: &Tenant, key: &ApiKeyId, at: Timestamp) {
        self.touches.lock().unwrap().insert(key.clone(), at);
    }

    fn pending_touch(&self, key: &ApiKeyId) -> Option<Timestamp> {
        self.touches.lock().unwrap().get(key).copied()
    }

    async fn flush(&self, _: bool) {}
}

/// A secret box that marks what it seals without hiding it: enough for the stores' row layer,
/// which the use cases never see past.
#[derive(Debug)]
struct MarkedBox;

impl SecretBox for MarkedBox {
    fn seal(&self, _: &SecretSlot<'_>, plaintext: &str) -> Result<String, SecretError> {
        Ok(format!("sealed:{plaintext}"))
    }
    fn open(&self, _: &SecretSlot<'_>, sealed: &str) -> Result<String, SecretError> {
        Ok(sealed.strip_prefix("sealed:").unwrap_or(sealed).to_owned())
    }
    fn key_ids(&self) -> Vec<String> {
        vec!["test".into()]
    }
    fn key_id_of(&self, sealed: &str) -> Option<String> {
        sealed.starts_with("sealed:").then(|| "test".into())
    }
}

/// An application on a fresh database, with the callers of one workspace's two keys.
pub struct Env {
    pub app: App,
    pub clock: Arc<ManualClock>,
    pub meter: Arc<CountingMeter>,
    /// The workspace's test-mode caller (every scope).
    pub caller: Caller,
    /// The same workspace's live-mode caller.
    pub live: Caller,
    pub test_key: String,
    dir: PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// [`env_with`] a limiter that admits everything, on the free plan.
pub async fn env() -> Env {
    env_with(Arc::new(AdmitAll), Plan::Free, Overrides::default()).await
}

pub async fn env_with(limiter: Arc<dyn RateLimiter>, plan: Plan, overrides: Overrides) -> Env {
    let dir = std::env::temp_dir().join(format!("crm-app-use-case-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("crm.db").display());
    let store = crm_store_sqlite::SqliteStore::connect(&url)
        .await
        .unwrap()
        .with_secrets(Arc::new(MarkedBox));
    store.migrate().await.unwrap();
    let clock = Arc::new(ManualClock(AtomicI64::new(1_800_000_000_000)));
    let meter = Arc::new(CountingMeter::default());
    let infrastructure = Infrastructure {
        config: Arc::new(NoConfigCache),
        meter: meter.clone(),
        limiter,
        outbox: Arc::new(NoOutboxSignal),
        background: Arc::new(NoBackground),
    };
    let app = App::new(
        Arc::new(store),
        clock.clone(),
        Arc::new(Ids),
        Arc::new(Views),
        infrastructure,
    );
    let created = app.create_workspace("w", plan, overrides).await.unwrap();
    let caller = app
        .authenticate(Some(&format!("Bearer {}", created.test_key)))
        .await
        .unwrap();
    let live = app
        .authenticate(Some(&format!("Bearer {}", created.live_key)))
        .await
        .unwrap();
    Env {
        app,
        clock,
        meter,
        caller,
        live,
        test_key: created.test_key,
        dir,
    }
}

/// A contact draft with a first name and an email.
pub fn person(first_name: &str, email: &str) -> crm_domain::ContactDraft {
    crm_domain::ContactDraft {
        first_name: Some(first_name.into()),
        email: Some(email.into()),
        ..Default::default()
    }
}

impl Env {
    /// The time on the test's clock.
    pub fn clock_now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// Records as a reader sees them, enough for conditions, merge tags and replays: the fields by
/// the names the API gives them (crm-api's bodies are the real views; this crate cannot see them).
pub struct Views;

fn ts(t: crm_domain::Timestamp) -> serde_json::Value {
    serde_json::Value::from(t.to_string())
}

impl RecordViews for Views {
    fn contact(&self, c: &crm_domain::Contact) -> serde_json::Value {
        serde_json::json!({
            "id": c.id.as_str(), "object": "contact",
            "first_name": c.first_name, "last_name": c.last_name,
            "email": c.email.as_ref().map(|e| e.as_str().to_owned()),
            "phone": c.phone, "linkedin_url": c.linkedin_url,
            "company_id": c.company_id.as_ref().map(|id| id.as_str().to_owned()),
            "type": c.contact_type, "owner_id": c.owner_id.as_ref().map(|id| id.as_str().to_owned()),
            "custom_fields": c.custom_fields,
            "created_at": ts(c.created_at), "updated_at": ts(c.updated_at),
            "version": c.version,
        })
    }

    fn company(&self, c: &crm_domain::Company) -> serde_json::Value {
        serde_json::json!({
            "id": c.id.as_str(), "object": "company", "name": c.name, "domain": c.domain,
            "owner_id": c.owner_id.as_ref().map(|id| id.as_str().to_owned()),
            "custom_fields": c.custom_fields, "version": c.version,
        })
    }

    fn deal(&self, d: &crm_domain::Deal) -> serde_json::Value {
        serde_json::json!({
            "id": d.id.as_str(), "object": "deal", "title": d.title,
            "pipeline": d.pipeline_key, "pipeline_id": d.pipeline_id.as_str(),
            "stage": d.stage, "stage_type": d.stage_type.as_str(),
            "company_id": d.company_id.as_ref().map(|id| id.as_str().to_owned()),
            "value_cents": d.value_cents, "currency": d.currency,
            "owner_id": d.owner_id.as_ref().map(|id| id.as_str().to_owned()),
            "custom_fields": d.custom_fields, "version": d.version,
        })
    }

    fn activity(&self, a: &crm_domain::Activity) -> serde_json::Value {
        serde_json::json!({
            "id": a.id.as_str(), "object": "activity", "type": a.activity_type,
            "body": a.body, "custom_fields": a.custom_fields, "version": a.version,
        })
    }

    fn pipeline(&self, p: &crm_domain::Pipeline) -> serde_json::Value {
        serde_json::json!({
            "id": p.id.as_str(), "object": "pipeline", "key": p.key, "name": p.name,
            "stages": p.stages.iter().map(|s| self.stage(s)).collect::<Vec<_>>(),
        })
    }

    fn stage(&self, s: &crm_domain::Stage) -> serde_json::Value {
        serde_json::json!({"id": s.id.as_str(), "key": s.key, "label": s.label, "type": s.stage_type.as_str()})
    }

    fn deleted(&self, id: &str, object: &'static str) -> serde_json::Value {
        serde_json::json!({"id": id, "object": object, "deleted": true})
    }

    fn automation_draft(&self, def: &AutomationDef) -> AutomationDraft {
        let action = |a: &Action| match a {
            Action::CreateActivity {
                activity_type,
                body,
            } => json!({"type": "create_activity", "activity_type": activity_type, "body": body}),
            Action::SetField { field, value } => {
                json!({"type": "set_field", "field": field, "value": value})
            }
            Action::MoveDealStage { stage } => json!({"type": "move_deal_stage", "stage": stage}),
            Action::SendEmail(e) => without_nulls(json!({"type": "send_email", "to": e.to,
                "subject": e.subject, "body": e.body, "text": e.text, "template_id": e.template_id})),
        };
        AutomationDraft {
            name: Some(def.name.clone()),
            trigger_event: Some(def.trigger_event.as_str().to_owned()),
            conditions: Some(conditions(&def.conditions)),
            actions: Some(def.actions.iter().map(action).collect()),
        }
    }

    fn sequence_draft(&self, def: &SequenceDef) -> SequenceDraft {
        let step = |s: &Step| {
            let mut v = without_nulls(json!({"subject": s.subject, "body": s.body,
                "text": s.text, "template_id": s.template_id}));
            v[s.wait_unit.key()] = json!(s.wait);
            v
        };
        SequenceDraft {
            name: Some(def.name.clone()),
            channel: Some("email".into()),
            trigger: Some(def.trigger.as_ref().map_or(
                serde_json::Value::Null,
                |t| json!({"event": t.event.as_str(), "filter": conditions(&t.filter)}),
            )),
            exit_when: Some(conditions(&def.exit_when)),
            steps: Some(def.steps.iter().map(step).collect()),
        }
    }
}

fn conditions(list: &[Condition]) -> serde_json::Value {
    list.iter()
        .map(|c| without_nulls(json!({"field": c.field, "op": c.op.as_str(), "value": c.value})))
        .collect()
}

fn without_nulls(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.retain(|_, x| !x.is_null());
    }
    v
}
