//! Companies (`CompanyRepo`): the shared statements, and the list, which searches SQLite's FTS
//! tables.

use crm_app::{
    ports::{CompanyFilter, Slice},
    StoreError,
};
use crm_domain::{Company, Tenant};
use sqlx::{QueryBuilder, Sqlite};

use crate::{
    backend, rows,
    search::{push_not_deleted, push_search, search_page, trigram_needle},
    tx::{slice_clause, tenant_where},
};

crm_store_sql::impl_company_repo!(crate::SqliteTx, {
    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        // A list filtered by an indexed column as well keeps one statement (see `search_page`).
        let indexed_filter = filter.domain.is_some() || filter.owner_id.is_some();
        if let Some(q) = trigram_needle(filter.q.as_ref()).filter(|_| !indexed_filter) {
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
        push_not_deleted(&mut qb, "companies", filter.include_deleted);
        if let Some(domain) = &filter.domain {
            qb.push(" AND domain = ").push_bind(domain.to_lowercase());
        }
        if let Some(owner) = &filter.owner_id {
            qb.push(" AND owner_id = ").push_bind(owner.as_str());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "companies_fts", q);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::company).collect()
    }
});
