//! Deals (`DealRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{DealFilter, DealRepo, Slice},
    StoreError,
};
use crm_domain::{CompanyId, ContactId, Deal, DealId, PipelineId, Tenant};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::binds::bind_deal;

use crate::{
    rows::{self},
    search::{planned_per_needle, search_filter, search_page},
    tx::{and_equals, slice_clause, tenant_query, tenant_where, PostgresTx},
};

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
