//! Deals (`DealRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{DealFilter, DealRepo, Slice},
    StoreError,
};
use crm_domain::{Deal, DealId, Tenant};
use sqlx::{QueryBuilder, Sqlite};

use crm_store_sql::binds::bind_deal;

use crate::{
    backend, rows,
    search::{push_not_deleted, push_search, search_page, trigram_needle},
    tx::{slice_clause, tenant_query, tenant_where, SqliteTx},
};

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
