//! The store of email connections, templates and email messages (part of [`super::Tx`]).

use async_trait::async_trait;
use crm_domain::{
    mail::{Connection, EmailMessage, EmailStatus, Template},
    ConnectionId, ContactId, DealId, EmailId, TemplateId, Tenant, Timestamp,
};

use super::{Slice, StoreError};

/// Filters of `GET /emails`. All present filters must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmailFilter {
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
    pub status: Option<EmailStatus>,
}

#[async_trait]
pub trait EmailRepo {
    async fn insert_connection(
        &mut self,
        tenant: &Tenant,
        connection: &Connection,
    ) -> Result<(), StoreError>;
    async fn get_connection(
        &mut self,
        tenant: &Tenant,
        id: &ConnectionId,
    ) -> Result<Option<Connection>, StoreError>;
    /// Newest first.
    async fn list_connections(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Connection>, StoreError>;
    /// Returns whether it existed.
    async fn delete_connection(
        &mut self,
        tenant: &Tenant,
        id: &ConnectionId,
    ) -> Result<bool, StoreError>;
    /// The tenant's newest email connection: the one sends go through.
    async fn email_connection(&mut self, tenant: &Tenant)
        -> Result<Option<Connection>, StoreError>;

    async fn insert_template(
        &mut self,
        tenant: &Tenant,
        template: &Template,
    ) -> Result<(), StoreError>;
    async fn get_template(
        &mut self,
        tenant: &Tenant,
        id: &TemplateId,
    ) -> Result<Option<Template>, StoreError>;
    /// MUST return `Stale` unless the stored row is at `version - 1`.
    async fn update_template(
        &mut self,
        tenant: &Tenant,
        template: &Template,
    ) -> Result<(), StoreError>;
    async fn delete_template(
        &mut self,
        tenant: &Tenant,
        id: &TemplateId,
    ) -> Result<bool, StoreError>;
    /// Newest first.
    async fn list_templates(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Template>, StoreError>;

    async fn insert_email(
        &mut self,
        tenant: &Tenant,
        email: &EmailMessage,
    ) -> Result<(), StoreError>;
    async fn get_email(
        &mut self,
        tenant: &Tenant,
        id: &EmailId,
    ) -> Result<Option<EmailMessage>, StoreError>;
    /// Newest first.
    async fn list_emails(
        &mut self,
        tenant: &Tenant,
        filter: &EmailFilter,
        slice: &Slice,
    ) -> Result<Vec<EmailMessage>, StoreError>;
    /// Claims up to `limit` `queued` emails of any tenant that are due (`next_attempt_at <= now`)
    /// and not claimed by anyone else (no claim, or one that expired by `now`), oldest due
    /// first, claiming them until `claim_until`. Two concurrent claimers MUST never both get one
    /// email (Postgres: `FOR UPDATE SKIP LOCKED`); a claimer that dies loses its claims when they
    /// expire, so the email is tried again (at least once).
    async fn claim_due_emails(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> Result<Vec<(Tenant, EmailMessage)>, StoreError>;
    /// Writes an attempt's outcome (status, error, attempts, next attempt, provider id, sent
    /// time) and drops the claim.
    async fn finish_email_attempt(
        &mut self,
        tenant: &Tenant,
        email: &EmailMessage,
    ) -> Result<(), StoreError>;
}
