//! Connections, templates and emails over Postgres (claims skip rows other workers hold: FOR UPDATE SKIP LOCKED).

use async_trait::async_trait;
use crm_app::{
    ports::{EmailFilter, EmailRepo, Slice},
    StoreError,
};
use crm_domain::{
    mail::{Connection, EmailMessage, EmailSource, EmailStatus, Provider, Template},
    ConnectionId, ContactId, DealId, EmailId, TemplateId, Tenant, Timestamp,
};
use sqlx::{postgres::PgRow, Postgres, QueryBuilder};

use crate::{
    rows::{corrupt, get, tenant_of},
    secrets::{open, seal, CONNECTIONS},
    tx::{slice_clause, tenant_where, Secrets},
    PostgresTx,
};

fn ts(row: &PgRow, column: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(get::<Option<i64>>(row, column)?.map(Timestamp::from_millis))
}

const CONNECTION_COLUMNS: &str = "id, provider, api_key, from_addr, base_url, created_at";

fn connection(row: &PgRow, tenant: &Tenant, secrets: &Secrets) -> Result<Connection, StoreError> {
    let id: String = get(row, "id")?;
    let api_key = open(
        secrets,
        tenant,
        CONNECTIONS,
        &id,
        &get::<String>(row, "api_key")?,
    )?;
    Ok(Connection {
        id: ConnectionId::from_trusted(id),
        provider: Provider::parse(&get::<String>(row, "provider")?)
            .ok_or_else(|| corrupt("provider"))?,
        api_key,
        from: get(row, "from_addr")?,
        base_url: get(row, "base_url")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
    })
}

const TEMPLATE_COLUMNS: &str = "id, name, subject, body, text, created_at, updated_at, version";

fn template(row: &PgRow) -> Result<Template, StoreError> {
    Ok(Template {
        id: TemplateId::from_trusted(get(row, "id")?),
        name: get(row, "name")?,
        subject: get(row, "subject")?,
        body: get(row, "body")?,
        text: get(row, "text")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
        updated_at: Timestamp::from_millis(get(row, "updated_at")?),
        version: get(row, "version")?,
    })
}

const EMAIL_COLUMNS: &str = "workspace_id, mode, id, to_addr, from_addr, subject, html, text, status, error, source, contact_id, deal_id, \
     attempts, next_attempt_at, provider_message_id, created_at, sent_at";

fn email(row: &PgRow) -> Result<EmailMessage, StoreError> {
    let source: serde_json::Value =
        serde_json::from_str(&get::<String>(row, "source")?).map_err(|_| corrupt("source"))?;
    Ok(EmailMessage {
        id: EmailId::from_trusted(get(row, "id")?),
        to: get(row, "to_addr")?,
        from: get(row, "from_addr")?,
        subject: get(row, "subject")?,
        html: get(row, "html")?,
        text: get(row, "text")?,
        status: EmailStatus::parse(&get::<String>(row, "status")?)
            .ok_or_else(|| corrupt("status"))?,
        error: get(row, "error")?,
        source: EmailSource::from_snapshot(&source).ok_or_else(|| corrupt("source"))?,
        contact_id: get::<Option<String>>(row, "contact_id")?.map(ContactId::from_trusted),
        deal_id: get::<Option<String>>(row, "deal_id")?.map(DealId::from_trusted),
        attempts: u32::try_from(get::<i32>(row, "attempts")?).map_err(|_| corrupt("attempts"))?,
        next_attempt_at: ts(row, "next_attempt_at")?,
        provider_message_id: get(row, "provider_message_id")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
        sent_at: ts(row, "sent_at")?,
    })
}

#[async_trait]
impl EmailRepo for PostgresTx {
    async fn insert_connection(
        &mut self,
        tenant: &Tenant,
        c: &Connection,
    ) -> Result<(), StoreError> {
        let api_key = seal(
            &self.secrets(),
            tenant,
            CONNECTIONS,
            c.id.as_str(),
            &c.api_key,
        )?;
        sqlx::query("INSERT INTO connections (workspace_id, mode, id, provider, api_key, from_addr, base_url, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.provider.as_str())
            .bind(&api_key)
            .bind(&c.from)
            .bind(c.base_url.as_deref())
            .bind(c.created_at.millis())
            .execute(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn get_connection(
        &mut self,
        tenant: &Tenant,
        id: &ConnectionId,
    ) -> Result<Option<Connection>, StoreError> {
        let sql = format!("SELECT {CONNECTION_COLUMNS} FROM connections WHERE workspace_id = $1 AND mode = $2 AND id = $3");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        let secrets = self.secrets();
        row.as_ref()
            .map(|r| connection(r, tenant, &secrets))
            .transpose()
    }

    async fn list_connections(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Connection>, StoreError> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {CONNECTION_COLUMNS} FROM connections"));
        tenant_where(&mut qb, tenant);
        slice_clause(&mut qb, slice);
        let rows = qb
            .build()
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        let secrets = self.secrets();
        rows.iter()
            .map(|r| connection(r, tenant, &secrets))
            .collect()
    }

    async fn delete_connection(
        &mut self,
        tenant: &Tenant,
        id: &ConnectionId,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM connections WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(id.as_str())
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn email_connection(
        &mut self,
        tenant: &Tenant,
    ) -> Result<Option<Connection>, StoreError> {
        let sql = format!("SELECT {CONNECTION_COLUMNS} FROM connections WHERE workspace_id = $1 AND mode = $2 ORDER BY id DESC LIMIT 1");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        let secrets = self.secrets();
        row.as_ref()
            .map(|r| connection(r, tenant, &secrets))
            .transpose()
    }

    async fn insert_template(&mut self, tenant: &Tenant, t: &Template) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO templates (workspace_id, mode, id, name, subject, body, text, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(t.id.as_str())
        .bind(&t.name)
        .bind(&t.subject)
        .bind(&t.body)
        .bind(t.text.as_deref())
        .bind(t.created_at.millis())
        .bind(t.updated_at.millis())
        .bind(t.version)
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn get_template(
        &mut self,
        tenant: &Tenant,
        id: &TemplateId,
    ) -> Result<Option<Template>, StoreError> {
        let sql = format!("SELECT {TEMPLATE_COLUMNS} FROM templates WHERE workspace_id = $1 AND mode = $2 AND id = $3");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        row.as_ref().map(template).transpose()
    }

    async fn update_template(&mut self, tenant: &Tenant, t: &Template) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE templates SET name = $4, subject = $5, body = $6, text = $7, updated_at = $8, version = $9
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9 - 1",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(t.id.as_str())
        .bind(&t.name)
        .bind(&t.subject)
        .bind(&t.body)
        .bind(t.text.as_deref())
        .bind(t.updated_at.millis())
        .bind(t.version)
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::Stale)
        }
    }

    async fn delete_template(
        &mut self,
        tenant: &Tenant,
        id: &TemplateId,
    ) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM templates WHERE workspace_id = $1 AND mode = $2 AND id = $3")
                .bind(tenant.workspace_id.as_str())
                .bind(tenant.mode.as_str())
                .bind(id.as_str())
                .execute(self.conn())
                .await
                .map_err(|e| self.failed(e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_templates(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Template>, StoreError> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {TEMPLATE_COLUMNS} FROM templates"));
        tenant_where(&mut qb, tenant);
        slice_clause(&mut qb, slice);
        let rows = qb
            .build()
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter().map(template).collect()
    }

    async fn insert_email(&mut self, tenant: &Tenant, e: &EmailMessage) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO emails (workspace_id, mode, id, to_addr, from_addr, subject, html, text, status, error, source, contact_id, deal_id,
                                 attempts, next_attempt_at, claimed_until, provider_message_id, created_at, sent_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, $16, $17, $18)",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(e.id.as_str())
        .bind(&e.to)
        .bind(&e.from)
        .bind(&e.subject)
        .bind(&e.html)
        .bind(&e.text)
        .bind(e.status.as_str())
        .bind(e.error.as_deref())
        .bind(e.source.snapshot().to_string())
        .bind(e.contact_id.as_ref().map(ContactId::as_str))
        .bind(e.deal_id.as_ref().map(DealId::as_str))
        .bind(e.attempts as i32)
        .bind(e.next_attempt_at.map(Timestamp::millis))
        .bind(e.provider_message_id.as_deref())
        .bind(e.created_at.millis())
        .bind(e.sent_at.map(Timestamp::millis))
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn get_email(
        &mut self,
        tenant: &Tenant,
        id: &EmailId,
    ) -> Result<Option<EmailMessage>, StoreError> {
        let sql = format!(
            "SELECT {EMAIL_COLUMNS} FROM emails WHERE workspace_id = $1 AND mode = $2 AND id = $3"
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        row.as_ref().map(email).transpose()
    }

    async fn list_emails(
        &mut self,
        tenant: &Tenant,
        filter: &EmailFilter,
        slice: &Slice,
    ) -> Result<Vec<EmailMessage>, StoreError> {
        let mut qb = QueryBuilder::<Postgres>::new(format!("SELECT {EMAIL_COLUMNS} FROM emails"));
        tenant_where(&mut qb, tenant);
        if let Some(c) = &filter.contact_id {
            qb.push(" AND contact_id = ").push_bind(c.as_str());
        }
        if let Some(d) = &filter.deal_id {
            qb.push(" AND deal_id = ").push_bind(d.as_str());
        }
        if let Some(s) = filter.status {
            qb.push(" AND status = ").push_bind(s.as_str());
        }
        slice_clause(&mut qb, slice);
        let rows = qb
            .build()
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter().map(email).collect()
    }

    async fn claim_due_emails(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> Result<Vec<(Tenant, EmailMessage)>, StoreError> {
        let sql = format!(
            "UPDATE emails SET claimed_until = $1
             WHERE (workspace_id, mode, id) IN (
                 SELECT workspace_id, mode, id FROM emails
                 WHERE status = 'queued' AND next_attempt_at <= $2 AND (claimed_until IS NULL OR claimed_until <= $2)
                 ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING {EMAIL_COLUMNS}"
        );
        let rows = sqlx::query(&sql)
            .bind(claim_until.millis())
            .bind(now.millis())
            .bind(i64::from(limit))
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter()
            .map(|r| Ok((tenant_of(r)?, email(r)?)))
            .collect()
    }

    async fn finish_email_attempt(
        &mut self,
        tenant: &Tenant,
        e: &EmailMessage,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE emails SET status = $4, error = $5, attempts = $6, next_attempt_at = $7, provider_message_id = $8, sent_at = $9, claimed_until = NULL
             WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(e.id.as_str())
        .bind(e.status.as_str())
        .bind(e.error.as_deref())
        .bind(e.attempts as i32)
        .bind(e.next_attempt_at.map(Timestamp::millis))
        .bind(e.provider_message_id.as_deref())
        .bind(e.sent_at.map(Timestamp::millis))
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(())
    }
}
