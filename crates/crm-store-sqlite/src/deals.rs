//! Deals (`DealRepo`): the shared statements, and the list, which searches SQLite's FTS tables.

use crm_app::{
    ports::{DealFilter, Slice},
    StoreError,
};
use crm_domain::{Deal, Tenant};
use sqlx::{QueryBuilder, Sqlite};

use crm_store_sql::deals::filtered_by_index;

use crate::{
    backend, rows,
    search::{push_not_deleted, push_search, search_page, trigram_needle},
    tx::{slice_clause, tenant_where},
};

crm_store_sql::impl_deal_repo!(crate::SqliteTx, {
    async fn list_deals(
        &mut self,
        tenant: &Tenant,
        filter: &DealFilter,
        slice: &Slice,
    ) -> Result<Vec<Deal>, StoreError> {
        if let Some(q) = trigram_needle(filter.q.as_ref()).filter(|_| !filtered_by_index(filter)) {
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
        push_not_deleted(&mut qb, "deals", filter.include_deleted);
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
        if let Some(owner) = &filter.owner_id {
            qb.push(" AND owner_id = ").push_bind(owner.as_str());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "deals_fts", q);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::deal).collect()
    }
});
