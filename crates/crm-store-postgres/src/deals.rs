//! Deals (`DealRepo`): the shared statements, and the list, which searches Postgres's trigram
//! indexes.

use crm_app::{
    ports::{DealFilter, Slice},
    StoreError,
};
use crm_domain::{CompanyId, ContactId, Deal, PipelineId, Tenant, UserId};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::deals::filtered_by_index;

use crate::{
    rows,
    search::{planned_per_needle, search_filter, search_page},
    tx::{and_equals, slice_clause, tenant_where},
};

crm_store_sql::impl_deal_repo!(crate::PostgresTx, {
    async fn list_deals(
        &mut self,
        tenant: &Tenant,
        filter: &DealFilter,
        slice: &Slice,
    ) -> Result<Vec<Deal>, StoreError> {
        if filter.q.is_some() && !filtered_by_index(filter) {
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
});

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
    and_equals(qb, "owner_id", filter.owner_id.as_ref().map(UserId::as_str));
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}
