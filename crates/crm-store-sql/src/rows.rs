//! Row → record decoding and the column lists it reads, for any backend.
//!
//! JSON columns are selected as text (`CAST(... AS TEXT)`: JSONB on Postgres, already text on
//! SQLite) and parsed with serde_json, so no sqlx JSON feature is needed and both stores read
//! JSON alike. Timestamps are stored as milliseconds since the epoch.

use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    idempotency::{IdemRecord, StoredReply},
    StoreError,
};
use crm_domain::{
    registry::{DataType, EnumValue, FieldDef},
    Activity, ActivityId, ApiKeyId, Company, CompanyId, Contact, ContactId, Date, Deal, DealId,
    Email, Event, JsonMap, Mode, ObjectKind, Pipeline, PipelineId, Plan, StageType, Tenant,
    Timestamp, UserId, WorkspaceId,
};
use sqlx::Row;

use crate::{corrupt, sql::Col, Decodes, Sql};

/// A JSON text column, parsed.
pub fn json_value<R: Row>(row: &R, column: &str) -> Result<serde_json::Value, StoreError>
where
    R::Database: Sql,
{
    serde_json::from_str(&row.col::<String>(column)?).map_err(|_| corrupt(column))
}

/// A timestamp column.
pub fn ts<R: Row>(row: &R, column: &str) -> Result<Timestamp, StoreError>
where
    R::Database: Sql,
{
    row.col::<i64>(column).map(Timestamp::from_millis)
}

/// A timestamp column that may be NULL.
pub fn opt_ts<R: Row>(row: &R, column: &str) -> Result<Option<Timestamp>, StoreError>
where
    R::Database: Sql,
{
    Ok(row.col::<Option<i64>>(column)?.map(Timestamp::from_millis))
}

/// A mode column.
pub fn mode<R: Row>(row: &R, column: &str) -> Result<Mode, StoreError>
where
    R::Database: Sql,
{
    Mode::parse(&row.col::<String>(column)?).ok_or_else(|| corrupt("mode"))
}

/// The tenant a row of a cross-tenant query (a worker's claim) belongs to.
pub fn tenant_of<R: Row>(row: &R) -> Result<Tenant, StoreError>
where
    R::Database: Sql,
{
    Ok(Tenant {
        workspace_id: WorkspaceId::from_trusted(row.col("workspace_id")?),
        mode: mode(row, "mode")?,
    })
}

fn custom_fields<R: Row>(row: &R) -> Result<JsonMap, StoreError>
where
    R::Database: Sql,
{
    serde_json::from_str(&row.col::<String>("custom_fields")?).map_err(|_| corrupt("custom_fields"))
}

/// A record's `owner_id` column.
fn owner<R: Row>(row: &R) -> Result<Option<UserId>, StoreError>
where
    R::Database: Sql,
{
    Ok(row
        .col::<Option<String>>("owner_id")?
        .map(UserId::from_trusted))
}

pub const CONTACT_COLUMNS: &str =
    "id, first_name, last_name, email, phone, linkedin_url, company_id, type, owner_id, \
     CAST(custom_fields AS TEXT) AS custom_fields, created_at, updated_at, version, deleted_at, merged_into";

pub fn contact<R: Row>(row: &R) -> Result<Contact, StoreError>
where
    R::Database: Sql,
{
    Ok(Contact {
        id: ContactId::from_trusted(row.col("id")?),
        first_name: row.col("first_name")?,
        last_name: row.col("last_name")?,
        email: row.col::<Option<String>>("email")?.map(Email::from_trusted),
        phone: row.col("phone")?,
        linkedin_url: row.col("linkedin_url")?,
        company_id: row
            .col::<Option<String>>("company_id")?
            .map(CompanyId::from_trusted),
        contact_type: row.col("type")?,
        owner_id: owner(row)?,
        custom_fields: custom_fields(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
        merged_into: row
            .col::<Option<String>>("merged_into")?
            .map(ContactId::from_trusted),
    })
}

pub const COMPANY_COLUMNS: &str =
    "id, name, domain, owner_id, CAST(custom_fields AS TEXT) AS custom_fields, \
     created_at, updated_at, version, deleted_at, merged_into";

pub fn company<R: Row>(row: &R) -> Result<Company, StoreError>
where
    R::Database: Sql,
{
    Ok(Company {
        id: CompanyId::from_trusted(row.col("id")?),
        name: row.col("name")?,
        domain: row.col("domain")?,
        owner_id: owner(row)?,
        custom_fields: custom_fields(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
        merged_into: row
            .col::<Option<String>>("merged_into")?
            .map(CompanyId::from_trusted),
    })
}

pub const WORKSPACE_COLUMNS: &str =
    "w.id AS w_id, w.name AS w_name, w.plan AS w_plan, w.created_at AS w_created_at, \
     w.overage_cap_usd, w.rate_limit_override, w.included_requests_override, \
     w.history_retention_days, w.email_retention_days";

pub fn workspace<R: Row>(row: &R) -> Result<Workspace, StoreError>
where
    R::Database: Sql,
{
    let plan: String = row.col("w_plan")?;
    let rate_limit: Option<i64> = row.col("rate_limit_override")?;
    let included: Option<i64> = row.col("included_requests_override")?;
    let days = |name: &'static str| -> Result<Option<u32>, StoreError> {
        row.col::<Option<i64>>(name)?
            .map(|v| u32::try_from(v).map_err(|_| corrupt(name)))
            .transpose()
    };
    Ok(Workspace {
        id: WorkspaceId::from_trusted(row.col("w_id")?),
        name: row.col("w_name")?,
        plan: Plan::parse(&plan).ok_or_else(|| corrupt("plan"))?,
        created_at: ts(row, "w_created_at")?,
        overage_cap_usd: row.col("overage_cap_usd")?,
        rate_limit_override: rate_limit
            .map(|v| u32::try_from(v).map_err(|_| corrupt("rate_limit_override")))
            .transpose()?,
        included_requests_override: included
            .map(|v| u64::try_from(v).map_err(|_| corrupt("included_requests_override")))
            .transpose()?,
        history_retention_days: days("history_retention_days")?,
        email_retention_days: days("email_retention_days")?,
    })
}

pub const KEY_COLUMNS: &str = "k.workspace_id, k.mode, k.id, k.name, k.scopes, k.key_hash, \
     k.created_at, k.last_used_at, k.revoked_at, k.expires_at";

pub fn api_key<R: Row>(row: &R) -> Result<ApiKeyRecord, StoreError>
where
    R::Database: Sql,
{
    let scopes: String = row.col("scopes")?;
    Ok(ApiKeyRecord {
        id: ApiKeyId::from_trusted(row.col("id")?),
        workspace_id: WorkspaceId::from_trusted(row.col("workspace_id")?),
        mode: mode(row, "mode")?,
        name: row.col("name")?,
        scopes: serde_json::from_str(&scopes).map_err(|_| corrupt("scopes"))?,
        key_hash: row.col("key_hash")?,
        created_at: ts(row, "created_at")?,
        last_used_at: opt_ts(row, "last_used_at")?,
        revoked_at: opt_ts(row, "revoked_at")?,
        expires_at: opt_ts(row, "expires_at")?,
    })
}

pub const EVENT_COLUMNS: &str = "CAST(body AS TEXT) AS body";

pub fn event<R: Row>(row: &R) -> Result<Event, StoreError>
where
    R::Database: Sql,
{
    let body: serde_json::Value =
        serde_json::from_str(&row.col::<String>("body")?).map_err(|_| corrupt("event body"))?;
    crate::stored::event::event_from_json(&body).ok_or_else(|| corrupt("event body"))
}

pub const IDEM_COLUMNS: &str =
    "key, fingerprint, reply_status, reply_body, created_at, locked_until, owner";

/// An idempotency record; whether its owner is alive is the store's to say.
pub fn idem_record<R: Row>(row: &R, owner_alive: bool) -> Result<IdemRecord, StoreError>
where
    R::Database: Sql,
{
    let status: Option<i64> = row.col("reply_status")?;
    let body: Option<Vec<u8>> = row.col("reply_body")?;
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
        key: row.col("key")?,
        fingerprint: row.col("fingerprint")?,
        reply,
        created_at: ts(row, "created_at")?,
        locked_until: ts(row, "locked_until")?,
        owner_alive,
    })
}

pub const PIPELINE_COLUMNS: &str =
    "id, key, name, is_default, CAST(stages AS TEXT) AS stages, created_at, updated_at, version";

pub fn pipeline<R: Row>(row: &R) -> Result<Pipeline, StoreError>
where
    R::Database: Sql,
{
    Ok(Pipeline {
        id: PipelineId::from_trusted(row.col("id")?),
        key: row.col("key")?,
        name: row.col("name")?,
        is_default: row.col("is_default")?,
        stages: crate::stored::stage::stages_from_json(&row.col::<String>("stages")?)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

pub const DEAL_COLUMNS: &str =
    "id, title, pipeline_id, pipeline_key, stage, stage_type, primary_contact_id, company_id, \
     value_cents, currency, close_date, owner_id, CAST(custom_fields AS TEXT) AS custom_fields, \
     created_at, updated_at, version, deleted_at";

pub fn deal<R: Row>(row: &R) -> Result<Deal, StoreError>
where
    R::Database: Sql,
{
    let stage_type: String = row.col("stage_type")?;
    let close_date: Option<String> = row.col("close_date")?;
    Ok(Deal {
        id: DealId::from_trusted(row.col("id")?),
        title: row.col("title")?,
        pipeline_id: PipelineId::from_trusted(row.col("pipeline_id")?),
        pipeline_key: row.col("pipeline_key")?,
        stage: row.col("stage")?,
        stage_type: StageType::parse(&stage_type).ok_or_else(|| corrupt("stage_type"))?,
        primary_contact_id: row
            .col::<Option<String>>("primary_contact_id")?
            .map(ContactId::from_trusted),
        company_id: row
            .col::<Option<String>>("company_id")?
            .map(CompanyId::from_trusted),
        value_cents: row.col("value_cents")?,
        currency: row.col("currency")?,
        close_date: close_date
            .map(|d| Date::parse(&d).ok_or_else(|| corrupt("close_date")))
            .transpose()?,
        owner_id: owner(row)?,
        custom_fields: custom_fields(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
        deleted_at: opt_ts(row, "deleted_at")?,
    })
}

pub const ACTIVITY_COLUMNS: &str = "id, type, contact_id, deal_id, body, occurred_at, \
     CAST(custom_fields AS TEXT) AS custom_fields, created_at, updated_at, version";

pub fn activity<R: Row>(row: &R) -> Result<Activity, StoreError>
where
    R::Database: Sql,
{
    Ok(Activity {
        id: ActivityId::from_trusted(row.col("id")?),
        activity_type: row.col("type")?,
        contact_id: row
            .col::<Option<String>>("contact_id")?
            .map(ContactId::from_trusted),
        deal_id: row
            .col::<Option<String>>("deal_id")?
            .map(DealId::from_trusted),
        body: row.col("body")?,
        occurred_at: ts(row, "occurred_at")?,
        custom_fields: custom_fields(row)?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

/// A custom field's definition, of the object the statement asked for.
pub fn field_def<R: Row>(row: &R, object: ObjectKind) -> Result<FieldDef, StoreError>
where
    R::Database: Sql,
{
    let data_type: String = row.col("data_type")?;
    Ok(FieldDef {
        object,
        key: row.col("key")?,
        label: row.col("label")?,
        data_type: DataType::parse(&data_type).ok_or_else(|| corrupt("data_type"))?,
        enum_group: row.col("enum_group")?,
        required: row.col("required")?,
        unique: row.col("is_unique")?,
    })
}

/// An enum value with the group it belongs to.
pub fn enum_value<R: Row>(row: &R) -> Result<(String, EnumValue), StoreError>
where
    R::Database: Sql,
{
    Ok((
        row.col("grp")?,
        EnumValue {
            value: row.col("value")?,
            label: row.col("label")?,
        },
    ))
}

/// One column of `row`, decoded; a missing column or a type mismatch is a backend error.
#[inline]
pub fn get<T>(row: &impl Row<Database: Decodes<T>>, column: &str) -> Result<T, StoreError> {
    row.col(column)
}
