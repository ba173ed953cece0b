//! Upserts matched on a unique custom field (decisions §24, "Upsert, corrected"):
//! `POST /{contacts|companies|deals}/upsert?match=custom_fields.<key>`. The value is locked
//! ([`crate::unique_fields::value_lock`]), its holder (soft-deleted ones included, restored first)
//! is updated as a PATCH would, or a record is created when none holds it. Deals upsert only so.
//! The contact and company upserts' public entry points are [`App::upsert_contact`] and
//! [`App::upsert_company`] (upserts.rs), which take the key; a batch runs the `_in` forms.

use crm_domain::{
    history::{Author, Via},
    Company, CompanyDraft, CompanyPatch, Contact, ContactDraft, ContactPatch, Deal, DealDraft,
    DealPatch, JsonMap, ObjectKind, Tenant, ValidationError,
};
use serde_json::Value;

use crate::{
    auth::Caller,
    error::AppError,
    idempotency::IdemClaim,
    ports::Tx,
    unique_fields::value_lock,
    upserts::{store_reply, UpsertOutcome},
    write::{Effects, Emit},
    App,
};

fn stale(expected: Option<i64>, current: i64) -> Result<(), AppError> {
    match expected {
        Some(v) if v != current => Err(AppError::VersionConflict { current }),
        _ => Ok(()),
    }
}

fn outcome(restored: bool, before: i64, after: i64) -> UpsertOutcome {
    if restored || before != after {
        UpsertOutcome::Updated
    } else {
        UpsertOutcome::Unchanged
    }
}

impl App {
    /// The id of the record of `object` holding the value `custom` gives the unique field `key`,
    /// once that value is locked. 400 `bad_request` (with the unique fields as `valid_options`)
    /// when `key` is no unique field of `object`; 422 when `custom` has no value for it.
    async fn match_unique(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        object: ObjectKind,
        key: &str,
        custom: &JsonMap,
    ) -> Result<Option<String>, AppError> {
        let registry = self.registry(&mut *tx, tenant, object).await?;
        if !registry.field(key).is_some_and(|f| f.unique) {
            return Err(AppError::BadRequest {
                detail: format!(
                    "match must be custom_fields.<key> of a unique {} field",
                    object.as_str()
                ),
                valid_options: Some(
                    registry
                        .fields
                        .iter()
                        .filter(|f| f.unique)
                        .map(|f| format!("custom_fields.{}", f.key))
                        .collect(),
                ),
            });
        }
        let field = format!("custom_fields.{key}");
        let raw = custom
            .get(key)
            .filter(|v| !v.is_null())
            .ok_or_else(|| ValidationError::invalid(&field, "is required to upsert on it"))?;
        let mut normal = JsonMap::new();
        let mut given = JsonMap::new();
        given.insert(key.to_owned(), raw.clone());
        registry.merge(&mut normal, given)?;
        let value = normal.get(key).cloned().unwrap_or(Value::Null);
        tx.lock_key(tenant, &value_lock(object, key, &value))
            .await?;
        Ok(tx
            .holder_of_value(tenant, object, key, &value, None)
            .await?)
    }

    /// A contact upsert matched on the unique field `key`, inside a caller's transaction.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert_contact_by_field_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        key: &str,
        draft: ContactDraft,
        patch: ContactPatch,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<(Contact, UpsertOutcome), AppError> {
        let holder = self
            .match_unique(tx, tenant, ObjectKind::Contact, key, &draft.custom_fields)
            .await?;
        let Some(id) = holder else {
            let contact = self.create_contact_in(tx, tenant, draft, fx).await?;
            return Ok((contact, UpsertOutcome::Created));
        };
        let existing = crate::contacts::parse_id(&id)?;
        let existing = tx
            .get_contact(tenant, &existing)
            .await?
            .ok_or_else(|| AppError::not_found("contact", id.clone()))?;
        stale(expected_version, existing.version)?;
        let restored = existing.deleted_at.is_some();
        if restored {
            self.set_contact_deleted_in(tx, tenant, &id, false, fx)
                .await?;
        }
        let contact = self
            .update_contact_in(tx, tenant, &id, patch, None, fx)
            .await?;
        let outcome = outcome(restored, existing.version, contact.version);
        Ok((contact, outcome))
    }

    /// A company upsert matched on the unique field `key` (a create needs `name`), inside a
    /// caller's transaction, by `author`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert_company_by_field_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        key: &str,
        draft: CompanyDraft,
        patch: CompanyPatch,
        expected_version: Option<i64>,
    ) -> Result<(Company, UpsertOutcome), AppError> {
        let holder = self
            .match_unique(tx, tenant, ObjectKind::Company, key, &draft.custom_fields)
            .await?;
        let Some(id) = holder else {
            let company = self.create_company_in(tx, tenant, author, draft).await?;
            return Ok((company, UpsertOutcome::Created));
        };
        let parsed = crm_domain::CompanyId::parse(&id)
            .map_err(|_| AppError::not_found("company", id.clone()))?;
        let existing = tx
            .get_company(tenant, &parsed)
            .await?
            .ok_or_else(|| AppError::not_found("company", id.clone()))?;
        stale(expected_version, existing.version)?;
        let restored = existing.deleted_at.is_some();
        if restored {
            self.set_company_deleted_in(tx, tenant, author.clone(), &id, false)
                .await?;
        }
        let company = self
            .update_company_in(tx, tenant, author, &id, patch, None)
            .await?;
        let outcome = outcome(restored, existing.version, company.version);
        Ok((company, outcome))
    }

    /// `POST /deals/upsert?match=custom_fields.<key>`: the only upsert of deals.
    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn upsert_deal(
        &self,
        caller: &Caller,
        key: &str,
        draft: DealDraft,
        patch: DealPatch,
        pipeline: Option<&str>,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<(Deal, UpsertOutcome), AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let (deal, outcome) = self
            .upsert_deal_in(
                &mut *tx,
                tenant,
                key,
                DealUpsert {
                    draft,
                    patch,
                    pipeline,
                },
                expected_version,
                &mut fx,
            )
            .await?;
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let deal = crate::deals::reload(&mut *tx, tenant, deal, &touched).await?;
        store_reply(&mut *tx, tenant, idem, outcome, self.views.deal(&deal)).await?;
        tx.commit().await?;
        Ok((deal, outcome))
    }

    /// [`App::upsert_deal`] inside a caller's transaction (batch).
    pub(crate) async fn upsert_deal_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        key: &str,
        upsert: DealUpsert<'_>,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<(Deal, UpsertOutcome), AppError> {
        let DealUpsert {
            draft,
            patch,
            pipeline,
        } = upsert;
        let holder = self
            .match_unique(tx, tenant, ObjectKind::Deal, key, &draft.custom_fields)
            .await?;
        let Some(id) = holder else {
            let deal = self.create_deal_in(tx, tenant, draft, pipeline, fx).await?;
            return Ok((deal, UpsertOutcome::Created));
        };
        let parsed =
            crm_domain::DealId::parse(&id).map_err(|_| AppError::not_found("deal", id.clone()))?;
        let existing = tx
            .get_deal(tenant, &parsed)
            .await?
            .ok_or_else(|| AppError::not_found("deal", id.clone()))?;
        stale(expected_version, existing.version)?;
        let restored = existing.deleted_at.is_some();
        if restored {
            self.set_deal_deleted_in(tx, tenant, &id, false, fx).await?;
        }
        let deal = self
            .update_deal_in(tx, tenant, &id, patch, pipeline, None, fx)
            .await?;
        let outcome = outcome(restored, existing.version, deal.version);
        Ok((deal, outcome))
    }
}

/// A deal upsert's body, read as a create (`draft`) and as a PATCH (`patch`), and the pipeline
/// its `pipeline` member names.
pub(crate) struct DealUpsert<'a> {
    pub draft: DealDraft,
    pub patch: DealPatch,
    pub pipeline: Option<&'a str>,
}
