//! Records by kind and id: what a reference-typed field or a write's references point at (and
//! the users records name as their owners).

use async_trait::async_trait;
use crm_domain::{Company, CompanyId, ObjectKind, Tenant, Timestamp, UserId};

use super::{ClearedReference, StoreError};

/// What a reference points at: a record of the tenant, or a user of its workspace (a record's
/// owner, decisions §24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Referent {
    Record(ObjectKind),
    User,
}

/// A record (or owner) a write points at, which must exist (as [`RecordRepo::record_exists`]
/// and [`RecordRepo::owner_exists`] say) for the write to happen. Handing these to the insert
/// instead of checking them first lets a networked store check them in the INSERT itself: one
/// round trip fewer per create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference<'a> {
    pub referent: Referent,
    pub id: &'a str,
}

impl Reference<'_> {
    pub fn record(object: ObjectKind, id: &str) -> Reference<'_> {
        Reference {
            referent: Referent::Record(object),
            id,
        }
    }
}

#[async_trait]
pub trait RecordRepo {
    /// Whether a record of `object` with this id exists in the tenant (soft-deleted ones count:
    /// they can be restored, and references to them stay valid).
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError>;
    /// Whether the tenant's workspace has a user with this id, who may own its records. In a
    /// writing transaction of a store with concurrent writers, the user cannot be deleted until
    /// it ends (so no record is left owned by a deleted user); an insert that checks its
    /// references itself MUST hold the user the same way.
    async fn owner_exists(&mut self, tenant: &Tenant, id: &str) -> Result<bool, StoreError>;
    /// Sets `owner_id` to null on every contact, company and deal of the tenant that `user`
    /// owns (merged tombstones and soft-deleted records included), with `version` + 1 and
    /// `updated_at` = `now`; returns them. A user's deletion calls it for each mode before and
    /// after deleting the user (after: for records whose writes named the user meanwhile, which
    /// the deletion waited for: see `owner_exists`).
    async fn clear_owner(
        &mut self,
        tenant: &Tenant,
        user: &UserId,
        now: Timestamp,
    ) -> Result<Vec<ClearedReference>, StoreError>;
    /// The companies of `ids` in the tenant, soft-deleted ones included, in any order, read in
    /// one statement (the related records of a page: decisions §19). Ids of no company are
    /// absent.
    async fn companies_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[CompanyId],
    ) -> Result<Vec<Company>, StoreError>;
}
