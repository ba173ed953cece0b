//! Row ↔ record mapping.
//!
//! JSON(B) columns are selected as `::text` and parsed with serde_json, so the crate needs no sqlx
//! JSON feature and reads JSON exactly as the SQLite store does.

use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::{IdemRecord, StoredReply},
    StoreError,
};
use crm_domain::{
    Activity, ActivityId, ApiKeyId, Company, CompanyId, Contact, ContactId, Date, Deal, DealId,
    Email, Event, JsonMap, Mode, Pipeline, PipelineId, Plan, Stage, StageId, StageType, Timestamp,
    WorkspaceId,
};
use sqlx::{postgres::PgRow, Decode, Postgres, Row, Type};

use crate::backend;

pub(crate) fn corrupt(what: &str) -> StoreError {
    StoreError::Backend(format!("corrupt row: {what}").into())
}

/// A JSON text column, parsed.
pub(crate) fn json_value(row: &PgRow, column: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(&get::<String>(row, column)?).map_err(|_| corrupt(column))
}

/// The tenant a row of a cross-tenant query (a worker's claim) belongs to.
pub(crate) fn tenant_of(row: &PgRow) -> Result<crm_domain::Tenant, StoreError> {
    Ok(crm_domain::Tenant {
        workspace_id: WorkspaceId::from_trusted(get(row, "workspace_id")?),
        mode: Mode::parse(&get::<String>(row, "mode")?).ok_or_else(|| corrupt("mode"))?,
    })
}

/// One column of `row`, decoded; a missing column or a type mismatch is a backend error.
pub(crate) fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: Decode<'r, Postgres> + Type<Postgres>,
{
    row.try_get(column).map_err(backend)
}

fn json_map(row: &PgRow) -> Result<JsonMap, StoreError> {
    serde_json::from_str(&get::<String>(row, "custom_fields")?)
        .map_err(|_| corrupt("custom_fields"))
}

fn ts(row: &PgRow, column: &str) -> Result<Timestamp, StoreError> {
    get(row, column).map(Timestamp::from_millis)
}

fn opt_ts(row: &PgRow, column: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(get::<Option<i64>>(row, column)?.map(Timestamp::from_millis))
}

pub(crate) const CONTACT_COLUMNS: &str =
    "id, first_name, last_name, email, phone, linkedin_url, company_id, type, \
     custom_fields::text AS custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn contact(row: &PgRow) -> Result<Contact, StoreError> {
    Ok(Contact {
        id: ContactId::from_trusted(get(row, "id")?),
        first_name: get(row, "first_name")?,
        last_name: get(row, "last_name")?,
        email: get::<Option<String>>(row, "email")?.map(Email::from_trusted),
        phone: get(row, "phone")?,
        linkedin_url: get(row, "linkedin_url")?,
        company_id: get::<Option<String>>(row, "company_id")?.map(CompanyId::from_trusted),
        contact_type: get(row, "type")?,
        custom_fields: json_map(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: get(row, "version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
    })
}

pub(crate) const COMPANY_COLUMNS: &str =
    "id, name, domain, custom_fields::text AS custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn company(row: &PgRow) -> Result<Company, StoreError> {
    Ok(Company {
        id: CompanyId::from_trusted(get(row, "id")?),
        name: get(row, "name")?,
        domain: get(row, "domain")?,
        custom_fields: json_map(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: get(row, "version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
    })
}

pub(crate) const WORKSPACE_COLUMNS: &str =
    "w.id AS w_id, w.name AS w_name, w.plan AS w_plan, w.created_at AS w_created_at, \
     w.overage_cap_usd, w.rate_limit_override, w.included_requests_override";

pub(crate) fn workspace(row: &PgRow) -> Result<Workspace, StoreError> {
    let plan: String = get(row, "w_plan")?;
    let rate_limit: Option<i64> = get(row, "rate_limit_override")?;
    let included: Option<i64> = get(row, "included_requests_override")?;
    Ok(Workspace {
        id: WorkspaceId::from_trusted(get(row, "w_id")?),
        name: get(row, "w_name")?,
        plan: Plan::parse(&plan).ok_or_else(|| corrupt("plan"))?,
        created_at: ts(row, "w_created_at")?,
        overage_cap_usd: get(row, "overage_cap_usd")?,
        rate_limit_override: rate_limit
            .map(|v| u32::try_from(v).map_err(|_| corrupt("rate_limit_override")))
            .transpose()?,
        included_requests_override: included
            .map(|v| u64::try_from(v).map_err(|_| corrupt("included_requests_override")))
            .transpose()?,
    })
}

pub(crate) const KEY_COLUMNS: &str =
    "k.workspace_id, k.mode, k.id, k.name, k.scopes, k.key_hash, k.created_at, k.last_used_at, k.revoked_at, k.expires_at";

pub(crate) fn api_key(row: &PgRow) -> Result<ApiKeyRecord, StoreError> {
    let mode: String = get(row, "mode")?;
    let scopes: String = get(row, "scopes")?;
    Ok(ApiKeyRecord {
        id: ApiKeyId::from_trusted(get(row, "id")?),
        workspace_id: WorkspaceId::from_trusted(get(row, "workspace_id")?),
        mode: Mode::parse(&mode).ok_or_else(|| corrupt("mode"))?,
        name: get(row, "name")?,
        scopes: serde_json::from_str(&scopes).map_err(|_| corrupt("scopes"))?,
        key_hash: get(row, "key_hash")?,
        created_at: ts(row, "created_at")?,
        last_used_at: opt_ts(row, "last_used_at")?,
        revoked_at: opt_ts(row, "revoked_at")?,
        expires_at: opt_ts(row, "expires_at")?,
    })
}

pub(crate) const EVENT_COLUMNS: &str = "body::text AS body";

pub(crate) fn event(row: &PgRow) -> Result<Event, StoreError> {
    let body: serde_json::Value =
        serde_json::from_str(&get::<String>(row, "body")?).map_err(|_| corrupt("event body"))?;
    Event::from_snapshot(&body).ok_or_else(|| corrupt("event body"))
}

pub(crate) const IDEM_COLUMNS: &str =
    "key, fingerprint, reply_status, reply_body, created_at, locked_until";

pub(crate) fn idem_record(row: &PgRow) -> Result<IdemRecord, StoreError> {
    let status: Option<i64> = get(row, "reply_status")?;
    let body: Option<Vec<u8>> = get(row, "reply_body")?;
    let reply = status
        .map(|s| {
            let status = u16::try_from(s).map_err(|_| corrupt("reply_status"))?;
            Ok(StoredReply {
                status,
                body: body.unwrap_or_default(),
            })
        })
        .transpose()?;
    Ok(IdemRecord {
        key: get(row, "key")?,
        fingerprint: get(row, "fingerprint")?,
        reply,
        created_at: ts(row, "created_at")?,
        locked_until: ts(row, "locked_until")?,
        owner_alive: true,
    })
}

/// `stages` as the SQLite store keeps them: a JSON array of `Stage::snapshot()` objects (bound
/// as text and cast to JSONB).
pub(crate) fn stages_json(stages: &[Stage]) -> String {
    serde_json::Value::Array(stages.iter().map(Stage::snapshot).collect()).to_string()
}

fn stages_from_json(text: &str) -> Result<Vec<Stage>, StoreError> {
    let values: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|_| corrupt("stages"))?;
    values
        .iter()
        .map(|v| {
            let s = |k: &str| {
                v.get(k)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| corrupt("stage"))
            };
            let ordinal = v
                .get("ordinal")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| corrupt("stage ordinal"))?;
            Ok(Stage {
                id: StageId::from_trusted(s("id")?),
                key: s("key")?,
                label: s("label")?,
                stage_type: StageType::parse(&s("type")?).ok_or_else(|| corrupt("stage type"))?,
                ordinal: u32::try_from(ordinal).map_err(|_| corrupt("stage ordinal"))?,
            })
        })
        .collect()
}

pub(crate) const PIPELINE_COLUMNS: &str =
    "id, key, name, is_default, stages::text AS stages, created_at, updated_at, version";

pub(crate) fn pipeline(row: &PgRow) -> Result<Pipeline, StoreError> {
    Ok(Pipeline {
        id: PipelineId::from_trusted(get(row, "id")?),
        key: get(row, "key")?,
        name: get(row, "name")?,
        is_default: get(row, "is_default")?,
        stages: stages_from_json(&get::<String>(row, "stages")?)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: get(row, "version")?,
    })
}

pub(crate) const DEAL_COLUMNS: &str = "id, title, pipeline_id, pipeline_key, stage, stage_type, primary_contact_id, company_id, \
     value_cents, currency, close_date, custom_fields::text AS custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn deal(row: &PgRow) -> Result<Deal, StoreError> {
    let stage_type: String = get(row, "stage_type")?;
    let close_date: Option<String> = get(row, "close_date")?;
    Ok(Deal {
        id: DealId::from_trusted(get(row, "id")?),
        title: get(row, "title")?,
        pipeline_id: PipelineId::from_trusted(get(row, "pipeline_id")?),
        pipeline_key: get(row, "pipeline_key")?,
        stage: get(row, "stage")?,
        stage_type: StageType::parse(&stage_type).ok_or_else(|| corrupt("stage_type"))?,
        primary_contact_id: get::<Option<String>>(row, "primary_contact_id")?
            .map(ContactId::from_trusted),
        company_id: get::<Option<String>>(row, "company_id")?.map(CompanyId::from_trusted),
        value_cents: get(row, "value_cents")?,
        currency: get(row, "currency")?,
        close_date: close_date
            .map(|d| Date::parse(&d).ok_or_else(|| corrupt("close_date")))
            .transpose()?,
        custom_fields: json_map(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: get(row, "version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
    })
}

pub(crate) const ACTIVITY_COLUMNS: &str =
    "id, type, contact_id, deal_id, body, occurred_at, custom_fields::text AS custom_fields, created_at, updated_at, version";

pub(crate) fn activity(row: &PgRow) -> Result<Activity, StoreError> {
    Ok(Activity {
        id: ActivityId::from_trusted(get(row, "id")?),
        activity_type: get(row, "type")?,
        contact_id: get::<Option<String>>(row, "contact_id")?.map(ContactId::from_trusted),
        deal_id: get::<Option<String>>(row, "deal_id")?.map(DealId::from_trusted),
        body: get(row, "body")?,
        occurred_at: ts(row, "occurred_at")?,
        custom_fields: json_map(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: get(row, "version")?,
    })
}
