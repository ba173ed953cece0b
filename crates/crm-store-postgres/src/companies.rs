//! Companies (`CompanyRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{CompanyFilter, CompanyRepo, Slice},
    StoreError,
};
use crm_domain::{Company, CompanyId, Tenant};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::binds::bind_company;

use crate::{
    rows::{self},
    search::{planned_per_needle, search_filter, search_page},
    tx::{slice_clause, tenant_query, tenant_where, PostgresTx},
};

#[async_trait]
impl CompanyRepo for PostgresTx {
    async fn insert_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO companies (workspace_id, mode, id, created_at, name, domain, custom_fields, updated_at, version, deleted_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.created_at.millis());
        self.execute(bind_company(q, c)).await?;
        Ok(())
    }

    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError> {
        let sql = format!(
            "SELECT {} FROM companies WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::COMPANY_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::company)
            .await
    }

    async fn update_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        // Companies have no uniqueness rule beyond their id, so no savepoint is needed.
        let q = tenant_query(
            "UPDATE companies SET name = $5, domain = $6, custom_fields = $7::jsonb, updated_at = $8, version = $9, deleted_at = $10
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.version - 1);
        match self.execute(bind_company(q, c)).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
    }

    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        if filter.q.is_some() && filter.domain.is_none() {
            let table = ("companies", rows::COMPANY_COLUMNS);
            return search_page(
                self,
                tenant,
                table,
                slice,
                &|qb| company_conditions(qb, filter),
                rows::company,
                |c| c.id.as_str(),
            )
            .await;
        }
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {} FROM companies",
            rows::COMPANY_COLUMNS
        ));
        tenant_where(&mut qb, tenant);
        company_conditions(&mut qb, filter);
        slice_clause(&mut qb, slice);
        self.all(
            planned_per_needle(&mut qb, filter.q.is_some()),
            rows::company,
        )
        .await
    }
}

/// A company list's conditions, as ` AND ...` clauses.
fn company_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a CompanyFilter) {
    if !filter.include_deleted {
        qb.push(" AND deleted_at IS NULL");
    }
    if let Some(domain) = &filter.domain {
        qb.push(" AND domain = ").push_bind(domain.to_lowercase());
    }
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}
