//! Pipelines, deals and activities: the statements of the SQLite store's `records`, with the
//! locking a shared database needs (see the crate docs) and the Postgres types (JSONB for stages
//! and custom fields, bound as text).

use async_trait::async_trait;
use crm_app::{
    ports::{ActivityFilter, ActivityRepo, DealFilter, DealRepo, PipelineRepo, RowLock, Slice},
    StoreError,
};
use crm_domain::{
    Activity, ActivityId, CompanyId, ContactId, Deal, DealId, Pipeline, PipelineId, StageType,
    Tenant, Timestamp,
};
use sqlx::{Postgres, QueryBuilder};

use crate::{
    rows::{self, get},
    tx::{
        and_equals, json_text, planned_per_needle, search_filter, search_page, slice_clause,
        tenant_query, tenant_where, PgQuery, PostgresTx,
    },
};

/// How often a statement is repeated when a concurrent transaction changed the default
/// pipeline under it (each repetition needs another such commit to be needed; see
/// `clear_default_pipeline`).
const DEFAULT_ROUNDS: usize = 32;

impl PostgresTx {
    fn is_read(&self) -> bool {
        matches!(self, PostgresTx::Read(..))
    }

    /// Whether the tenant has a default pipeline other than `except`, as of now (a statement of
    /// its own sees every transaction that has committed, including those it waited for).
    async fn other_default_exists(
        &mut self,
        tenant: &Tenant,
        except: Option<&PipelineId>,
    ) -> Result<bool, StoreError> {
        let q = tenant_query(
            "SELECT EXISTS (SELECT 1 FROM pipelines
                            WHERE workspace_id = $1 AND mode = $2 AND is_default AND ($3::text IS NULL OR id <> $3))",
            tenant,
        )
        .bind(except.map(PipelineId::as_str));
        self.exists(q).await
    }
}

#[async_trait]
impl PipelineRepo for PostgresTx {
    async fn insert_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        // ON CONFLICT, unlike a failed INSERT, leaves the transaction usable. A concurrent insert
        // of the same key makes this one wait for its outcome, then report the clash.
        let q = tenant_query(
            "INSERT INTO pipelines (workspace_id, mode, id, key, name, is_default, stages, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.key)
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.created_at.millis())
        .bind(p.updated_at.millis())
        .bind(p.version);
        match self.execute(q).await? {
            0 => Err(StoreError::Duplicate),
            _ => Ok(()),
        }
    }

    async fn get_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::PIPELINE_COLUMNS,
            self.locking(lock)
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::pipeline)
            .await
    }

    async fn get_pipeline_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND key = $3{}",
            rows::PIPELINE_COLUMNS,
            self.locking(lock)
        );
        self.optional(tenant_query(&sql, tenant).bind(key), rows::pipeline)
            .await
    }

    /// Share-locked in a write transaction: a deal created in the default pipeline must not land
    /// in a stage a concurrent transaction is removing. A row lock waits for the
    /// current holder and then re-checks `is_default`; when that transaction moved the default
    /// elsewhere the row no longer qualifies and the new default was invisible to the statement,
    /// so the lookup is repeated rather than answering "no default".
    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND is_default LIMIT 1{}",
            rows::PIPELINE_COLUMNS,
            self.locking(RowLock::Share)
        );
        for _ in 0..DEFAULT_ROUNDS {
            if let Some(p) = self
                .optional(tenant_query(&sql, tenant), rows::pipeline)
                .await?
            {
                return Ok(Some(p));
            }
            if self.is_read() || !self.other_default_exists(tenant, None).await? {
                return Ok(None);
            }
        }
        Err(StoreError::Backend(
            "the default pipeline kept changing while being read".into(),
        ))
    }

    async fn list_pipelines(&mut self, tenant: &Tenant) -> Result<Vec<Pipeline>, StoreError> {
        // Ids are time-ordered: ascending is oldest first.
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 ORDER BY id",
            rows::PIPELINE_COLUMNS
        );
        self.all(tenant_query(&sql, tenant), rows::pipeline).await
    }

    async fn update_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE pipelines SET name = $4, is_default = $5, stages = $6::jsonb, updated_at = $7, version = $8
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.updated_at.millis())
        .bind(p.version)
        .bind(p.version - 1);
        match self.execute(q).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    /// One UPDATE is not enough under READ COMMITTED. Two transactions making pipelines A and
    /// B the default both clear the old default C; the second waits for the first's lock on C,
    /// then finds C cleared and skips it, but A, which the first made the default, was not
    /// the default in the second UPDATE's snapshot, so it would keep its flag and the tenant
    /// would end with two defaults. So after clearing, a fresh statement looks again, and
    /// clears again while another default has appeared. Every change of default locks the
    /// current default row (clearing it, or editing it), so a transaction that commits a new
    /// default before this one finishes is always one this one waited for, and seen.
    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        for _ in 0..DEFAULT_ROUNDS {
            let q = tenant_query(
                "UPDATE pipelines SET is_default = FALSE, updated_at = $4, version = version + 1
                 WHERE workspace_id = $1 AND mode = $2 AND is_default AND id <> $3",
                tenant,
            )
            .bind(keep.as_str())
            .bind(now.millis());
            self.execute(q).await?;
            if self.is_read() || !self.other_default_exists(tenant, Some(keep)).await? {
                return Ok(());
            }
        }
        Err(StoreError::Backend(
            "the default pipeline kept changing while being cleared".into(),
        ))
    }

    async fn delete_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "DELETE FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str());
        self.execute(q).await?;
        Ok(())
    }

    async fn count_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: Option<&str>,
    ) -> Result<i64, StoreError> {
        let q = tenant_query(
            "SELECT COUNT(*) AS n FROM deals
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND ($4::text IS NULL OR stage = $4)",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage);
        let row = q.fetch_one(self.conn()).await.map_err(crate::backend)?;
        get(&row, "n")
    }

    async fn lock_stage_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "SELECT id FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4 ORDER BY id{}",
            self.for_update()
        );
        self.all(
            tenant_query(&sql, tenant)
                .bind(pipeline.as_str())
                .bind(stage),
            |_| Ok(()),
        )
        .await?;
        Ok(())
    }

    async fn move_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        from: &str,
        to: &str,
        to_type: StageType,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let q = tenant_query(
            "UPDATE deals SET stage = $5, stage_type = $6, updated_at = $7, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(from)
        .bind(to)
        .bind(to_type.as_str())
        .bind(now.millis());
        self.execute(q).await
    }

    async fn set_deals_stage_type(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
        stage_type: StageType,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE deals SET stage_type = $5 WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage)
        .bind(stage_type.as_str());
        self.execute(q).await?;
        Ok(())
    }
}

/// Binds a deal's id and writable fields as `$3` to `$17` (after the tenant).
fn bind_deal<'q>(q: PgQuery<'q>, d: &'q Deal) -> PgQuery<'q> {
    q.bind(d.id.as_str())
        .bind(&d.title)
        .bind(d.pipeline_id.as_str())
        .bind(&d.pipeline_key)
        .bind(&d.stage)
        .bind(d.stage_type.as_str())
        .bind(d.primary_contact_id.as_ref().map(ContactId::as_str))
        .bind(d.company_id.as_ref().map(CompanyId::as_str))
        .bind(d.value_cents)
        .bind(d.currency.as_deref())
        .bind(d.close_date.map(|c| c.to_string()))
        .bind(json_text(&d.custom_fields))
        .bind(d.updated_at.millis())
        .bind(d.version)
        .bind(d.deleted_at.map(Timestamp::millis))
}

#[async_trait]
impl DealRepo for PostgresTx {
    async fn insert_deal(&mut self, tenant: &Tenant, d: &Deal) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO deals (workspace_id, mode, id, title, pipeline_id, pipeline_key, stage, stage_type, primary_contact_id,
                                company_id, value_cents, currency, close_date, custom_fields, updated_at, version, deleted_at,
                                created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16, $17, $18)",
            tenant,
        );
        self.execute(bind_deal(q, d).bind(d.created_at.millis()))
            .await?;
        Ok(())
    }

    async fn get_deal(&mut self, tenant: &Tenant, id: &DealId) -> Result<Option<Deal>, StoreError> {
        let sql = format!(
            "SELECT {} FROM deals WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::DEAL_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::deal)
            .await
    }

    async fn update_deal(&mut self, tenant: &Tenant, d: &Deal) -> Result<(), StoreError> {
        // Deals have no uniqueness rule beyond their id, so no savepoint is needed.
        let q = tenant_query(
            "UPDATE deals SET title = $4, pipeline_id = $5, pipeline_key = $6, stage = $7, stage_type = $8, primary_contact_id = $9,
                    company_id = $10, value_cents = $11, currency = $12, close_date = $13, custom_fields = $14::jsonb,
                    updated_at = $15, version = $16, deleted_at = $17
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $18",
            tenant,
        );
        match self.execute(bind_deal(q, d).bind(d.version - 1)).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    async fn list_deals(
        &mut self,
        tenant: &Tenant,
        filter: &DealFilter,
        slice: &Slice,
    ) -> Result<Vec<Deal>, StoreError> {
        let indexed_filter = filter.pipeline_id.is_some()
            || filter.stage.is_some()
            || filter.company_id.is_some()
            || filter.primary_contact_id.is_some();
        if filter.q.is_some() && !indexed_filter {
            let table = ("deals", rows::DEAL_COLUMNS);
            return search_page(
                self,
                tenant,
                table,
                slice,
                &|qb| deal_conditions(qb, filter),
                rows::deal,
                |d| d.id.as_str(),
            )
            .await;
        }
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {} FROM deals", rows::DEAL_COLUMNS));
        tenant_where(&mut qb, tenant);
        deal_conditions(&mut qb, filter);
        slice_clause(&mut qb, slice);
        self.all(planned_per_needle(&mut qb, filter.q.is_some()), rows::deal)
            .await
    }
}

/// A deal list's conditions, as ` AND ...` clauses.
fn deal_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a DealFilter) {
    if !filter.include_deleted {
        qb.push(" AND deleted_at IS NULL");
    }
    and_equals(
        qb,
        "pipeline_id",
        filter.pipeline_id.as_ref().map(PipelineId::as_str),
    );
    and_equals(qb, "stage", filter.stage.as_deref());
    and_equals(
        qb,
        "company_id",
        filter.company_id.as_ref().map(CompanyId::as_str),
    );
    and_equals(
        qb,
        "primary_contact_id",
        filter.primary_contact_id.as_ref().map(ContactId::as_str),
    );
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}

/// Binds an activity's id and writable fields as `$3` to `$11` (after the tenant).
fn bind_activity<'q>(q: PgQuery<'q>, a: &'q Activity) -> PgQuery<'q> {
    q.bind(a.id.as_str())
        .bind(&a.activity_type)
        .bind(a.contact_id.as_ref().map(ContactId::as_str))
        .bind(a.deal_id.as_ref().map(DealId::as_str))
        .bind(a.body.as_deref())
        .bind(a.occurred_at.millis())
        .bind(json_text(&a.custom_fields))
        .bind(a.updated_at.millis())
        .bind(a.version)
}

/// An activity cursor is `"<occurred_at ms>:<id>"`.
fn activity_position(before: &str) -> Result<(i64, &str), StoreError> {
    let (ms, id) = before
        .split_once(':')
        .ok_or_else(|| rows::corrupt("activity cursor"))?;
    Ok((
        ms.parse().map_err(|_| rows::corrupt("activity cursor"))?,
        id,
    ))
}

#[async_trait]
impl ActivityRepo for PostgresTx {
    async fn insert_activity(&mut self, tenant: &Tenant, a: &Activity) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, custom_fields,
                                     updated_at, version, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12)",
            tenant,
        );
        self.execute(bind_activity(q, a).bind(a.created_at.millis()))
            .await?;
        Ok(())
    }

    async fn get_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<Option<Activity>, StoreError> {
        let sql = format!(
            "SELECT {} FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::ACTIVITY_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::activity)
            .await
    }

    async fn update_activity(&mut self, tenant: &Tenant, a: &Activity) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE activities SET type = $4, contact_id = $5, deal_id = $6, body = $7, occurred_at = $8, custom_fields = $9::jsonb,
                    updated_at = $10, version = $11
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12",
            tenant,
        );
        match self
            .execute(bind_activity(q, a).bind(a.version - 1))
            .await?
        {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    async fn delete_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "DELETE FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str());
        self.execute(q).await?;
        Ok(())
    }

    async fn list_activities(
        &mut self,
        tenant: &Tenant,
        filter: &ActivityFilter,
        slice: &Slice,
    ) -> Result<Vec<Activity>, StoreError> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {} FROM activities",
            rows::ACTIVITY_COLUMNS
        ));
        tenant_where(&mut qb, tenant);
        if let Some(c) = &filter.contact_id {
            qb.push(" AND contact_id = ").push_bind(c.as_str());
        }
        if let Some(d) = &filter.deal_id {
            qb.push(" AND deal_id = ").push_bind(d.as_str());
        }
        if let Some(t) = &filter.activity_type {
            qb.push(" AND type = ").push_bind(t.as_str());
        }
        if let Some(before) = &slice.before {
            let (ms, id) = activity_position(before)?;
            // A row comparison, which the (…, occurred_at, id) indexes serve as one range.
            qb.push(" AND (occurred_at, id) < (")
                .push_bind(ms)
                .push(", ")
                .push_bind(id.to_owned())
                .push(")");
        }
        qb.push(" ORDER BY occurred_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(slice.limit));
        self.all(qb.build(), rows::activity).await
    }
}
