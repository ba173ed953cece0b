//! Company use cases. Company changes emit no events (spec, Events).

use serde_json::Value;

use crm_domain::{
    history::{Author, ChangeAction, Via},
    Company, CompanyDraft, CompanyId, CompanyPatch, ObjectKind, Tenant, Timestamp,
};

use crate::{
    auth::Caller,
    contacts::deleted_action,
    error::AppError,
    idempotency::IdemClaim,
    merges::Mergeable,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{CompanyFilter, StoreError, Tx},
    write::{check_references, finish_in_tx, Effects, Emit},
    App,
};

const LIST: &str = "companies";

fn parse_id(id: &str) -> Result<CompanyId, AppError> {
    CompanyId::parse(id).map_err(|_| AppError::not_found("company", id))
}

impl App {
    /// Writes the history entry of one change of a company in `tx` (companies have no events, so
    /// nothing else settles it).
    #[allow(clippy::too_many_arguments)]
    async fn company_history(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        company: &Company,
        action: ChangeAction,
        at: Timestamp,
        before: Option<&Value>,
        after: Option<&Value>,
    ) -> Result<(), AppError> {
        let mut fx = Effects::new(Emit::Silent, author);
        self.record_change(
            &mut fx,
            ObjectKind::Company,
            company.id.as_str(),
            action,
            at,
            before,
            after,
        );
        let history = fx.take_history();
        if !history.is_empty() {
            tx.insert_changes(tenant, &history).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_company(
        &self,
        caller: &Caller,
        draft: CompanyDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Company, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let company = self
            .create_company_in(&mut *tx, tenant, caller.author(Via::Direct), draft)
            .await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.company(&company)).await?;
        tx.commit().await?;
        Ok(company)
    }

    /// Creates a company in `tx`, with its history entry.
    pub(crate) async fn create_company_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        draft: CompanyDraft,
    ) -> Result<Company, AppError> {
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Company).await?;
        let (company, refs) = Company::create(
            CompanyId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
            &registry,
        )?;
        check_references(&mut *tx, tenant, &refs).await?;
        let id = company.id.as_str();
        self.check_unique_values(
            tx,
            tenant,
            ObjectKind::Company,
            &registry,
            id,
            None,
            &company.custom_fields,
        )
        .await?;
        tx.insert_company(tenant, &company).await?;
        let body = self.views.company(&company);
        self.company_history(
            tx,
            tenant,
            author,
            &company,
            ChangeAction::Created,
            company.created_at,
            None,
            Some(&body),
        )
        .await?;
        Ok(company)
    }

    pub async fn get_company(&self, caller: &Caller, id: &str) -> Result<Company, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_company(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("company", id.as_str()))
    }

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_company(
        &self,
        caller: &Caller,
        id: &str,
        patch: CompanyPatch,
        expected_version: Option<i64>,
    ) -> Result<Company, AppError> {
        let mut tx = self.store.begin_write().await?;
        let company = self
            .update_company_in(
                &mut *tx,
                &caller.tenant,
                caller.author(Via::Direct),
                id,
                patch,
                expected_version,
            )
            .await?;
        tx.commit().await?;
        Ok(company)
    }

    /// Applies a partial update in `tx`, with its history entry.
    pub(crate) async fn update_company_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        id: &str,
        patch: CompanyPatch,
        expected_version: Option<i64>,
    ) -> Result<Company, AppError> {
        let id = parse_id(id)?;
        let mut company = tx
            .get_company(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("company", id.as_str()))?;
        company.refuse_tombstone(self, &mut *tx, tenant).await?;
        if expected_version.is_some_and(|v| v != company.version) {
            return Err(AppError::VersionConflict {
                current: company.version,
            });
        }
        if company.deleted_at.is_some() {
            return Err(AppError::Conflict {
                detail: "this company is deleted; restore it before updating".into(),
                existing: None,
            });
        }
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Company).await?;
        let before = self.views.company(&company);
        let old_custom = company.custom_fields.clone();
        let now = self.clock.now();
        let (changed, refs) = company.apply(patch, now, &registry)?;
        if changed.is_empty() {
            return Ok(company);
        }
        check_references(&mut *tx, tenant, &refs).await?;
        let id = company.id.as_str();
        self.check_unique_values(
            tx,
            tenant,
            ObjectKind::Company,
            &registry,
            id,
            Some(&old_custom),
            &company.custom_fields,
        )
        .await?;
        match tx.update_company(tenant, &company).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: company.version - 1,
                })
            }
            other => other?,
        }
        self.company_history(
            tx,
            tenant,
            author,
            &company,
            ChangeAction::Updated,
            now,
            Some(&before),
            Some(&self.views.company(&company)),
        )
        .await?;
        Ok(company)
    }

    pub async fn delete_company(&self, caller: &Caller, id: &str) -> Result<Company, AppError> {
        self.set_company_deleted(caller, id, true).await
    }

    pub async fn restore_company(&self, caller: &Caller, id: &str) -> Result<Company, AppError> {
        self.set_company_deleted(caller, id, false).await
    }

    async fn set_company_deleted(
        &self,
        caller: &Caller,
        id: &str,
        deleted: bool,
    ) -> Result<Company, AppError> {
        let mut tx = self.store.begin_write().await?;
        let company = self
            .set_company_deleted_in(
                &mut *tx,
                &caller.tenant,
                caller.author(Via::Direct),
                id,
                deleted,
            )
            .await?;
        tx.commit().await?;
        Ok(company)
    }

    /// Soft-deletes (`deleted`) or restores a company in `tx`, with its history entry; a no-op
    /// when it already is so.
    pub(crate) async fn set_company_deleted_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        author: Author,
        id: &str,
        deleted: bool,
    ) -> Result<Company, AppError> {
        let id = parse_id(id)?;
        let mut company = tx
            .get_company(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("company", id.as_str()))?;
        company.refuse_tombstone(self, &mut *tx, tenant).await?;
        if company.deleted_at.is_some() == deleted {
            return Ok(company);
        }
        let now = self.clock.now();
        company.deleted_at = deleted.then_some(now);
        company.updated_at = now;
        company.version += 1;
        tx.update_company(tenant, &company).await?;
        self.company_history(
            tx,
            tenant,
            author,
            &company,
            deleted_action(deleted),
            now,
            None,
            None,
        )
        .await?;
        Ok(company)
    }

    pub async fn list_companies(
        &self,
        caller: &Caller,
        filter: CompanyFilter,
        page: PageParams,
    ) -> Result<Page<Company>, AppError> {
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, &caller.tenant, LIST, &fingerprint)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_companies(&caller.tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            LIST,
            &fingerprint,
            |c| c.id.to_string(),
        ))
    }
}
