//! Activity use cases. Activities are deleted for good and listed newest first by `occurred_at`.

use crm_domain::{
    activity::ACTIVITY_TYPE_GROUP, Activity, ActivityDraft, ActivityId, ActivityPatch, ObjectKind,
    Tenant,
};

use crate::{
    auth::Caller,
    error::AppError,
    idempotency::IdemClaim,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{ActivityFilter, StoreError, Tx},
    write::{check_references, finish_in_tx},
    App,
};

const LIST: &str = "activities";

fn parse_id(id: &str) -> Result<ActivityId, AppError> {
    ActivityId::parse(id).map_err(|_| AppError::not_found("activity", id))
}

impl App {
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_activity(
        &self,
        caller: &Caller,
        draft: ActivityDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Activity, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let activity = self.create_activity_in(&mut *tx, tenant, draft).await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.activity(&activity)).await?;
        tx.commit().await?;
        Ok(activity)
    }

    /// Records an activity inside a caller's transaction (automation actions, emails).
    pub(crate) async fn create_activity_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: ActivityDraft,
    ) -> Result<Activity, AppError> {
        let registry = self
            .registry(&mut *tx, tenant, ObjectKind::Activity)
            .await?;
        let (activity, refs) = Activity::create(
            ActivityId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
            &registry,
        )?;
        check_references(tx, tenant, &refs).await?;
        tx.insert_activity(tenant, &activity).await?;
        Ok(activity)
    }

    pub async fn get_activity(&self, caller: &Caller, id: &str) -> Result<Activity, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_activity(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("activity", id.as_str()))
    }

    pub async fn update_activity(
        &self,
        caller: &Caller,
        id: &str,
        patch: ActivityPatch,
        expected_version: Option<i64>,
    ) -> Result<Activity, AppError> {
        let tenant = &caller.tenant;
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut activity = tx
            .get_activity(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("activity", id.as_str()))?;
        if expected_version.is_some_and(|v| v != activity.version) {
            return Err(AppError::VersionConflict {
                current: activity.version,
            });
        }
        let registry = self
            .registry(&mut *tx, tenant, ObjectKind::Activity)
            .await?;
        let (changed, refs) = activity.apply(patch, self.clock.now(), &registry)?;
        if changed.is_empty() {
            return Ok(activity);
        }
        check_references(&mut *tx, tenant, &refs).await?;
        match tx.update_activity(tenant, &activity).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: activity.version - 1,
                })
            }
            other => other?,
        }
        tx.commit().await?;
        Ok(activity)
    }

    /// Deletes an activity for good.
    pub async fn delete_activity(&self, caller: &Caller, id: &str) -> Result<Activity, AppError> {
        let tenant = &caller.tenant;
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let activity = tx
            .get_activity(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("activity", id.as_str()))?;
        tx.delete_activity(tenant, &id).await?;
        tx.commit().await?;
        Ok(activity)
    }

    /// Newest first by `occurred_at`; a `type` filter must be a registered `activity.type`.
    /// Checks the activity list's filters: a `type` must be a registered value.
    pub(crate) async fn check_activity_filter(
        &self,
        tx: &mut dyn crate::ports::Tx,
        tenant: &crm_domain::Tenant,
        filter: &ActivityFilter,
    ) -> Result<(), AppError> {
        if let Some(t) = &filter.activity_type {
            let registry = self.registry(tx, tenant, ObjectKind::Activity).await?;
            registry.check_enum("type", ACTIVITY_TYPE_GROUP, t)?;
        }
        Ok(())
    }

    pub async fn list_activities(
        &self,
        caller: &Caller,
        filter: ActivityFilter,
        page: PageParams,
    ) -> Result<Page<Activity>, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_read().await?;
        self.check_activity_filter(&mut *tx, tenant, &filter)
            .await?;
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, &caller.tenant, LIST, &fingerprint)?;
        let rows = tx.list_activities(tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            LIST,
            &fingerprint,
            |a| format!("{}:{}", a.occurred_at.millis(), a.id),
        ))
    }
}
