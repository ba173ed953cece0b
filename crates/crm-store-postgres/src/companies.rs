//! Companies (`CompanyRepo`): the shared statements, and the list, which searches Postgres's
//! trigram indexes.

use crm_app::{
    ports::{CompanyFilter, Slice},
    StoreError,
};
use crm_domain::{Company, Tenant, UserId};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crate::{
    rows,
    search::{planned_per_needle, search_filter, search_page},
    tx::{and_equals, slice_clause, tenant_where},
};

crm_store_sql::impl_company_repo!(crate::PostgresTx, {
    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError> {
        // A list filtered by an indexed column as well keeps one statement (see `search_page`).
        let indexed_filter = filter.domain.is_some() || filter.owner_id.is_some();
        if filter.q.is_some() && !indexed_filter {
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
});

/// A company list's conditions, as ` AND ...` clauses.
fn company_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a CompanyFilter) {
    // Merged tombstones are never listed, not even with `include_deleted` (decisions §18).
    qb.push(if filter.include_deleted {
        " AND merged_into IS NULL"
    } else {
        " AND deleted_at IS NULL"
    });
    if let Some(domain) = &filter.domain {
        qb.push(" AND domain = ").push_bind(domain.to_lowercase());
    }
    and_equals(qb, "owner_id", filter.owner_id.as_ref().map(UserId::as_str));
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}
