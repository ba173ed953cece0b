//! Merges of contacts and companies (decisions §18, §24): finding what points at the merged
//! records, pointing it at the survivor, and making the merged records tombstones.

use async_trait::async_trait;
use crm_domain::{sequence::Enrollment, ContactId, ObjectKind, Tenant, Timestamp};

use super::StoreError;

/// A field that may hold the id of a contact or company.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefField<'a> {
    /// A contact's `company_id`.
    ContactCompany,
    /// A deal's `primary_contact_id`.
    DealPrimaryContact,
    /// A deal's `company_id`.
    DealCompany,
    /// An activity's `contact_id`.
    ActivityContact,
    /// The `reference` custom field `key` of records of the object.
    Custom(ObjectKind, &'a str),
}

impl RefField<'_> {
    /// The object whose records hold the field.
    pub fn object(&self) -> ObjectKind {
        match self {
            RefField::ContactCompany => ObjectKind::Contact,
            RefField::DealPrimaryContact | RefField::DealCompany => ObjectKind::Deal,
            RefField::ActivityContact => ObjectKind::Activity,
            RefField::Custom(object, _) => *object,
        }
    }

    /// The field's name in a record body and in history (`custom_fields.<key>`).
    pub fn name(&self) -> String {
        match self {
            RefField::ContactCompany | RefField::DealCompany => "company_id".into(),
            RefField::DealPrimaryContact => "primary_contact_id".into(),
            RefField::ActivityContact => "contact_id".into(),
            RefField::Custom(_, key) => format!("custom_fields.{key}"),
        }
    }
}

/// A record whose field holds one of a merge's merged ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referrer {
    pub id: String,
    /// The merged id the field holds.
    pub target: String,
}

#[async_trait]
pub trait MergeRepo {
    /// The records of `field.object()` whose `field` holds one of `targets`, each once with the
    /// id it holds, ordered by id; soft-deleted records included, merged tombstones not; locked
    /// for update in a write transaction (Postgres).
    async fn referrers(
        &mut self,
        tenant: &Tenant,
        field: RefField<'_>,
        targets: &[&str],
    ) -> Result<Vec<Referrer>, StoreError>;
    /// Sets `field` to `to` on the records `ids` of `field.object()` (a custom field keeps its
    /// other keys), each at `version` + 1 with `updated_at` = `now`, in one statement. Returns
    /// how many rows it wrote.
    async fn repoint(
        &mut self,
        tenant: &Tenant,
        field: RefField<'_>,
        ids: &[&str],
        to: &str,
        now: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Makes the contacts or companies (`object`) `ids` tombstones of a merge into `survivor`:
    /// `merged_into` = `survivor`, `deleted_at` = `updated_at` = `now`, `version` + 1. Only rows
    /// that are not tombstones already are written; returns how many. A tombstone's email no
    /// longer counts for uniqueness ([`super::ContactRepo::insert_contact`]).
    async fn tombstone(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        ids: &[&str],
        survivor: &str,
        now: Timestamp,
    ) -> Result<u64, StoreError>;
    /// Every enrollment of `contacts`, in any state, ordered by id (locked for update in a write
    /// transaction).
    async fn enrollments_of_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[ContactId],
    ) -> Result<Vec<Enrollment>, StoreError>;
    /// Writes the contact, source and `updated_at` of each of `enrollments` (the other fields
    /// stay). The caller MUST NOT give a contact two enrollments in one sequence.
    async fn move_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<(), StoreError>;
}
