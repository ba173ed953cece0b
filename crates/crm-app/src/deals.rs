//! Deal use cases: create, read, update (stage moves emit `deal.stage_changed`), soft delete,
//! restore, list.

use crm_domain::{
    history::{ChangeAction, Via},
    CompanyId, ContactId, Deal, DealDraft, DealId, DealPatch, EventType, ObjectKind, Tenant,
    UserId,
};

use crate::{
    auth::Caller,
    contacts::deleted_action,
    error::AppError,
    idempotency::IdemClaim,
    paging::{page_from, slice_for, Page, PageParams},
    pipelines,
    ports::{DealFilter, RowLock, StoreError, Tx},
    write::{check_references, finish_in_tx, Effects, Emit, RecordRef, Touched},
    App,
};

const LIST: &str = "deals";

fn parse_id(id: &str) -> Result<DealId, AppError> {
    DealId::parse(id).map_err(|_| AppError::not_found("deal", id))
}

/// The deal list's filters as the client sent them; the pipeline is a key or an id.
#[derive(Debug, Clone, Default)]
pub struct DealQuery {
    pub q: Option<String>,
    pub pipeline: Option<String>,
    pub stage: Option<String>,
    pub company_id: Option<CompanyId>,
    pub primary_contact_id: Option<ContactId>,
    pub owner_id: Option<UserId>,
    pub include_deleted: bool,
}

/// The deal as automations left it, when they changed it (the reply shows the committed record).
pub(crate) async fn reload(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    deal: Deal,
    touched: &Touched,
) -> Result<Deal, AppError> {
    if !touched.contains(&RecordRef::Deal(deal.id.clone())) {
        return Ok(deal);
    }
    Ok(tx.get_deal(tenant, &deal.id).await?.unwrap_or(deal))
}

impl App {
    /// Creates a deal in `pipeline` (key or id; the default pipeline when `None`). Emits
    /// `deal.created`, and `deal.stage_changed` too when the client named the stage.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_deal(
        &self,
        caller: &Caller,
        draft: DealDraft,
        pipeline: Option<&str>,
        idem: Option<&IdemClaim>,
    ) -> Result<Deal, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let deal = self
            .create_deal_in(&mut *tx, tenant, draft, pipeline, &mut fx)
            .await?;
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let deal = reload(&mut *tx, tenant, deal, &touched).await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.deal(&deal)).await?;
        tx.commit().await?;
        Ok(deal)
    }

    pub(crate) async fn create_deal_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: DealDraft,
        pipeline: Option<&str>,
        fx: &mut Effects,
    ) -> Result<Deal, AppError> {
        let pipeline = pipelines::resolve(tx, tenant, pipeline, "pipeline").await?;
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Deal).await?;
        let now = self.clock.now();
        let (deal, refs, stage_given) = Deal::create(
            DealId::from_uuid(self.ids.new_uuid()),
            now,
            draft,
            &pipeline,
            &registry,
        )?;
        check_references(tx, tenant, &refs).await?;
        let id = deal.id.as_str();
        self.check_unique_values(
            tx,
            tenant,
            ObjectKind::Deal,
            &registry,
            id,
            None,
            &deal.custom_fields,
        )
        .await?;
        tx.insert_deal(tenant, &deal).await?;
        let snapshot = self.views.deal(&deal);
        let record = RecordRef::Deal(deal.id.clone());
        fx.changed(record.clone(), false);
        self.record_change(
            fx,
            ObjectKind::Deal,
            deal.id.as_str(),
            ChangeAction::Created,
            now,
            None,
            Some(&snapshot),
        );
        self.emit(
            fx,
            EventType::DealCreated,
            record.clone(),
            now,
            snapshot.clone(),
            None,
            None,
        );
        if stage_given {
            self.emit(
                fx,
                EventType::DealStageChanged,
                record,
                now,
                snapshot,
                None,
                Some(None),
            );
        }
        Ok(deal)
    }

    pub async fn get_deal(&self, caller: &Caller, id: &str) -> Result<Deal, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_deal(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("deal", id.as_str()))
    }

    /// Applies a partial update. `pipeline` (key or id) moves the deal to another pipeline.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_deal(
        &self,
        caller: &Caller,
        id: &str,
        patch: DealPatch,
        pipeline: Option<&str>,
        expected_version: Option<i64>,
    ) -> Result<Deal, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let deal = self
            .update_deal_in(
                &mut *tx,
                &caller.tenant,
                id,
                patch,
                pipeline,
                expected_version,
                &mut fx,
            )
            .await?;
        let touched = self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        let deal = reload(&mut *tx, &caller.tenant, deal, &touched).await?;
        tx.commit().await?;
        Ok(deal)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn update_deal_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        id: &str,
        patch: DealPatch,
        pipeline: Option<&str>,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<Deal, AppError> {
        let id = parse_id(id)?;
        let mut deal = tx
            .get_deal(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("deal", id.as_str()))?;
        if expected_version.is_some_and(|v| v != deal.version) {
            return Err(AppError::VersionConflict {
                current: deal.version,
            });
        }
        if deal.deleted_at.is_some() {
            return Err(AppError::Conflict {
                detail: "this deal is deleted; restore it before updating".into(),
                existing: None,
            });
        }
        let target = match pipeline {
            Some(reference) => pipelines::resolve(tx, tenant, Some(reference), "pipeline").await?,
            None => tx
                .get_pipeline(tenant, &deal.pipeline_id, RowLock::Share)
                .await?
                .ok_or_else(|| {
                    AppError::Internal(format!("deal {} sits in a missing pipeline", deal.id))
                })?,
        };
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Deal).await?;
        let now = self.clock.now();
        let before = self.views.deal(&deal);
        let old_custom = deal.custom_fields.clone();
        let change = deal.apply(patch, &target, now, &registry)?;
        if change.changed.is_empty() {
            return Ok(deal);
        }
        check_references(tx, tenant, &change.references).await?;
        let id = deal.id.as_str();
        self.check_unique_values(
            tx,
            tenant,
            ObjectKind::Deal,
            &registry,
            id,
            Some(&old_custom),
            &deal.custom_fields,
        )
        .await?;
        match tx.update_deal(tenant, &deal).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: deal.version - 1,
                })
            }
            other => other?,
        }
        let snapshot = self.views.deal(&deal);
        let changed = change.changed.iter().map(|f| (*f).to_owned()).collect();
        let record = RecordRef::Deal(deal.id.clone());
        fx.changed(record.clone(), false);
        self.record_change(
            fx,
            ObjectKind::Deal,
            deal.id.as_str(),
            ChangeAction::Updated,
            now,
            Some(&before),
            Some(&snapshot),
        );
        self.emit(
            fx,
            EventType::DealUpdated,
            record.clone(),
            now,
            snapshot.clone(),
            Some(changed),
            None,
        );
        if let Some(previous) = change.previous_stage {
            self.emit(
                fx,
                EventType::DealStageChanged,
                record,
                now,
                snapshot,
                None,
                Some(Some(previous)),
            );
        }
        Ok(deal)
    }

    pub async fn delete_deal(&self, caller: &Caller, id: &str) -> Result<Deal, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let deal = self
            .set_deal_deleted_in(&mut *tx, &caller.tenant, id, true, &mut fx)
            .await?;
        self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        tx.commit().await?;
        Ok(deal)
    }

    pub async fn restore_deal(&self, caller: &Caller, id: &str) -> Result<Deal, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let deal = self
            .set_deal_deleted_in(&mut *tx, &caller.tenant, id, false, &mut fx)
            .await?;
        self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        tx.commit().await?;
        Ok(deal)
    }

    pub(crate) async fn set_deal_deleted_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        id: &str,
        deleted: bool,
        fx: &mut Effects,
    ) -> Result<Deal, AppError> {
        let id = parse_id(id)?;
        let mut deal = tx
            .get_deal(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("deal", id.as_str()))?;
        if deal.deleted_at.is_some() == deleted {
            return Ok(deal);
        }
        let now = self.clock.now();
        deal.deleted_at = deleted.then_some(now);
        deal.updated_at = now;
        deal.version += 1;
        tx.update_deal(tenant, &deal).await?;
        fx.changed(RecordRef::Deal(deal.id.clone()), deleted);
        self.record_change(
            fx,
            ObjectKind::Deal,
            deal.id.as_str(),
            deleted_action(deleted),
            now,
            None,
            None,
        );
        Ok(deal)
    }

    /// Lists deals; without a pipeline filter all pipelines merge. With one, `stage` must be one
    /// of its keys (422 `unknown_value` listing them).
    pub async fn list_deals(
        &self,
        caller: &Caller,
        query: DealQuery,
        page: PageParams,
    ) -> Result<Page<Deal>, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_read().await?;
        let filter = resolve_query(&mut *tx, tenant, query).await?;
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, &caller.tenant, LIST, &fingerprint)?;
        let rows = tx.list_deals(tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            LIST,
            &fingerprint,
            |d| d.id.to_string(),
        ))
    }
}

/// The deal list's filters checked: a pipeline named by key or id resolves to its id, and a
/// `stage` must be one of its stages.
pub(crate) async fn resolve_query(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    query: DealQuery,
) -> Result<DealFilter, AppError> {
    let pipeline_id = match &query.pipeline {
        Some(reference) => {
            let pipeline = pipelines::resolve(tx, tenant, Some(reference), "pipeline").await?;
            if let Some(stage) = &query.stage {
                pipeline.check_stage("stage", stage)?;
            }
            Some(pipeline.id)
        }
        None => None,
    };
    Ok(DealFilter {
        q: query.q,
        pipeline_id,
        stage: query.stage,
        company_id: query.company_id,
        primary_contact_id: query.primary_contact_id,
        owner_id: query.owner_id,
        include_deleted: query.include_deleted,
    })
}
