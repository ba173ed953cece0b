//! Records to store, built with fixed clocks and ids so assertions are exact.

use std::sync::Arc;

use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::IdemRecord,
    ports::Slice,
    Store,
};
use crm_domain::{
    history::{Author, Change, ChangeAction, FieldChange},
    ApiKeyId, ChangeId, Company, CompanyId, Contact, ContactId, Email, Event, EventId, EventType,
    JsonMap, Mode, ObjectKind, Plan, Tenant, Timestamp, WorkspaceId,
};
use serde_json::json;
use uuid::Uuid;

pub fn uuid() -> Uuid {
    Uuid::now_v7()
}

pub fn workspace() -> Workspace {
    Workspace {
        id: WorkspaceId::from_uuid(uuid()),
        name: "Acme".into(),
        plan: Plan::Pro,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        overage_cap_usd: Some(12.5),
        rate_limit_override: Some(77),
        included_requests_override: None,
        history_retention_days: None,
        email_retention_days: None,
    }
}

pub fn tenant(ws: &Workspace, mode: Mode) -> Tenant {
    Tenant {
        workspace_id: ws.id.clone(),
        mode,
    }
}

pub fn api_key(ws: &Workspace, mode: Mode, hash: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        id: ApiKeyId::from_uuid(uuid()),
        workspace_id: ws.id.clone(),
        mode,
        name: "ci".into(),
        scopes: vec!["contacts:read".into(), "deals:write".into()],
        key_hash: hash.into(),
        created_at: Timestamp::from_millis(1_700_000_000_001),
        last_used_at: None,
        revoked_at: None,
        expires_at: Some(Timestamp::from_millis(1_800_000_000_000)),
    }
}

pub fn contact(email: Option<&str>) -> Contact {
    let now = Timestamp::from_millis(1_700_000_000_123);
    Contact {
        id: ContactId::from_uuid(uuid()),
        first_name: Some("Ada".into()),
        last_name: Some("Lovelace".into()),
        email: email.map(|e| Email::parse(e).expect("valid email")),
        phone: None,
        linkedin_url: None,
        company_id: None,
        contact_type: None,
        owner_id: None,
        custom_fields: JsonMap::new(),
        created_at: now,
        updated_at: now,
        version: 1,
        deleted_at: None,
        merged_into: None,
    }
}

pub fn company(name: &str, domain: Option<&str>) -> Company {
    let now = Timestamp::from_millis(1_700_000_000_456);
    Company {
        id: CompanyId::from_uuid(uuid()),
        name: name.into(),
        domain: domain.map(String::from),
        owner_id: None,
        custom_fields: JsonMap::new(),
        created_at: now,
        updated_at: now,
        version: 1,
        deleted_at: None,
        merged_into: None,
    }
}

pub fn pipeline(key: &str, stages: &[&str]) -> crm_domain::Pipeline {
    let draft = crm_domain::PipelineDraft {
        key: Some(key.into()),
        name: Some(format!("{key} pipeline")),
        is_default: false,
        stages: stages
            .iter()
            .map(|k| crm_domain::StageDraft {
                key: (*k).into(),
                label: None,
                stage_type: None,
            })
            .collect(),
    };
    crm_domain::Pipeline::create(
        crm_domain::PipelineId::from_uuid(uuid()),
        Timestamp::from_millis(1_700_000_000_000),
        draft,
        || crm_domain::StageId::from_uuid(uuid()),
    )
    .expect("valid pipeline")
}

pub fn deal(title: &str, pipeline: &crm_domain::Pipeline, stage: &str) -> crm_domain::Deal {
    let now = Timestamp::from_millis(1_700_000_000_789);
    let stage = pipeline.stage(stage).expect("stage of the pipeline");
    crm_domain::Deal {
        id: crm_domain::DealId::from_uuid(uuid()),
        title: title.into(),
        pipeline_id: pipeline.id.clone(),
        pipeline_key: pipeline.key.clone(),
        stage: stage.key.clone(),
        stage_type: stage.stage_type,
        primary_contact_id: None,
        company_id: None,
        value_cents: Some(12_500),
        currency: Some("EUR".into()),
        close_date: crm_domain::Date::parse("2026-12-31"),
        owner_id: None,
        custom_fields: JsonMap::new(),
        created_at: now,
        updated_at: now,
        version: 1,
        deleted_at: None,
    }
}

pub fn activity(occurred_at_ms: i64) -> crm_domain::Activity {
    let now = Timestamp::from_millis(1_700_000_001_000);
    crm_domain::Activity {
        id: crm_domain::ActivityId::from_uuid(uuid()),
        activity_type: "note".into(),
        contact_id: None,
        deal_id: None,
        body: Some("Called; left a message.".into()),
        occurred_at: Timestamp::from_millis(occurred_at_ms),
        custom_fields: JsonMap::new(),
        created_at: now,
        updated_at: now,
        version: 1,
    }
}

/// Every row a list can give, in one slice.
pub fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

/// A workspace and a test tenant in it, committed.
pub async fn setup(store: &Arc<dyn Store>) -> (crm_app::auth::Workspace, crm_domain::Tenant) {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    let t = tenant(&ws, Mode::Test);
    (ws, t)
}

/// An event of `event_type` about a fixed contact.
pub fn sample_event(event_type: EventType, mode: Mode) -> Event {
    Event {
        merged_ids: None,
        id: EventId::from_uuid(uuid()),
        event_type,
        mode,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        data: json!({"id": "con_x", "object": "contact"}),
        changed_fields: (event_type == EventType::ContactUpdated).then(|| vec!["email".to_owned()]),
        previous_stage: None,
    }
}

/// A history entry of the record `record_id`, with a new (time-ordered) id.
pub fn sample_change(object: ObjectKind, record_id: &str) -> Change {
    Change {
        id: ChangeId::from_uuid(uuid()),
        object,
        record_id: record_id.to_owned(),
        at: Timestamp::from_millis(1_700_000_000_000),
        action: ChangeAction::Updated,
        author: Author::system(),
        changes: vec![FieldChange {
            field: "custom_fields.é".into(),
            from: json!(null),
            to: json!({"nested": [1, "ü"]}),
        }],
        merged_ids: None,
        erased: false,
    }
}

/// A claim whose lease has long ended.
pub fn idem(key: &str) -> IdemRecord {
    IdemRecord {
        key: key.into(),
        fingerprint: "fp".into(),
        reply: None,
        created_at: Timestamp::from_millis(10),
        locked_until: Timestamp::from_millis(20),
        owner_alive: true,
    }
}
