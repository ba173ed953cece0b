//! Unique custom fields (decisions §24): who holds a value, whether values collide, and turning
//! a field unique.

use async_trait::async_trait;
use crm_domain::{ObjectKind, Tenant};
use serde_json::Value;

use super::StoreError;

#[async_trait]
pub trait UniqueRepo {
    /// The id of a record of `object` other than `except` whose custom field `key` holds
    /// `value` (equal as JSON), if any: soft-deleted records count, merged tombstones do not.
    async fn holder_of_value(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        key: &str,
        value: &Value,
        except: Option<&str>,
    ) -> Result<Option<String>, StoreError>;
    /// Whether two records of `object` (merged tombstones aside) hold one value in `key`.
    async fn values_collide(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        key: &str,
    ) -> Result<bool, StoreError>;
    /// Marks the registered field `key` of `object` unique.
    async fn make_field_unique(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        key: &str,
    ) -> Result<(), StoreError>;
}
