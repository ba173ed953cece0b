//! Upserts (decisions §18, §23, §24): a contact matched by its normalised email is updated as a
//! PATCH would (restored first when soft-deleted), else created. Concurrent upserts of one key
//! serialize on a lock of the key ([`crate::ports::Tx::lock_key`]), so none creates a duplicate
//! and no uniqueness conflict leaks out of an upsert.

use crm_domain::{
    company::normalise_domain,
    history::{Author, Via},
    Company, CompanyDraft, CompanyPatch, Contact, ContactDraft, ContactPatch, Email, Tenant,
    ValidationError,
};
use serde_json::{json, Value};

use crate::{
    auth::Caller,
    contacts::reload,
    error::AppError,
    idempotency::{IdemClaim, StoredReply},
    ports::{CompanyFilter, Slice, Tx},
    write::{Effects, Emit},
    App,
};

/// What an upsert did: the `Upsert-Outcome` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpsertOutcome {
    Created,
    Updated,
    Unchanged,
}

impl UpsertOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            UpsertOutcome::Created => "created",
            UpsertOutcome::Updated => "updated",
            UpsertOutcome::Unchanged => "unchanged",
        }
    }

    pub fn parse(s: &str) -> Option<UpsertOutcome> {
        [Self::Created, Self::Updated, Self::Unchanged]
            .into_iter()
            .find(|o| o.as_str() == s)
    }

    /// The status the upsert answers: 201 for a create, else 200.
    pub fn status(self) -> u16 {
        match self {
            UpsertOutcome::Created => 201,
            _ => 200,
        }
    }
}

/// The reply an upsert stores for its `Idempotency-Key`: the record and the outcome, which a
/// replay answers as the `Upsert-Outcome` header again (crm-api unwraps it).
pub fn stored_upsert_reply(outcome: UpsertOutcome, record: Value) -> Value {
    json!({"upsert_outcome": outcome.as_str(), "record": record})
}

/// The key upserts of a contact by `email` lock.
fn contact_key(email: &Email) -> String {
    format!("contact.email:{}", email.as_str())
}

pub(crate) async fn store_reply(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    idem: Option<&IdemClaim>,
    outcome: UpsertOutcome,
    body: Value,
) -> Result<(), AppError> {
    if let Some(claim) = idem {
        let reply = StoredReply {
            status: outcome.status(),
            body: serde_json::to_vec(&stored_upsert_reply(outcome, body))
                .map_err(|e| AppError::Internal(e.to_string()))?,
        };
        tx.finish_idempotency(tenant, &claim.key, &reply).await?;
    }
    Ok(())
}

impl App {
    /// `POST /contacts/upsert`: `draft` (with `email`) creates the contact when no contact holds
    /// the email; `patch` (the same body read as a PATCH) updates the one that does, restoring it
    /// first when soft-deleted. `expected_version` (`If-Match`) is checked against the match.
    /// With `key` (`?match=custom_fields.<key>`) the unique custom field is matched instead
    /// (field_upserts.rs).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn upsert_contact(
        &self,
        caller: &Caller,
        key: Option<&str>,
        draft: ContactDraft,
        patch: ContactPatch,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<(Contact, UpsertOutcome), AppError> {
        let tenant = &caller.tenant;
        if let Some(done) = self
            .upsert_unlocked(caller, key, &draft, &patch, expected_version, idem)
            .await?
        {
            return Ok(done);
        }
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let (contact, outcome) = self
            .upsert_contact_on(
                &mut *tx,
                tenant,
                key,
                draft,
                patch,
                expected_version,
                &mut fx,
            )
            .await?;
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let contact = reload(&mut *tx, tenant, contact, &touched).await?;
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

    /// An upsert by email, run without the key's lock when a read on a reader connection
    /// decides it: an email no contact holds is a create ([`App::create_contact`], which groups
    /// creates into shared transactions or writes a plain one in one statement); an active
    /// holder is updated as a PATCH would, with the version read as its `If-Match`, so the
    /// update applies only to the contact as read (still holding the email, not deleted).
    /// `None` when the upsert is not such a one (a `match` key, an `Idempotency-Key`, whose
    /// reply an upsert stores in its own shape, a dry run, an email that does not parse, a
    /// soft-deleted holder, which is restored first) or when a write came between the read
    /// and its own: the transactional upsert under the key's lock then decides, as it would
    /// have.
    async fn upsert_unlocked(
        &self,
        caller: &Caller,
        key: Option<&str>,
        draft: &ContactDraft,
        patch: &ContactPatch,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<Option<(Contact, UpsertOutcome)>, AppError> {
        if key.is_some() || idem.is_some() || self.dry().is_some() {
            return Ok(None);
        }
        let Some(email) = draft.email.as_deref().and_then(Email::parse) else {
            return Ok(None);
        };
        let held = {
            let mut tx = self.store.begin_read().await?;
            tx.get_contact_by_email(&caller.tenant, &email).await?
        };
        let Some(existing) = held else {
            return match self.create_contact(caller, draft.clone(), None).await {
                Ok(contact) => Ok(Some((contact, UpsertOutcome::Created))),
                Err(AppError::Conflict { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        };
        if existing.deleted_at.is_some() || existing.merged_into.is_some() {
            return Ok(None);
        }
        if expected_version.is_some_and(|v| v != existing.version) {
            return Ok(None);
        }
        let id = existing.id.as_str();
        match self
            .update_contact(caller, id, patch.clone(), Some(existing.version))
            .await
        {
            Ok(contact) => {
                let outcome = if contact.version != existing.version {
                    UpsertOutcome::Updated
                } else {
                    UpsertOutcome::Unchanged
                };
                Ok(Some((contact, outcome)))
            }
            Err(
                AppError::VersionConflict { .. }
                | AppError::NotFound { .. }
                | AppError::Conflict { .. },
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`App::upsert_contact`] inside a caller's transaction (batch): by email, or by the unique
    /// field `key`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert_contact_on(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        key: Option<&str>,
        draft: ContactDraft,
        patch: ContactPatch,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<(Contact, UpsertOutcome), AppError> {
        match key {
            None => {
                self.upsert_contact_in(tx, tenant, draft, patch, expected_version, fx)
                    .await
            }
            Some(key) => {
                self.upsert_contact_by_field_in(tx, tenant, key, draft, patch, expected_version, fx)
                    .await
            }
        }
    }

    /// A contact upsert by email inside a caller's transaction (batch, imports).
    pub(crate) async fn upsert_contact_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: ContactDraft,
        patch: ContactPatch,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<(Contact, UpsertOutcome), AppError> {
        let raw = draft
            .email
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .ok_or_else(|| ValidationError::invalid("email", "is required to upsert a contact"))?;
        let email = Email::parse(raw)
            .ok_or_else(|| ValidationError::invalid("email", "is not a valid e-mail address"))?;
        tx.lock_key(tenant, &contact_key(&email)).await?;
        let existing = match tx.get_contact_by_email(tenant, &email).await? {
            Some(existing) => existing,
            None => match self.create_contact_in(tx, tenant, draft, fx).await {
                Ok(contact) => return Ok((contact, UpsertOutcome::Created)),
                // An upsert run as a plain create (`upsert_as_create`) takes no key lock, so
                // it may have created the contact meanwhile: that one is updated instead.
                Err(conflict @ AppError::Conflict { .. }) => {
                    match tx.get_contact_by_email(tenant, &email).await? {
                        Some(existing) => existing,
                        None => return Err(conflict),
                    }
                }
                Err(e) => return Err(e),
            },
        };
        if expected_version.is_some_and(|v| v != existing.version) {
            return Err(AppError::VersionConflict {
                current: existing.version,
            });
        }
        let id = existing.id.as_str().to_owned();
        let restored = existing.deleted_at.is_some();
        if restored {
            self.set_contact_deleted_in(tx, tenant, &id, false, fx)
                .await?;
        }
        let contact = self
            .update_contact_in(tx, tenant, &id, patch, None, fx)
            .await?;
        let outcome = if restored || contact.version != existing.version {
            UpsertOutcome::Updated
        } else {
            UpsertOutcome::Unchanged
        };
        Ok((contact, outcome))
    }
}

impl App {
    /// `POST /companies/upsert`: matched on the normalised `domain` among active companies (409
    /// `conflict` with `candidates` when several hold it); none active, a soft-deleted holder is
    /// restored and updated; none at all, `draft` creates one (with its `name`).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn upsert_company(
        &self,
        caller: &Caller,
        key: Option<&str>,
        draft: CompanyDraft,
        patch: CompanyPatch,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<(Company, UpsertOutcome), AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let author = caller.author(Via::Direct);
        let (company, outcome) = self
            .upsert_company_on(
                &mut *tx,
                tenant,
                author,
                key,
                draft,
                patch,
                expected_version,
            )
            .await?;
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

    /// [`App::upsert_company`] inside a caller's transaction (batch), by `author`: by domain, or
    /// by the unique field `key`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert_company_on(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        key: Option<&str>,
        draft: CompanyDraft,
        patch: CompanyPatch,
        expected_version: Option<i64>,
    ) -> Result<(Company, UpsertOutcome), AppError> {
        match key {
            None => {
                let domain = company_upsert_domain(&draft)?;
                self.upsert_company_in(tx, tenant, author, &domain, draft, patch, expected_version)
                    .await
            }
            Some(key) => {
                self.upsert_company_by_field_in(
                    tx,
                    tenant,
                    author,
                    key,
                    draft,
                    patch,
                    expected_version,
                )
                .await
            }
        }
    }

    /// A company upsert inside a caller's transaction (batch, imports), by `author`, for the
    /// normalised `domain` ([`company_upsert_domain`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert_company_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        domain: &str,
        draft: CompanyDraft,
        patch: CompanyPatch,
        expected_version: Option<i64>,
    ) -> Result<(Company, UpsertOutcome), AppError> {
        tx.lock_key(tenant, &format!("company.domain:{domain}"))
            .await?;
        let filter = |include_deleted| CompanyFilter {
            q: None,
            domain: Some(domain.to_owned()),
            owner_id: None,
            include_deleted,
        };
        let page = Slice {
            before: None,
            limit: 100,
        };
        let active = tx.list_companies(tenant, &filter(false), &page).await?;
        let matched = match active.as_slice() {
            [] => tx
                .list_companies(tenant, &filter(true), &page)
                .await?
                .into_iter()
                .find(|c| c.deleted_at.is_some()),
            [one] => Some(one.clone()),
            several => {
                return Err(AppError::Ambiguous {
                    detail: format!(
                        "{} active companies have the domain {domain}",
                        several.len()
                    ),
                    candidates: several.iter().map(|c| c.id.to_string()).collect(),
                })
            }
        };
        let (company, outcome) = match matched {
            None => {
                let company = self
                    .create_company_in(&mut *tx, tenant, author, draft)
                    .await?;
                (company, UpsertOutcome::Created)
            }
            Some(existing) => {
                if expected_version.is_some_and(|v| v != existing.version) {
                    return Err(AppError::VersionConflict {
                        current: existing.version,
                    });
                }
                let restored = existing.deleted_at.is_some();
                if restored {
                    self.set_company_deleted_in(
                        &mut *tx,
                        tenant,
                        author.clone(),
                        existing.id.as_str(),
                        false,
                    )
                    .await?;
                }
                let company = self
                    .update_company_in(&mut *tx, tenant, author, existing.id.as_str(), patch, None)
                    .await?;
                let outcome = if restored || company.version != existing.version {
                    UpsertOutcome::Updated
                } else {
                    UpsertOutcome::Unchanged
                };
                (company, outcome)
            }
        };
        Ok((company, outcome))
    }
}

/// The normalised domain a company upsert matches on (decisions §24): `domain` is required.
pub(crate) fn company_upsert_domain(draft: &CompanyDraft) -> Result<String, AppError> {
    let raw = draft
        .domain
        .clone()
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| ValidationError::invalid("domain", "is required to upsert a company"))?;
    Ok(normalise_domain(raw)?)
}
