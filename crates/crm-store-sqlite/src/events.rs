//! The event outbox (`EventRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{EventRepo, Slice},
    StoreError,
};
use crm_domain::{Event, Tenant};
use sqlx::{sqlite::SqliteRow, QueryBuilder, Row, Sqlite};

use crate::{
    backend, rows,
    tx::{slice_clause, tenant_where, SqliteTx},
};

/// Every event is queued for dispatch (`event_dispatch_queue`, migration 0011) in the
/// transaction that inserts it.
#[async_trait]
impl EventRepo for SqliteTx {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError> {
        self.insert_events(tenant, std::slice::from_ref(event))
            .await
    }

    /// Two statements per 1,000 events (6 parameters each, under SQLite's 32,766): the events,
    /// then their queue rows.
    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        for chunk in events.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO events (workspace_id, mode, id, type, created_at, body) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.event_type.as_str())
                    .push_bind(e.created_at.millis())
                    .push_bind(e.snapshot().to_string());
            });
            qb.build().execute(self.conn()).await.map_err(backend)?;
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.event_type.as_str())
                    .push_bind(e.created_at.millis());
            });
            qb.build().execute(self.conn()).await.map_err(backend)?;
        }
        Ok(())
    }

    async fn list_events(
        &mut self,
        tenant: &Tenant,
        event_type: Option<&str>,
        slice: &Slice,
    ) -> Result<Vec<Event>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT body FROM events");
        tenant_where(&mut qb, tenant);
        if let Some(t) = event_type {
            qb.push(" AND type = ").push_bind(t);
        }
        slice_clause(&mut qb, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter()
            .map(|r: &SqliteRow| {
                let body: String = r.try_get("body").map_err(backend)?;
                let v: serde_json::Value =
                    serde_json::from_str(&body).map_err(|_| rows::corrupt("event body"))?;
                Event::from_snapshot(&v).ok_or_else(|| rows::corrupt("event body"))
            })
            .collect()
    }
}
