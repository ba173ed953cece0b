//! Pipelines, deals and activities.

use async_trait::async_trait;
use crm_app::{
    ports::{ActivityFilter, ActivityRepo, DealFilter, DealRepo, PipelineRepo, RowLock, Slice},
    StoreError,
};
use crm_domain::{
    Activity, ActivityId, CompanyId, ContactId, Deal, DealId, Pipeline, PipelineId, StageType,
    Tenant, Timestamp,
};
use sqlx::{sqlite::SqliteArguments, QueryBuilder, Row, Sqlite};

use crate::{
    backend, rows,
    tx::{
        json_text, push_not_deleted, push_search, search_page, slice_clause, tenant_where,
        trigram_needle, SqliteTx,
    },
};

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

/// Binds `$1` workspace and `$2` mode, which every tenant statement here starts with.
fn tenant_query<'q>(sql: &'q str, tenant: &'q Tenant) -> Query<'q> {
    sqlx::query(sql)
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
}

#[async_trait]
impl PipelineRepo for SqliteTx {
    async fn insert_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let done = tenant_query(
            "INSERT INTO pipelines (workspace_id, mode, id, key, name, is_default, stages, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.key)
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.created_at.millis())
        .bind(p.updated_at.millis())
        .bind(p.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Duplicate);
        }
        Ok(())
    }

    // The single writer serializes write transactions: there is nothing to lock.
    async fn get_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
        _lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn get_pipeline_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
        _lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND key = $3",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(key)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND is_default LIMIT 1",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn list_pipelines(&mut self, tenant: &Tenant) -> Result<Vec<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 ORDER BY id",
            rows::PIPELINE_COLUMNS
        );
        let rows = tenant_query(&sql, tenant)
            .fetch_all(self.conn())
            .await
            .map_err(backend)?;
        rows.iter().map(rows::pipeline).collect()
    }

    async fn update_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let done = tenant_query(
            "UPDATE pipelines SET name = $4, is_default = $5, stages = $6, updated_at = $7, version = $8
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.updated_at.millis())
        .bind(p.version)
        .bind(p.version - 1)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        tenant_query(
            "UPDATE pipelines SET is_default = FALSE, updated_at = $4, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND is_default AND id <> $3",
            tenant,
        )
        .bind(keep.as_str())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
    ) -> Result<(), StoreError> {
        tenant_query(
            "DELETE FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn count_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: Option<&str>,
    ) -> Result<i64, StoreError> {
        let row = tenant_query(
            "SELECT COUNT(*) FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND ($4 IS NULL OR stage = $4)",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage)
        .fetch_one(self.conn())
        .await
        .map_err(backend)?;
        row.try_get(0).map_err(backend)
    }

    async fn lock_stage_deals(
        &mut self,
        _: &Tenant,
        _: &PipelineId,
        _: &str,
    ) -> Result<(), StoreError> {
        Ok(()) // the write transaction holds the single writer's lock
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
        let done = tenant_query(
            "UPDATE deals SET stage = $5, stage_type = $6, updated_at = $7, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(from)
        .bind(to)
        .bind(to_type.as_str())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected())
    }

    async fn set_deals_stage_type(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
        stage_type: StageType,
    ) -> Result<(), StoreError> {
        tenant_query("UPDATE deals SET stage_type = $5 WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4", tenant)
            .bind(pipeline.as_str())
            .bind(stage)
            .bind(stage_type.as_str())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }
}

/// Binds a deal's mutable fields as `$4`..`$17` (after tenant and id).
fn bind_deal<'q>(q: Query<'q>, d: &'q Deal) -> Query<'q> {
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
impl DealRepo for SqliteTx {
    async fn insert_deal(&mut self, tenant: &Tenant, d: &Deal) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO deals (workspace_id, mode, id, title, pipeline_id, pipeline_key, stage, stage_type, primary_contact_id,
                                company_id, value_cents, currency, close_date, custom_fields, updated_at, version, deleted_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
            tenant,
        );
        bind_deal(q, d)
            .bind(d.created_at.millis())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get_deal(&mut self, tenant: &Tenant, id: &DealId) -> Result<Option<Deal>, StoreError> {
        let sql = format!(
            "SELECT {} FROM deals WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::DEAL_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::deal).transpose()
    }

    async fn update_deal(&mut self, tenant: &Tenant, d: &Deal) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE deals SET title = $4, pipeline_id = $5, pipeline_key = $6, stage = $7, stage_type = $8, primary_contact_id = $9,
                    company_id = $10, value_cents = $11, currency = $12, close_date = $13, custom_fields = $14, updated_at = $15,
                    version = $16, deleted_at = $17
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $18",
            tenant,
        );
        let done = bind_deal(q, d)
            .bind(d.version - 1)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
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
        if let Some(q) = trigram_needle(filter.q.as_ref()).filter(|_| !indexed_filter) {
            return search_page(
                self,
                tenant,
                ("deals", "deals_fts", rows::DEAL_COLUMNS),
                q,
                slice,
                filter.include_deleted,
                rows::deal,
                |d| d.id.as_str(),
            )
            .await;
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {} FROM deals", rows::DEAL_COLUMNS));
        tenant_where(&mut qb, tenant);
        push_not_deleted(&mut qb, filter.include_deleted);
        if let Some(p) = &filter.pipeline_id {
            qb.push(" AND pipeline_id = ").push_bind(p.as_str());
        }
        if let Some(s) = &filter.stage {
            qb.push(" AND stage = ").push_bind(s.as_str());
        }
        if let Some(c) = &filter.company_id {
            qb.push(" AND company_id = ").push_bind(c.as_str());
        }
        if let Some(c) = &filter.primary_contact_id {
            qb.push(" AND primary_contact_id = ").push_bind(c.as_str());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "deals_fts", q);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::deal).collect()
    }
}

fn bind_activity<'q>(q: Query<'q>, a: &'q Activity) -> Query<'q> {
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
impl ActivityRepo for SqliteTx {
    async fn insert_activity(&mut self, tenant: &Tenant, a: &Activity) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, custom_fields, updated_at,
                                     version, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            tenant,
        );
        bind_activity(q, a)
            .bind(a.created_at.millis())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<Option<Activity>, StoreError> {
        let sql = format!(
            "SELECT {} FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::ACTIVITY_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::activity).transpose()
    }

    async fn update_activity(&mut self, tenant: &Tenant, a: &Activity) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE activities SET type = $4, contact_id = $5, deal_id = $6, body = $7, occurred_at = $8, custom_fields = $9,
                    updated_at = $10, version = $11
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12",
            tenant,
        );
        let done = bind_activity(q, a)
            .bind(a.version - 1)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn delete_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<(), StoreError> {
        tenant_query(
            "DELETE FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn list_activities(
        &mut self,
        tenant: &Tenant,
        filter: &ActivityFilter,
        slice: &Slice,
    ) -> Result<Vec<Activity>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(format!(
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
            qb.push(" AND (occurred_at, id) < (")
                .push_bind(ms)
                .push(", ")
                .push_bind(id.to_owned())
                .push(")");
        }
        qb.push(" ORDER BY occurred_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(slice.limit));
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::activity).collect()
    }
}
