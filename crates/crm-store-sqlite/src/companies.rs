//! Companies (`CompanyRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{CompanyFilter, CompanyRepo, Slice},
    StoreError,
};
use crm_domain::{Company, CompanyId, Tenant};
use sqlx::{QueryBuilder, Sqlite};

use crm_store_sql::binds::bind_company;

use crate::{
    backend, rows,
    search::{push_not_deleted, push_search, search_page, trigram_needle},
    tx::{slice_clause, tenant_where, SqliteTx},
};

#[async_trait]
impl CompanyRepo for SqliteTx {
    async fn insert_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = sqlx::query(
            "INSERT INTO companies (name, domain, custom_fields, updated_at, version, deleted_at, workspace_id, mode, id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        );
        bind_company(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.created_at.millis())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError> {
        let sql = format!(
            "SELECT {} FROM companies WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::COMPANY_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::company).transpose()
    }

    async fn update_company(&mut self, tenant: &Tenant, c: &Company) -> Result<(), StoreError> {
        let q = sqlx::query(
            "UPDATE companies SET name = $1, domain = $2, custom_fields = $3, updated_at = $4, version = $5, deleted_at = $6
             WHERE workspace_id = $7 AND mode = $8 AND id = $9 AND version = $10",
        );
        let done = bind_company(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.version - 1)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        if let Some(q) = trigram_needle(filter.q.as_ref()).filter(|_| filter.domain.is_none()) {
            return search_page(
                self,
                tenant,
                ("companies", "companies_fts", rows::COMPANY_COLUMNS),
                q,
                slice,
                filter.include_deleted,
                rows::company,
                |c| c.id.as_str(),
            )
            .await;
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {} FROM companies", rows::COMPANY_COLUMNS));
        tenant_where(&mut qb, tenant);
        push_not_deleted(&mut qb, filter.include_deleted);
        if let Some(domain) = &filter.domain {
            qb.push(" AND domain = ").push_bind(domain.to_lowercase());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "companies_fts", q);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::company).collect()
    }
}
