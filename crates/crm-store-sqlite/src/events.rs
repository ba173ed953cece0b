//! The event outbox (`EventRepo`).

use crm_app::StoreError;
use crm_domain::{Event, Tenant};
use sqlx::{QueryBuilder, Sqlite};

use crate::backend;

// Every event is queued for dispatch (`event_dispatch_queue`, migration 0011) in the
// transaction that inserts it.
crm_store_sql::impl_event_repo!(crate::SqliteTx, {
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
                    .push_bind(crm_store_sql::stored::event::event_json(e));
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
});
