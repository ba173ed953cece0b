//! Contact use cases.

use crm_domain::{
    contact::References, Contact, ContactDraft, ContactId, ContactPatch, Event, EventId, EventType, ObjectKind, Tenant,
    Timestamp,
};

use crate::{
    auth::Caller,
    error::AppError,
    idempotency::{IdemClaim, StoredReply},
    paging::{page_from, slice_for, Page, PageParams},
    ports::{ContactFilter, StoreError, Tx},
    App,
};

const LIST: &str = "contacts";

pub(crate) fn parse_id(id: &str) -> Result<ContactId, AppError> {
    ContactId::parse(id).map_err(|_| AppError::not_found("contact", id))
}

/// Fails with `invalid_reference` when a referenced record does not exist in the tenant.
pub(crate) async fn check_references(tx: &mut dyn Tx, tenant: &Tenant, refs: &References) -> Result<(), AppError> {
    if let Some(company) = &refs.company_id {
        if !tx.record_exists(tenant, ObjectKind::Company, company.as_str()).await? {
            return Err(crm_domain::ValidationError::InvalidReference { field: "company_id".into(), value: company.to_string() }.into());
        }
    }
    crate::companies::check_custom_references(tx, tenant, &refs.custom).await
}

/// Writes the reply of a create to its idempotency record, inside the create's transaction.
pub(crate) async fn finish_in_tx(tx: &mut dyn Tx, tenant: &Tenant, idem: Option<&IdemClaim>, status: u16, body: &serde_json::Value) -> Result<(), AppError> {
    if let Some(claim) = idem {
        let reply = StoredReply { status, body: serde_json::to_vec(body).map_err(|e| AppError::Internal(e.to_string()))? };
        tx.finish_idempotency(tenant, &claim.key, &reply).await?;
    }
    Ok(())
}

fn conflict(existing: &Contact) -> AppError {
    let detail = match existing.deleted_at {
        Some(_) => "a deleted contact holds this email; restore it with POST /contacts/{id}/restore",
        None => "a contact with this email already exists",
    };
    AppError::Conflict { detail: detail.into(), existing: Some(existing.snapshot()) }
}

impl App {
    fn event(&self, tenant: &Tenant, event_type: EventType, now: Timestamp, contact: &Contact, changed: Option<Vec<String>>) -> Event {
        Event {
            id: EventId::from_uuid(self.ids.new_uuid()),
            event_type,
            mode: tenant.mode,
            created_at: now,
            data: contact.snapshot(),
            changed_fields: changed,
            previous_stage: None,
        }
    }

    /// Creates a contact and its `contact.created` event in one transaction.
    #[tracing::instrument(skip_all, err(level = "debug"))]
    pub async fn create_contact(&self, caller: &Caller, draft: ContactDraft, idem: Option<&IdemClaim>) -> Result<Contact, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let registry = tx.load_registry(tenant, ObjectKind::Contact).await?;
        let now = self.clock.now();
        let (contact, refs) = Contact::create(ContactId::from_uuid(self.ids.new_uuid()), now, draft, &registry)?;
        check_references(&mut *tx, tenant, &refs).await?;
        match tx.insert_contact(tenant, &contact).await {
            Err(StoreError::Duplicate) => return Err(self.email_conflict(&mut *tx, tenant, &contact).await),
            other => other?,
        }
        tx.insert_event(tenant, &self.event(tenant, EventType::ContactCreated, now, &contact, None)).await?;
        finish_in_tx(&mut *tx, tenant, idem, 201, &contact.snapshot()).await?;
        tx.commit().await?;
        Ok(contact)
    }

    async fn email_conflict(&self, tx: &mut dyn Tx, tenant: &Tenant, contact: &Contact) -> AppError {
        let Some(email) = &contact.email else {
            return AppError::Internal("duplicate contact without an email".into());
        };
        match tx.get_contact_by_email(tenant, email).await {
            Ok(Some(existing)) => conflict(&existing),
            Ok(None) => AppError::Internal("duplicate email but no holder found".into()),
            Err(e) => e.into(),
        }
    }

    pub async fn get_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_contact(&caller.tenant, &id).await?.ok_or_else(|| AppError::not_found("contact", id.as_str()))
    }

    /// Applies a partial update; `expected_version` is the `If-Match` precondition.
    #[tracing::instrument(skip_all, err(level = "debug"))]
    pub async fn update_contact(&self, caller: &Caller, id: &str, patch: ContactPatch, expected_version: Option<i64>) -> Result<Contact, AppError> {
        let tenant = &caller.tenant;
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut contact = tx.get_contact(tenant, &id).await?.ok_or_else(|| AppError::not_found("contact", id.as_str()))?;
        if expected_version.is_some_and(|v| v != contact.version) {
            return Err(AppError::VersionConflict { current: contact.version });
        }
        if contact.deleted_at.is_some() {
            return Err(AppError::Conflict { detail: "this contact is deleted; restore it before updating".into(), existing: None });
        }
        let registry = tx.load_registry(tenant, ObjectKind::Contact).await?;
        let now = self.clock.now();
        let (changed, refs) = contact.apply(patch, now, &registry)?;
        if changed.is_empty() {
            return Ok(contact);
        }
        check_references(&mut *tx, tenant, &refs).await?;
        match tx.update_contact(tenant, &contact).await {
            Err(StoreError::Duplicate) => return Err(self.email_conflict(&mut *tx, tenant, &contact).await),
            Err(StoreError::Stale) => return Err(AppError::VersionConflict { current: contact.version - 1 }),
            other => other?,
        }
        let changed = changed.into_iter().map(String::from).collect();
        tx.insert_event(tenant, &self.event(tenant, EventType::ContactUpdated, now, &contact, Some(changed))).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// Soft delete. Deleting a deleted contact answers the same.
    pub async fn delete_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        self.set_contact_deleted(caller, id, true).await
    }

    /// Restoring an active contact is a no-op that returns it.
    pub async fn restore_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        self.set_contact_deleted(caller, id, false).await
    }

    async fn set_contact_deleted(&self, caller: &Caller, id: &str, deleted: bool) -> Result<Contact, AppError> {
        let tenant = &caller.tenant;
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut contact = tx.get_contact(tenant, &id).await?.ok_or_else(|| AppError::not_found("contact", id.as_str()))?;
        if contact.deleted_at.is_some() == deleted {
            return Ok(contact);
        }
        let now = self.clock.now();
        contact.deleted_at = deleted.then_some(now);
        contact.updated_at = now;
        contact.version += 1;
        tx.update_contact(tenant, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }

    pub async fn list_contacts(&self, caller: &Caller, filter: ContactFilter, page: PageParams) -> Result<Page<Contact>, AppError> {
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, LIST, &fingerprint)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_contacts(&caller.tenant, &filter, &slice).await?;
        Ok(page_from(rows, &page, LIST, &fingerprint, |c| c.id.as_str()))
    }

    /// Checks a contact `type` filter value against the registered values.
    pub async fn check_contact_type(&self, caller: &Caller, value: &str) -> Result<(), AppError> {
        let mut tx = self.store.begin_read().await?;
        let registry = tx.load_registry(&caller.tenant, ObjectKind::Contact).await?;
        Ok(registry.check_enum("type", crm_domain::contact::CONTACT_TYPE_GROUP, value)?)
    }
}
