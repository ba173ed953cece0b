//! Unique custom fields (decisions §24, "Upsert, corrected"): a field registered `"unique": true`
//! holds each value at most once per object, workspace and mode. Each write of such a value locks
//! it ([`crate::ports::Tx::lock_key`]) and then looks for another holder, so two concurrent writes
//! of one value cannot both pass; another holder answers 409 `conflict` with it under `existing`.

use crm_domain::{JsonMap, ObjectKind, Registry, Tenant};
use serde_json::Value;

use crate::{error::AppError, ports::Tx, App};

/// The key a write of `value` in the unique field `key` of `object` locks.
pub(crate) fn value_lock(object: ObjectKind, key: &str, value: &Value) -> String {
    format!("{}.custom_fields.{key}:{value}", object.as_str())
}

impl App {
    /// Refuses the values of unique fields in `after` (the record `id`'s custom fields) that
    /// another record of `object` holds; with `before`, only the values that changed are checked.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn check_unique_values(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        object: ObjectKind,
        registry: &Registry,
        id: &str,
        before: Option<&JsonMap>,
        after: &JsonMap,
    ) -> Result<(), AppError> {
        for field in registry.fields.iter().filter(|f| f.unique) {
            let Some(value) = after.get(&field.key).filter(|v| !v.is_null()) else {
                continue;
            };
            if before.is_some_and(|b| b.get(&field.key) == Some(value)) {
                continue;
            }
            tx.lock_key(tenant, &value_lock(object, &field.key, value))
                .await?;
            if let Some(holder) = tx
                .holder_of_value(tenant, object, &field.key, value, Some(id))
                .await?
            {
                let existing = self.record_view(tx, tenant, object, &holder).await?;
                return Err(AppError::Conflict {
                    detail: format!(
                        "another {} holds this value of the unique field custom_fields.{}",
                        object.as_str(),
                        field.key
                    ),
                    existing,
                });
            }
        }
        Ok(())
    }

    /// The body of the record `id` of `object`, if it exists.
    pub(crate) async fn record_view(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<Option<Value>, AppError> {
        Ok(match object {
            ObjectKind::Contact => match crm_domain::ContactId::parse(id) {
                Ok(id) => tx
                    .get_contact(tenant, &id)
                    .await?
                    .map(|c| self.views.contact(&c)),
                Err(_) => None,
            },
            ObjectKind::Company => match crm_domain::CompanyId::parse(id) {
                Ok(id) => tx
                    .get_company(tenant, &id)
                    .await?
                    .map(|c| self.views.company(&c)),
                Err(_) => None,
            },
            ObjectKind::Deal => match crm_domain::DealId::parse(id) {
                Ok(id) => tx.get_deal(tenant, &id).await?.map(|d| self.views.deal(&d)),
                Err(_) => None,
            },
            ObjectKind::Activity => None,
        })
    }
}

/// Whether `registry` has a unique field.
pub(crate) fn has_unique(registry: &Registry) -> bool {
    registry.fields.iter().any(|f| f.unique)
}
