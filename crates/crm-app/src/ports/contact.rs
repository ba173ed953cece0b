//! Contacts.

use async_trait::async_trait;
use crm_domain::{CompanyId, Contact, ContactId, Email, ObjectKind, Tenant, UserId};

use super::{Reference, Slice, StoreError};

/// Filters of the contact list. All present filters must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContactFilter {
    /// Case-insensitive substring of first or last name, email, phone or LinkedIn URL.
    pub q: Option<String>,
    pub email: Option<Email>,
    pub company_id: Option<CompanyId>,
    pub contact_type: Option<String>,
    /// Owned by this user (decisions §24).
    pub owner_id: Option<UserId>,
    /// Equality on custom fields, sorted by key (the order is part of the cursor's fingerprint).
    pub custom_fields: Vec<FieldFilter>,
    pub include_deleted: bool,
}

/// `custom_fields.<key> = value`: the record's value equals `value` (a JSON string, number or
/// boolean as the registry normalises it), or, for an array (multiselect), holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldFilter {
    pub key: String,
    pub value: serde_json::Value,
}

#[async_trait]
pub trait ContactRepo {
    /// Inserts `contact` if every record in `refs` exists. MUST return `MissingReference` (of the
    /// first missing one) when one does not, before considering the email, and `Duplicate` when
    /// the email is taken in the tenant (soft-deleted contacts included, merged tombstones not); either leaves the
    /// transaction usable and nothing written.
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        contact: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError>;
    /// Inserts, in their order, each of `contacts` that [`ContactRepo::insert_contact`] would
    /// insert with its company (when it names one) as its only reference, and returns the ids of
    /// those it inserted. One whose company does not exist or whose email is taken (by a stored
    /// contact or by an earlier one of `contacts`) is skipped, writing nothing and leaving the
    /// transaction usable. The caller MUST NOT pass a contact with any other reference (a
    /// reference-typed custom field, or an owner) unless it checked those in the same
    /// transaction (a bulk import does); others go through `insert_contact`. Stores override the
    /// default, one `insert_contact` each, with a multi-row statement (coalesced creates).
    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        let mut inserted = Vec::with_capacity(contacts.len());
        for c in contacts {
            let company = c
                .company_id
                .as_ref()
                .map(|id| Reference::record(ObjectKind::Company, id.as_str()));
            match self.insert_contact(tenant, c, company.as_slice()).await {
                Ok(()) => inserted.push(c.id.clone()),
                Err(StoreError::Duplicate | StoreError::MissingReference(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(inserted)
    }
    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError>;
    /// The contact holding `email` (soft-deleted ones included); a merged tombstone, whose email
    /// no longer counts, MUST NOT be returned.
    async fn get_contact_by_email(
        &mut self,
        tenant: &Tenant,
        email: &Email,
    ) -> Result<Option<Contact>, StoreError>;
    /// The contacts holding any of `emails` (soft-deleted ones included, merged tombstones
    /// not), in any order, read in one statement: a bulk import's duplicates of one chunk.
    async fn contacts_by_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[Email],
    ) -> Result<Vec<Contact>, StoreError>;
    /// Writes every field of each contact whose stored row is at the version paired with it,
    /// and returns the ids it wrote; one whose stored version differs is left as it is. The
    /// email is not written (a bulk import's updates match on it, so it does not change). One
    /// multi-row statement per few hundred contacts.
    async fn update_contacts(
        &mut self,
        tenant: &Tenant,
        updates: &[(&Contact, i64)],
    ) -> Result<Vec<ContactId>, StoreError>;
    /// Writes every field of `contact`, expecting the stored row at `contact.version - 1`; MUST
    /// return `Stale` otherwise and `Duplicate` when the new email is taken.
    async fn update_contact(
        &mut self,
        tenant: &Tenant,
        contact: &Contact,
    ) -> Result<(), StoreError>;
    /// Newest first. Merged tombstones are never listed, not even with `include_deleted`.
    async fn list_contacts(
        &mut self,
        tenant: &Tenant,
        filter: &ContactFilter,
        slice: &Slice,
    ) -> Result<Vec<Contact>, StoreError>;
}
