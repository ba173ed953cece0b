//! Upserts matched on a unique custom field (decisions §24, "Upsert, corrected"):
//! `POST /{contacts|companies|deals}/upsert?match=custom_fields.<key>`. The value is locked
//! ([`crate::unique_fields::value_lock`]), its holder (soft-deleted ones included, restored first)
//! is updated as a PATCH would, or a record is created when none holds it. Deals upsert only so.

use crm_domain::{
    history::Via, Company, CompanyDraft, CompanyPatch, Contact, ContactDraft, ContactPatch, Deal,
    DealDraft, DealPatch, JsonMap, ObjectKind, Tenant, ValidationError,
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

    /// `POST /contacts/upsert?match=custom_fields.<key>`.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn upsert_contact_by_field(
        &self,
        caller: &Caller,
        key: &str,
        draft: ContactDraft,
        patch: ContactPatch,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<(Contact, UpsertOutcome), AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let holder = self
            .match_unique(
                &mut *tx,
                tenant,
                ObjectKind::Contact,
                key,
                &draft.custom_fields,
            )
            .await?;
        let (contact, outcome) = match holder {
            None => {
                let contact = self
                    .create_contact_in(&mut *tx, tenant, draft, &mut fx)
                    .await?;
                (contact, UpsertOutcome::Created)
            }
            Some(id) => {
                let existing = crate::contacts::parse_id(&id)?;
                let existing = tx
                    .get_contact(tenant, &existing)
                    .await?
                    .ok_or_else(|| AppError::not_found("contact", id.clone()))?;
                stale(expected_version, existing.version)?;
                let restored = existing.deleted_at.is_some();
                if restored {
                    self.set_contact_deleted_in(&mut *tx, tenant, &id, false, &mut fx)
                        .await?;
                }
                let contact = self
                    .update_contact_in(&mut *tx, tenant, &id, patch, None, &mut fx)
                    .await?;
                let outcome = outcome(restored, existing.version, contact.version);
                (contact, outcome)
            }
        };
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let contact = crate::contacts::reload(&mut *tx, tenant, contact, &touched).await?;
        store_reply(
            &mut *tx,
            tenant,
            idem,
            outcome,
            self.views.contact(&contact),
        )
        .await?;
        tx.commit().await?;
        Ok((contact, outcome))
    }

    /// `POST /companies/upsert?match=custom_fields.<key>` (a create needs `name`).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn upsert_company_by_field(
        &self,
        caller: &Caller,
        key: &str,
        draft: CompanyDraft,
        patch: CompanyPatch,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<(Company, UpsertOutcome), AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let author = caller.author(Via::Direct);
        let holder = self
            .match_unique(
                &mut *tx,
                tenant,
                ObjectKind::Company,
                key,
                &draft.custom_fields,
            )
            .await?;
        let (company, outcome) = match holder {
            None => {
                let company = self
                    .create_company_in(&mut *tx, tenant, author, draft)
                    .await?;
                (company, UpsertOutcome::Created)
            }
            Some(id) => {
                let parsed = crm_domain::CompanyId::parse(&id)
                    .map_err(|_| AppError::not_found("company", id.clone()))?;
                let existing = tx
                    .get_company(tenant, &parsed)
                    .await?
                    .ok_or_else(|| AppError::not_found("company", id.clone()))?;
                stale(expected_version, existing.version)?;
                let restored = existing.deleted_at.is_some();
                if restored {
                    self.set_company_deleted_in(&mut *tx, tenant, author.clone(), &id, false)
                        .await?;
                }
                let company = self
                    .update_company_in(&mut *tx, tenant, author, &id, patch, None)
                    .await?;
                let outcome = outcome(restored, existing.version, company.version);
                (company, outcome)
            }
        };
        store_reply(
            &mut *tx,
            tenant,
            idem,
            outcome,
            self.views.company(&company),
        )
        .await?;
        tx.commit().await?;
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
        let holder = self
            .match_unique(
                &mut *tx,
                tenant,
                ObjectKind::Deal,
                key,
                &draft.custom_fields,
            )
            .await?;
        let (deal, outcome) = match holder {
            None => {
                let deal = self
                    .create_deal_in(&mut *tx, tenant, draft, pipeline, &mut fx)
                    .await?;
                (deal, UpsertOutcome::Created)
            }
            Some(id) => {
                let parsed = crm_domain::DealId::parse(&id)
                    .map_err(|_| AppError::not_found("deal", id.clone()))?;
                let existing = tx
                    .get_deal(tenant, &parsed)
                    .await?
                    .ok_or_else(|| AppError::not_found("deal", id.clone()))?;
                stale(expected_version, existing.version)?;
                let restored = existing.deleted_at.is_some();
                if restored {
                    self.set_deal_deleted_in(&mut *tx, tenant, &id, false, &mut fx)
                        .await?;
                }
                let deal = self
                    .update_deal_in(&mut *tx, tenant, &id, patch, pipeline, None, &mut fx)
                    .await?;
                let outcome = outcome(restored, existing.version, deal.version);
                (deal, outcome)
            }
        };
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let deal = crate::deals::reload(&mut *tx, tenant, deal, &touched).await?;
        store_reply(&mut *tx, tenant, idem, outcome, self.views.deal(&deal)).await?;
        tx.commit().await?;
        Ok((deal, outcome))
    }
}
