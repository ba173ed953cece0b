//! Row ↔ record mapping.

use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    StoreError,
};
use crm_domain::{
    ApiKeyId, Company, CompanyId, Contact, ContactId, Email, JsonMap, Mode, Plan, Timestamp,
    WorkspaceId,
};
use sqlx::{sqlite::SqliteRow, Row};

use crate::backend;

pub(crate) fn corrupt(what: &str) -> StoreError {
    StoreError::Backend(format!("corrupt row: {what}").into())
}

/// One column of `row`, decoded; a missing column or a type mismatch is a backend error.
pub(crate) fn get<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(column).map_err(backend)
}

/// A JSON text column, parsed.
pub(crate) fn json_value(row: &SqliteRow, column: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(&get::<String>(row, column)?).map_err(|_| corrupt(column))
}

/// The tenant a row of a cross-tenant query (a worker's claim) belongs to.
pub(crate) fn tenant_of(row: &SqliteRow) -> Result<crm_domain::Tenant, StoreError> {
    Ok(crm_domain::Tenant {
        workspace_id: WorkspaceId::from_trusted(get(row, "workspace_id")?),
        mode: Mode::parse(&get::<String>(row, "mode")?).ok_or_else(|| corrupt("mode"))?,
    })
}

pub(crate) fn json_map(text: &str) -> Result<JsonMap, StoreError> {
    serde_json::from_str(text).map_err(|_| corrupt("custom_fields"))
}

pub(crate) fn ts(ms: Option<i64>) -> Option<Timestamp> {
    ms.map(Timestamp::from_millis)
}

pub(crate) fn mode(s: &str) -> Result<Mode, StoreError> {
    Mode::parse(s).ok_or_else(|| corrupt("mode"))
}

pub(crate) const CONTACT_COLUMNS: &str =
    "id, first_name, last_name, email, phone, linkedin_url, company_id, type, custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn contact(row: &SqliteRow) -> Result<Contact, StoreError> {
    let get_s = |c: &str| row.try_get::<Option<String>, _>(c).map_err(backend);
    Ok(Contact {
        id: ContactId::from_trusted(row.try_get("id").map_err(backend)?),
        first_name: get_s("first_name")?,
        last_name: get_s("last_name")?,
        email: get_s("email")?.map(Email::from_trusted),
        phone: get_s("phone")?,
        linkedin_url: get_s("linkedin_url")?,
        company_id: get_s("company_id")?.map(CompanyId::from_trusted),
        contact_type: get_s("type")?,
        custom_fields: json_map(&row.try_get::<String, _>("custom_fields").map_err(backend)?)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(backend)?),
        version: row.try_get("version").map_err(backend)?,
        deleted_at: ts(row.try_get("deleted_at").map_err(backend)?),
    })
}

pub(crate) const COMPANY_COLUMNS: &str =
    "id, name, domain, custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn company(row: &SqliteRow) -> Result<Company, StoreError> {
    Ok(Company {
        id: CompanyId::from_trusted(row.try_get("id").map_err(backend)?),
        name: row.try_get("name").map_err(backend)?,
        domain: row.try_get("domain").map_err(backend)?,
        custom_fields: json_map(&row.try_get::<String, _>("custom_fields").map_err(backend)?)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(backend)?),
        version: row.try_get("version").map_err(backend)?,
        deleted_at: ts(row.try_get("deleted_at").map_err(backend)?),
    })
}

pub(crate) const WORKSPACE_COLUMNS: &str =
    "w.id AS w_id, w.name AS w_name, w.plan AS w_plan, w.created_at AS w_created_at, w.overage_cap_usd, w.rate_limit_override, w.included_requests_override";

pub(crate) fn workspace(row: &SqliteRow) -> Result<Workspace, StoreError> {
    let plan: String = row.try_get("w_plan").map_err(backend)?;
    Ok(Workspace {
        id: WorkspaceId::from_trusted(row.try_get("w_id").map_err(backend)?),
        name: row.try_get("w_name").map_err(backend)?,
        plan: Plan::parse(&plan).ok_or_else(|| corrupt("plan"))?,
        created_at: Timestamp::from_millis(row.try_get("w_created_at").map_err(backend)?),
        overage_cap_usd: row.try_get("overage_cap_usd").map_err(backend)?,
        rate_limit_override: row
            .try_get::<Option<i64>, _>("rate_limit_override")
            .map_err(backend)?
            .map(|v| v as u32),
        included_requests_override: row
            .try_get::<Option<i64>, _>("included_requests_override")
            .map_err(backend)?
            .map(|v| v as u64),
    })
}

pub(crate) const KEY_COLUMNS: &str =
    "k.workspace_id, k.mode, k.id, k.name, k.scopes, k.key_hash, k.created_at, k.last_used_at, k.revoked_at, k.expires_at";

pub(crate) fn api_key(row: &SqliteRow) -> Result<ApiKeyRecord, StoreError> {
    let scopes: String = row.try_get("scopes").map_err(backend)?;
    Ok(ApiKeyRecord {
        id: ApiKeyId::from_trusted(row.try_get("id").map_err(backend)?),
        workspace_id: WorkspaceId::from_trusted(row.try_get("workspace_id").map_err(backend)?),
        mode: mode(&row.try_get::<String, _>("mode").map_err(backend)?)?,
        name: row.try_get("name").map_err(backend)?,
        scopes: serde_json::from_str(&scopes).map_err(|_| corrupt("scopes"))?,
        key_hash: row.try_get("key_hash").map_err(backend)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        last_used_at: ts(row.try_get("last_used_at").map_err(backend)?),
        revoked_at: ts(row.try_get("revoked_at").map_err(backend)?),
        expires_at: ts(row.try_get("expires_at").map_err(backend)?),
    })
}

pub(crate) const PIPELINE_COLUMNS: &str =
    "id, key, name, is_default, stages, created_at, updated_at, version";

pub(crate) fn stages_json(stages: &[crm_domain::Stage]) -> String {
    serde_json::Value::Array(stages.iter().map(crm_domain::Stage::snapshot).collect()).to_string()
}

fn stages_from_json(text: &str) -> Result<Vec<crm_domain::Stage>, StoreError> {
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
            Ok(crm_domain::Stage {
                id: crm_domain::StageId::from_trusted(s("id")?),
                key: s("key")?,
                label: s("label")?,
                stage_type: crm_domain::StageType::parse(&s("type")?)
                    .ok_or_else(|| corrupt("stage type"))?,
                ordinal: v
                    .get("ordinal")
                    .and_then(serde_json::Value::as_u64)
                    .ok_or_else(|| corrupt("ordinal"))? as u32,
            })
        })
        .collect()
}

pub(crate) fn pipeline(row: &SqliteRow) -> Result<crm_domain::Pipeline, StoreError> {
    Ok(crm_domain::Pipeline {
        id: crm_domain::PipelineId::from_trusted(row.try_get("id").map_err(backend)?),
        key: row.try_get("key").map_err(backend)?,
        name: row.try_get("name").map_err(backend)?,
        is_default: row.try_get("is_default").map_err(backend)?,
        stages: stages_from_json(&row.try_get::<String, _>("stages").map_err(backend)?)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(backend)?),
        version: row.try_get("version").map_err(backend)?,
    })
}

pub(crate) const DEAL_COLUMNS: &str =
    "id, title, pipeline_id, pipeline_key, stage, stage_type, primary_contact_id, company_id, \
     value_cents, currency, close_date, custom_fields, created_at, updated_at, version, deleted_at";

pub(crate) fn deal(row: &SqliteRow) -> Result<crm_domain::Deal, StoreError> {
    let get_s = |c: &str| row.try_get::<Option<String>, _>(c).map_err(backend);
    let stage_type: String = row.try_get("stage_type").map_err(backend)?;
    Ok(crm_domain::Deal {
        id: crm_domain::DealId::from_trusted(row.try_get("id").map_err(backend)?),
        title: row.try_get("title").map_err(backend)?,
        pipeline_id: crm_domain::PipelineId::from_trusted(
            row.try_get("pipeline_id").map_err(backend)?,
        ),
        pipeline_key: row.try_get("pipeline_key").map_err(backend)?,
        stage: row.try_get("stage").map_err(backend)?,
        stage_type: crm_domain::StageType::parse(&stage_type)
            .ok_or_else(|| corrupt("stage_type"))?,
        primary_contact_id: get_s("primary_contact_id")?.map(ContactId::from_trusted),
        company_id: get_s("company_id")?.map(CompanyId::from_trusted),
        value_cents: row.try_get("value_cents").map_err(backend)?,
        currency: get_s("currency")?,
        close_date: get_s("close_date")?
            .map(|d| crm_domain::Date::parse(&d).ok_or_else(|| corrupt("close_date")))
            .transpose()?,
        custom_fields: json_map(&row.try_get::<String, _>("custom_fields").map_err(backend)?)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(backend)?),
        version: row.try_get("version").map_err(backend)?,
        deleted_at: ts(row.try_get("deleted_at").map_err(backend)?),
    })
}

pub(crate) const ACTIVITY_COLUMNS: &str = "id, type, contact_id, deal_id, body, occurred_at, custom_fields, created_at, updated_at, version";

pub(crate) fn activity(row: &SqliteRow) -> Result<crm_domain::Activity, StoreError> {
    let get_s = |c: &str| row.try_get::<Option<String>, _>(c).map_err(backend);
    Ok(crm_domain::Activity {
        id: crm_domain::ActivityId::from_trusted(row.try_get("id").map_err(backend)?),
        activity_type: row.try_get("type").map_err(backend)?,
        contact_id: get_s("contact_id")?.map(ContactId::from_trusted),
        deal_id: get_s("deal_id")?.map(crm_domain::DealId::from_trusted),
        body: get_s("body")?,
        occurred_at: Timestamp::from_millis(row.try_get("occurred_at").map_err(backend)?),
        custom_fields: json_map(&row.try_get::<String, _>("custom_fields").map_err(backend)?)?,
        created_at: Timestamp::from_millis(row.try_get("created_at").map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(backend)?),
        version: row.try_get("version").map_err(backend)?,
    })
}
