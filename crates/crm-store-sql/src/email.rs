//! Connections, templates and emails (`EmailRepo`): every statement is the same on both
//! backends; only a claim's lock differs ([`Unit::skip_locked`]).

use crm_app::{
    ports::{EmailFilter, Slice},
    secrets::{open_row, seal_row, CONNECTIONS},
    StoreError,
};
use crm_domain::{
    mail::{Connection, EmailMessage, EmailStatus, Provider, Template},
    ConnectionId, ContactId, DealId, EmailId, TemplateId, Tenant, Timestamp,
};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    corrupt,
    rows::{opt_ts, tenant_of, ts},
    sql::{Col, PushArg},
    Arg, Secrets, Sql, SqlQuery, Unit,
};

const CONNECTION_COLUMNS: &str = "id, provider, api_key, from_addr, base_url, created_at";

fn connection<R: Row>(row: &R, tenant: &Tenant, secrets: &Secrets) -> Result<Connection, StoreError>
where
    R::Database: Sql,
{
    let id: String = row.col("id")?;
    let api_key = open_row(
        secrets,
        tenant,
        CONNECTIONS,
        &id,
        &row.col::<String>("api_key")?,
    )?;
    Ok(Connection {
        id: ConnectionId::from_trusted(id),
        provider: Provider::parse(&row.col::<String>("provider")?)
            .ok_or_else(|| corrupt("provider"))?,
        api_key,
        from: row.col("from_addr")?,
        base_url: row.col("base_url")?,
        created_at: ts(row, "created_at")?,
    })
}

const TEMPLATE_COLUMNS: &str = "id, name, subject, body, text, created_at, updated_at, version";

fn template<R: Row>(row: &R) -> Result<Template, StoreError>
where
    R::Database: Sql,
{
    Ok(Template {
        id: TemplateId::from_trusted(row.col("id")?),
        name: row.col("name")?,
        subject: row.col("subject")?,
        body: row.col("body")?,
        text: row.col("text")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

const EMAIL_COLUMNS: &str = "workspace_id, mode, id, to_addr, from_addr, subject, html, text, \
     status, error, source, contact_id, deal_id, attempts, next_attempt_at, provider_message_id, \
     created_at, sent_at";

fn email<R: Row>(row: &R) -> Result<EmailMessage, StoreError>
where
    R::Database: Sql,
{
    let source: serde_json::Value =
        serde_json::from_str(&row.col::<String>("source")?).map_err(|_| corrupt("source"))?;
    Ok(EmailMessage {
        id: EmailId::from_trusted(row.col("id")?),
        to: row.col("to_addr")?,
        from: row.col("from_addr")?,
        subject: row.col("subject")?,
        html: row.col("html")?,
        text: row.col("text")?,
        status: EmailStatus::parse(&row.col::<String>("status")?)
            .ok_or_else(|| corrupt("status"))?,
        error: row.col("error")?,
        source: crate::stored::mail::source_from_json(&source).ok_or_else(|| corrupt("source"))?,
        contact_id: row
            .col::<Option<String>>("contact_id")?
            .map(ContactId::from_trusted),
        deal_id: row
            .col::<Option<String>>("deal_id")?
            .map(DealId::from_trusted),
        attempts: u32::try_from(row.col::<i32>("attempts")?).map_err(|_| corrupt("attempts"))?,
        next_attempt_at: opt_ts(row, "next_attempt_at")?,
        provider_message_id: row.col("provider_message_id")?,
        created_at: ts(row, "created_at")?,
        sent_at: opt_ts(row, "sent_at")?,
    })
}

/// A count of attempts as the `attempts` columns hold it (INTEGER).
fn attempts(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub async fn insert_connection<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    c: &Connection,
) -> Result<(), StoreError> {
    let api_key = seal_row(
        tx.secret_box(),
        tenant,
        CONNECTIONS,
        c.id.as_str(),
        &c.api_key,
    )?;
    let q = tenant_query::<U::Db>(
        "INSERT INTO connections (workspace_id, mode, id, provider, api_key, from_addr, base_url, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        tenant,
    )
    .arg(c.id.as_str())
    .arg(c.provider.as_str())
    .arg(api_key.as_str())
    .arg(c.from.as_str())
    .arg(c.base_url.as_deref())
    .arg(c.created_at.millis());
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_connection<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ConnectionId,
) -> Result<Option<Connection>, StoreError> {
    let sql = format!(
        "SELECT {CONNECTION_COLUMNS} FROM connections WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let secrets = tx.secret_box().clone();
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, |r| connection(r, tenant, &secrets)).await
}

pub async fn list_connections<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Connection>, StoreError> {
    let mut qb =
        QueryBuilder::<U::Db>::new(format!("SELECT {CONNECTION_COLUMNS} FROM connections"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    let secrets = tx.secret_box().clone();
    tx.all_built(&mut qb, |r| connection(r, tenant, &secrets))
        .await
}

pub async fn delete_connection<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ConnectionId,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM connections WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn email_connection<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Option<Connection>, StoreError> {
    let sql = format!(
        "SELECT {CONNECTION_COLUMNS} FROM connections WHERE workspace_id = $1 AND mode = $2 ORDER BY id DESC LIMIT 1"
    );
    let secrets = tx.secret_box().clone();
    let q = tenant_query::<U::Db>(&sql, tenant);
    tx.optional(q, |r| connection(r, tenant, &secrets)).await
}

/// A template's id and content, `$3` to `$7`, as its insert and its update take them.
fn bind_template<'q, DB: Sql>(q: SqlQuery<'q, DB>, t: &'q Template) -> SqlQuery<'q, DB> {
    q.arg(t.id.as_str())
        .arg(t.name.as_str())
        .arg(t.subject.as_str())
        .arg(t.body.as_str())
        .arg(t.text.as_deref())
}

pub async fn insert_template<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    t: &Template,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO templates (workspace_id, mode, id, name, subject, body, text, created_at, updated_at, version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        tenant,
    );
    let q = bind_template(q, t)
        .arg(t.created_at.millis())
        .arg(t.updated_at.millis())
        .arg(t.version);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_template<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &TemplateId,
) -> Result<Option<Template>, StoreError> {
    let sql = format!(
        "SELECT {TEMPLATE_COLUMNS} FROM templates WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, template).await
}

pub async fn update_template<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    t: &Template,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE templates SET name = $4, subject = $5, body = $6, text = $7, updated_at = $8, version = $9
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9 - 1",
        tenant,
    );
    let q = bind_template(q, t)
        .arg(t.updated_at.millis())
        .arg(t.version);
    match tx.execute(q).await? {
        1 => Ok(()),
        _ => Err(StoreError::Stale),
    }
}

pub async fn delete_template<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &TemplateId,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM templates WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn list_templates<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Template>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {TEMPLATE_COLUMNS} FROM templates"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, template).await
}

pub async fn insert_email<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    e: &EmailMessage,
) -> Result<(), StoreError> {
    let source = crate::stored::mail::source_json(&e.source);
    let q = tenant_query::<U::Db>(
        "INSERT INTO emails (workspace_id, mode, id, to_addr, from_addr, subject, html, text, status, error, source, contact_id, deal_id,
                             attempts, next_attempt_at, claimed_until, provider_message_id, created_at, sent_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, $16, $17, $18)",
        tenant,
    )
    .arg(e.id.as_str())
    .arg(e.to.as_str())
    .arg(e.from.as_str())
    .arg(e.subject.as_str())
    .arg(e.html.as_str())
    .arg(e.text.as_str())
    .arg(e.status.as_str())
    .arg(e.error.as_deref())
    .arg(source.as_str())
    .arg(e.contact_id.as_ref().map(ContactId::as_str))
    .arg(e.deal_id.as_ref().map(DealId::as_str))
    .arg(attempts(e.attempts))
    .arg(e.next_attempt_at.map(Timestamp::millis))
    .arg(e.provider_message_id.as_deref())
    .arg(e.created_at.millis())
    .arg(e.sent_at.map(Timestamp::millis));
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_email<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &EmailId,
) -> Result<Option<EmailMessage>, StoreError> {
    let sql = format!(
        "SELECT {EMAIL_COLUMNS} FROM emails WHERE workspace_id = $1 AND mode = $2 AND id = $3"
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, email).await
}

pub async fn list_emails<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    filter: &EmailFilter,
    slice: &Slice,
) -> Result<Vec<EmailMessage>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {EMAIL_COLUMNS} FROM emails"));
    tenant_where(&mut qb, tenant);
    if let Some(c) = &filter.contact_id {
        qb.push(" AND contact_id = ").push_arg(c.as_str());
    }
    if let Some(d) = &filter.deal_id {
        qb.push(" AND deal_id = ").push_arg(d.as_str());
    }
    if let Some(s) = filter.status {
        qb.push(" AND status = ").push_arg(s.as_str());
    }
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, email).await
}

pub async fn claim_due_emails<U: Unit>(
    tx: &mut U,
    now: Timestamp,
    claim_until: Timestamp,
    limit: u32,
) -> Result<Vec<(Tenant, EmailMessage)>, StoreError> {
    let sql = format!(
        "UPDATE emails SET claimed_until = $1
         WHERE (workspace_id, mode, id) IN (
             SELECT workspace_id, mode, id FROM emails
             WHERE status = 'queued' AND next_attempt_at <= $2 AND (claimed_until IS NULL OR claimed_until <= $2)
             ORDER BY next_attempt_at LIMIT $3{})
         RETURNING {EMAIL_COLUMNS}",
        tx.skip_locked()
    );
    let q = sqlx::query::<U::Db>(&sql)
        .arg(claim_until.millis())
        .arg(now.millis())
        .arg(i64::from(limit));
    tx.all(q, |r| Ok((tenant_of(r)?, email(r)?))).await
}

pub async fn finish_email_attempt<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    e: &EmailMessage,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE emails SET status = $4, error = $5, attempts = $6, next_attempt_at = $7, provider_message_id = $8, sent_at = $9, claimed_until = NULL
         WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(e.id.as_str())
    .arg(e.status.as_str())
    .arg(e.error.as_deref())
    .arg(attempts(e.attempts))
    .arg(e.next_attempt_at.map(Timestamp::millis))
    .arg(e.provider_message_id.as_deref())
    .arg(e.sent_at.map(Timestamp::millis));
    tx.execute(q).await?;
    Ok(())
}

/// `impl EmailRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_email_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::EmailRepo, $tx, email, [
            fn insert_connection(tenant: &$crate::reexport::Tenant, c: &$crate::reexport::mail::Connection) -> Result<(), $crate::reexport::StoreError>;
            fn get_connection(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ConnectionId) -> Result<Option<$crate::reexport::mail::Connection>, $crate::reexport::StoreError>;
            fn list_connections(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::mail::Connection>, $crate::reexport::StoreError>;
            fn delete_connection(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ConnectionId) -> Result<bool, $crate::reexport::StoreError>;
            fn email_connection(tenant: &$crate::reexport::Tenant) -> Result<Option<$crate::reexport::mail::Connection>, $crate::reexport::StoreError>;
            fn insert_template(tenant: &$crate::reexport::Tenant, t: &$crate::reexport::mail::Template) -> Result<(), $crate::reexport::StoreError>;
            fn get_template(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::TemplateId) -> Result<Option<$crate::reexport::mail::Template>, $crate::reexport::StoreError>;
            fn update_template(tenant: &$crate::reexport::Tenant, t: &$crate::reexport::mail::Template) -> Result<(), $crate::reexport::StoreError>;
            fn delete_template(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::TemplateId) -> Result<bool, $crate::reexport::StoreError>;
            fn list_templates(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::mail::Template>, $crate::reexport::StoreError>;
            fn insert_email(tenant: &$crate::reexport::Tenant, e: &$crate::reexport::mail::EmailMessage) -> Result<(), $crate::reexport::StoreError>;
            fn get_email(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::EmailId) -> Result<Option<$crate::reexport::mail::EmailMessage>, $crate::reexport::StoreError>;
            fn list_emails(tenant: &$crate::reexport::Tenant, filter: &$crate::reexport::EmailFilter, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::mail::EmailMessage>, $crate::reexport::StoreError>;
            fn claim_due_emails(now: $crate::reexport::Timestamp, claim_until: $crate::reexport::Timestamp, limit: u32) -> Result<Vec<($crate::reexport::Tenant, $crate::reexport::mail::EmailMessage)>, $crate::reexport::StoreError>;
            fn finish_email_attempt(tenant: &$crate::reexport::Tenant, e: &$crate::reexport::mail::EmailMessage) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
