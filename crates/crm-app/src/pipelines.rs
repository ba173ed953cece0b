//! Pipeline and stage use cases. Pipelines are addressed by `pl_` id or by key.

use crm_domain::{
    audit::changes, history::Author, pipeline::AddStageError, Pipeline, PipelineDraft, PipelineId,
    StageDraft, StageId, Tenant, UserId, ValidationError,
};

use crate::{
    audit::Audited,
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{DealFilter, RowLock, Slice, StoreError, Tx},
    views::RecordViews,
    write::{Effects, Emit, RecordRef},
    App,
};

/// The name pipeline cursors carry (decisions §4: a cursor belongs to one list).
const PIPELINE_LIST: &str = "pipelines";

/// The deals of a stage (deleted ones too) as the changed records of a silent write.
async fn deals_in_stage(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    pipeline: &PipelineId,
    stage: &str,
) -> Result<Effects, AppError> {
    const PAGE: u32 = 1000;
    let mut fx = Effects::new(Emit::Silent, Author::system());
    let filter = DealFilter {
        pipeline_id: Some(pipeline.clone()),
        stage: Some(stage.to_owned()),
        include_deleted: true,
        ..Default::default()
    };
    let mut before = None;
    loop {
        let page = tx
            .list_deals(
                tenant,
                &filter,
                &Slice {
                    before: before.take(),
                    limit: PAGE,
                },
            )
            .await?;
        for d in &page {
            fx.changed(RecordRef::Deal(d.id.clone()), d.deleted_at.is_some());
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => before = Some(last.id.to_string()),
            _ => return Ok(fx),
        }
    }
}

/// A change to a pipeline's own fields.
#[derive(Debug, Clone, Default)]
pub struct PipelineUpdate {
    pub name: Option<String>,
    pub is_default: Option<bool>,
}

/// What `svc_manage_stage` does to one stage.
#[derive(Debug, Clone)]
pub enum StageAction {
    Add {
        draft: StageDraft,
        position: Option<i64>,
    },
    Update {
        key: String,
        label: Option<String>,
        stage_type: Option<String>,
        position: Option<i64>,
    },
    /// Deals in the stage move to `move_to`; without it, a stage holding deals is not removed.
    Remove {
        key: String,
        move_to: Option<String>,
    },
}

impl StageAction {
    /// The stage whose deals this action may change: removed (its deals move), or retyped.
    fn changes_deals_of(&self) -> Option<&str> {
        match self {
            StageAction::Remove { key, .. } => Some(key),
            StageAction::Update {
                key,
                stage_type: Some(_),
                ..
            } => Some(key),
            _ => None,
        }
    }
}

/// Looks a pipeline up by id or key inside a transaction.
pub(crate) async fn lookup(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    id_or_key: &str,
    lock: RowLock,
) -> Result<Option<Pipeline>, AppError> {
    Ok(if id_or_key.starts_with(PipelineId::PREFIX) {
        match PipelineId::parse(id_or_key) {
            Ok(id) => tx.get_pipeline(tenant, &id, lock).await?,
            Err(_) => None,
        }
    } else {
        tx.get_pipeline_by_key(tenant, id_or_key, lock).await?
    })
}

/// The pipeline a record field names (`pipeline` on a deal, or a filter): unknown names are
/// `unknown_value` listing the pipeline keys. `None` is the default pipeline.
pub(crate) async fn resolve(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    reference: Option<&str>,
    field: &str,
) -> Result<Pipeline, AppError> {
    let found = match reference {
        // A reference only: deal writes in one pipeline must not queue behind each other.
        Some(r) => lookup(tx, tenant, r, RowLock::Share).await?,
        None => tx.default_pipeline(tenant).await?,
    };
    match found {
        Some(p) => Ok(p),
        None => {
            let keys = tx
                .list_pipelines(tenant)
                .await?
                .into_iter()
                .map(|p| p.key)
                .collect();
            Err(ValidationError::UnknownValue {
                field: field.to_owned(),
                value: reference.unwrap_or_default().to_owned(),
                valid_options: keys,
            }
            .into())
        }
    }
}

/// The pipeline a request addresses, locked for the change the request makes.
async fn find(tx: &mut dyn Tx, tenant: &Tenant, id_or_key: &str) -> Result<Pipeline, AppError> {
    lookup(tx, tenant, id_or_key, RowLock::Update)
        .await?
        .ok_or_else(|| AppError::not_found("pipeline", id_or_key))
}

/// A stage key taken in the pipeline is a uniqueness conflict (409, with the stage), as a taken
/// pipeline key is.
fn stage_add_error(views: &dyn RecordViews, e: AddStageError) -> AppError {
    match e {
        AddStageError::Invalid(e) => e.into(),
        AddStageError::KeyTaken(existing) => AppError::Conflict {
            detail: format!(
                "a stage with key `{}` already exists in this pipeline",
                existing.key
            ),
            existing: Some(views.stage(&existing)),
        },
    }
}

async fn save(tx: &mut dyn Tx, tenant: &Tenant, pipeline: &Pipeline) -> Result<(), AppError> {
    match tx.update_pipeline(tenant, pipeline).await {
        Err(StoreError::Stale) => Err(AppError::VersionConflict {
            current: pipeline.version - 1,
        }),
        other => Ok(other?),
    }
}

/// The audited change of the stage `key` between two shapes of its pipeline: added, changed or
/// removed, or nothing when it is the same.
fn stage_audit(
    views: &dyn RecordViews,
    before: &Pipeline,
    after: &Pipeline,
    key: &str,
) -> Option<Audited> {
    let find = |p: &Pipeline| p.stages.iter().find(|s| s.key == key).cloned();
    let (old, new) = (find(before), find(after));
    let (action, id) = match (&old, &new) {
        (None, Some(s)) => ("stage.created", s.id.as_str().to_owned()),
        (Some(s), None) => ("stage.deleted", s.id.as_str().to_owned()),
        (Some(s), Some(_)) => ("stage.updated", s.id.as_str().to_owned()),
        (None, None) => return None,
    };
    let shape = |s: &Option<crm_domain::Stage>| {
        s.as_ref().map(|s| {
            let mut v = views.stage(s);
            if let Some(o) = v.as_object_mut() {
                o.insert("pipeline_id".into(), after.id.as_str().into());
            }
            v
        })
    };
    let diff = changes(shape(&old).as_ref(), shape(&new).as_ref());
    Some(Audited::new(action, "stage", id, diff))
}

impl App {
    /// What the audit log shows of a pipeline: its body without its stages (audited one by
    /// one).
    fn pipeline_shape(&self, p: &Pipeline) -> serde_json::Value {
        let mut v = self.views.pipeline(p);
        if let Some(o) = v.as_object_mut() {
            o.remove("stages");
        }
        v
    }

    fn stage_ids(&self) -> impl FnMut() -> StageId + '_ {
        || StageId::from_uuid(self.ids.new_uuid())
    }

    /// Creates a pipeline; a new default unsets the old one. Not covered by Idempotency-Key: a
    /// retry answers 409 for the taken key.
    pub async fn create_pipeline(
        &self,
        caller: &Caller,
        draft: PipelineDraft,
    ) -> Result<Pipeline, AppError> {
        let tenant = &caller.tenant;
        let now = self.clock.now();
        let pipeline = Pipeline::create(
            PipelineId::from_uuid(self.ids.new_uuid()),
            now,
            draft,
            self.stage_ids(),
        )?;
        let mut tx = self.store.begin_write().await?;
        match tx.insert_pipeline(tenant, &pipeline).await {
            Err(StoreError::Duplicate) => {
                let existing = tx
                    .get_pipeline_by_key(tenant, &pipeline.key, RowLock::Share)
                    .await?
                    .map(|p| self.views.pipeline(&p));
                return Err(AppError::Conflict {
                    detail: format!("a pipeline with key `{}` already exists", pipeline.key),
                    existing,
                });
            }
            other => other?,
        }
        if pipeline.is_default {
            tx.clear_default_pipeline(tenant, &pipeline.id, now).await?;
        }
        let mut shape = self.pipeline_shape(&pipeline);
        if let Some(o) = shape.as_object_mut() {
            let keys: Vec<&str> = pipeline.stages.iter().map(|s| s.key.as_str()).collect();
            o.insert("stages".into(), serde_json::json!(keys));
        }
        let diff = changes(None, Some(&shape));
        let what = Audited::new("pipeline.created", "pipeline", pipeline.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(pipeline)
    }

    pub async fn list_pipelines(&self, caller: &Caller) -> Result<Vec<Pipeline>, AppError> {
        let mut tx = self.store.begin_read().await?;
        Ok(tx.list_pipelines(&caller.tenant).await?)
    }

    /// One page of the pipelines, oldest first (the order the store lists them in, by id).
    /// Pipelines are a workspace's configuration, a handful of rows read whole by every deal
    /// write that names one, so the page is cut from that one read rather than by a statement
    /// of its own.
    pub async fn list_pipelines_page(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Pipeline>, AppError> {
        let slice = slice_for(&page, &caller.tenant, PIPELINE_LIST, "")?;
        let all = self.list_pipelines(caller).await?;
        // After the cursor's pipeline in the store's order; should it have been deleted since,
        // after the ids that sort before it.
        let start = match slice.before.as_deref() {
            None => 0,
            Some(last) => all.iter().position(|p| p.id.as_str() == last).map_or_else(
                || all.iter().filter(|p| p.id.as_str() < last).count(),
                |i| i + 1,
            ),
        };
        let rows: Vec<Pipeline> = all
            .into_iter()
            .skip(start)
            .take(slice.limit as usize)
            .collect();
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            PIPELINE_LIST,
            "",
            |p| p.id.to_string(),
        ))
    }

    pub async fn get_pipeline(
        &self,
        caller: &Caller,
        id_or_key: &str,
    ) -> Result<Pipeline, AppError> {
        let mut tx = self.store.begin_read().await?;
        find(&mut *tx, &caller.tenant, id_or_key).await
    }

    /// The pipeline with its active deals (only `owner`'s when given) counted and summed per
    /// stage and currency (the board's column totals). Needs `deals:read` besides the
    /// pipeline's own read: it discloses deals.
    pub async fn pipeline_totals(
        &self,
        caller: &Caller,
        id_or_key: &str,
        owner: Option<&UserId>,
    ) -> Result<(Pipeline, Vec<crate::ports::StageTotal>), AppError> {
        caller.require(crate::auth::Scope::read("deals"))?;
        let mut tx = self.store.begin_read().await?;
        let pipeline = find(&mut *tx, &caller.tenant, id_or_key).await?;
        let totals = tx.stage_totals(&caller.tenant, &pipeline.id, owner).await?;
        Ok((pipeline, totals))
    }

    pub async fn update_pipeline(
        &self,
        caller: &Caller,
        id_or_key: &str,
        update: PipelineUpdate,
    ) -> Result<Pipeline, AppError> {
        let tenant = &caller.tenant;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let mut pipeline = find(&mut *tx, tenant, id_or_key).await?;
        let before = self.pipeline_shape(&pipeline);
        let mut changed = false;
        if let Some(name) = update.name {
            changed |= pipeline.rename(name)?;
        }
        match update.is_default {
            Some(false) if pipeline.is_default => {
                return Err(ValidationError::invalid("is_default", "a workspace always has a default pipeline; make another pipeline the default instead").into());
            }
            Some(flag) => changed |= pipeline.set_default(flag),
            None => {}
        }
        if !changed {
            return Ok(pipeline);
        }
        pipeline.touch(now);
        save(&mut *tx, tenant, &pipeline).await?;
        if pipeline.is_default {
            tx.clear_default_pipeline(tenant, &pipeline.id, now).await?;
        }
        let diff = changes(Some(&before), Some(&self.pipeline_shape(&pipeline)));
        let what = Audited::new("pipeline.updated", "pipeline", pipeline.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(pipeline)
    }

    /// Deletes a pipeline for good; not the default one, and not while it holds deals.
    pub async fn delete_pipeline(
        &self,
        caller: &Caller,
        id_or_key: &str,
    ) -> Result<Pipeline, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let pipeline = find(&mut *tx, tenant, id_or_key).await?;
        if pipeline.is_default {
            return Err(AppError::Conflict { detail: "the default pipeline cannot be deleted; make another pipeline the default first".into(), existing: None });
        }
        let deals = tx.count_deals(tenant, &pipeline.id, None).await?;
        if deals > 0 {
            return Err(AppError::Conflict {
                detail: format!("the pipeline holds {deals} deals; move or delete them first"),
                existing: None,
            });
        }
        tx.delete_pipeline(tenant, &pipeline.id).await?;
        let diff = changes(Some(&self.pipeline_shape(&pipeline)), None);
        let what = Audited::new("pipeline.deleted", "pipeline", pipeline.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(pipeline)
    }

    /// Adds, changes or removes one stage and returns the pipeline.
    pub async fn manage_stage(
        &self,
        caller: &Caller,
        id_or_key: &str,
        action: StageAction,
    ) -> Result<Pipeline, AppError> {
        let tenant = &caller.tenant;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        if let Some(stage) = action.changes_deals_of() {
            // The stage's deals before the pipeline, as a deal update takes them (see
            // `lock_stage_deals`); the pipeline is read again, locked, right after.
            if let Some(p) = lookup(&mut *tx, tenant, id_or_key, RowLock::Unlocked).await? {
                tx.lock_stage_deals(tenant, &p.id, stage).await?;
            }
        }
        let mut pipeline = find(&mut *tx, tenant, id_or_key).await?;
        let before = pipeline.clone();
        let key = match &action {
            StageAction::Add { .. } => None,
            StageAction::Update { key, .. } | StageAction::Remove { key, .. } => Some(key.clone()),
        };
        match action {
            StageAction::Add { draft, position } => {
                pipeline
                    .add_stage(draft, position, StageId::from_uuid(self.ids.new_uuid()))
                    .map_err(|e| stage_add_error(&*self.views, e))?;
                pipeline.touch(now);
                save(&mut *tx, tenant, &pipeline).await?;
            }
            StageAction::Update {
                key,
                label,
                stage_type,
                position,
            } => {
                let update = pipeline.update_stage(&key, label, stage_type, position)?;
                if !update.changed {
                    // Like a PATCH of the pipeline that changes nothing: same version, no write.
                    return Ok(pipeline);
                }
                pipeline.touch(now);
                save(&mut *tx, tenant, &pipeline).await?;
                if update.type_changed {
                    let stage_type = pipeline.check_stage("key", &key)?.stage_type;
                    tx.set_deals_stage_type(tenant, &pipeline.id, &key, stage_type)
                        .await?;
                }
            }
            StageAction::Remove { key, move_to } => {
                pipeline.check_stage("key", &key)?;
                let deals = tx.count_deals(tenant, &pipeline.id, Some(&key)).await?;
                if deals > 0 {
                    let Some(target) = move_to else {
                        return Err(AppError::Conflict {
                            detail: format!("{deals} deals sit in stage `{key}`; pass move_to=<stage key> to move them"),
                            existing: None,
                        });
                    };
                    if target == key {
                        return Err(
                            ValidationError::invalid("move_to", "must name another stage").into(),
                        );
                    }
                    let target_type = pipeline.check_stage("move_to", &target)?.stage_type;
                    // The moved deals changed (without events): sequences re-check them.
                    let moved = deals_in_stage(&mut *tx, tenant, &pipeline.id, &key).await?;
                    tx.move_deals(tenant, &pipeline.id, &key, &target, target_type, now)
                        .await?;
                    self.finish_write(&mut *tx, tenant, moved).await?;
                }
                pipeline.remove_stage(&key)?;
                pipeline.touch(now);
                save(&mut *tx, tenant, &pipeline).await?;
            }
        }
        // An added stage is the one the pipeline did not have (its key as the domain kept it).
        let key = key.or_else(|| {
            let new = pipeline
                .stages
                .iter()
                .find(|s| before.stages.iter().all(|b| b.id != s.id));
            new.map(|s| s.key.clone())
        });
        let audited = key.and_then(|k| stage_audit(&*self.views, &before, &pipeline, &k));
        if let Some(what) = audited {
            self.audit(&mut tx, caller, what).await?;
        }
        tx.commit().await?;
        Ok(pipeline)
    }
}
