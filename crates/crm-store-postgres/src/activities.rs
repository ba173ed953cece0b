//! Activities (`ActivityRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{ActivityFilter, ActivityRepo, Slice},
    StoreError,
};
use crm_domain::{Activity, ActivityId, Tenant};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::binds::bind_activity;

use crate::{
    rows::{self},
    tx::{tenant_query, tenant_where, PostgresTx},
};

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
