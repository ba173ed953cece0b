//! Custom fields, enum groups and custom object types.

use async_trait::async_trait;
use crm_domain::{FieldDef, ObjectKind, ObjectType, Registry, Tenant, Timestamp};

use super::StoreError;

#[async_trait]
pub trait RegistryRepo {
    /// The custom fields of `object` and every enum group with its values, in registration order.
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError>;
    /// Creates an enum group if absent; returns whether it was created.
    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Adds a value to a group (creating the group) if absent; returns whether it was added.
    async fn insert_enum_value(
        &mut self,
        tenant: &Tenant,
        group: &str,
        value: &str,
        label: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Registers a custom field unless its object already has one with that key; returns whether
    /// it did. An existing field MUST be left exactly as it is (re-registration keeps the original
    /// data type). A new field comes after every field its object already has, also when two
    /// transactions register fields at once (registration order).
    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The custom fields of every object, each object's in registration order.
    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError>;
    /// Adds a custom object type unless one with its key exists (which is left as it is); returns
    /// whether it did.
    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        object_type: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The custom object types in registration order.
    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError>;
}
