//! The event outbox (`EventRepo`).

use crm_app::{ports::HistoryRepo, StoreError};
use crm_domain::{history::Change, Event, Tenant};

use crm_store_sql::Unit;

use crate::tx::tenant_query;

// Every event is queued for dispatch (`event_dispatch_queue`, migration 0011) by the statement
// that inserts it: one round trip, and no write can leave an event out of the queue.
crm_store_sql::impl_event_repo!(crate::PostgresTx, {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError> {
        let q = tenant_query(
            "WITH e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body) VALUES ($1, $2, $3, $4, $5, $6::json)
                        RETURNING workspace_id, mode, id, type, created_at)
             INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
            tenant,
        )
        .bind(event.id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.created_at.millis())
        .bind(crm_store_sql::stored::event::event_json(event));
        self.execute(q).await?;
        Ok(())
    }

    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        match events {
            [] => Ok(()),
            [one] => self.insert_event(tenant, one).await,
            _ => {
                let q = tenant_query(
                    "WITH e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body)
                                SELECT $1, $2, v.id, v.type, v.created_at, v.body::json
                                FROM unnest($3::text[], $4::text[], $5::int8[], $6::text[]) WITH ORDINALITY AS v(id, type, created_at, body, n)
                                ORDER BY v.n
                                RETURNING workspace_id, mode, id, type, created_at)
                     INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
                    tenant,
                )
                .bind(events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
                .bind(events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>())
                .bind(events.iter().map(|e| e.created_at.millis()).collect::<Vec<_>>())
                .bind(events.iter().map(crm_store_sql::stored::event::event_json).collect::<Vec<_>>());
                self.execute(q).await.map(drop)
            }
        }
    }
});

impl crate::PostgresTx {
    /// `Tx::insert_events_and_changes`: the events, their queue rows and the history entries in
    /// one statement (one round trip) when there are both.
    pub(crate) async fn insert_events_and_changes(
        &mut self,
        tenant: &Tenant,
        events: &[Event],
        changes: &[Change],
    ) -> Result<(), StoreError> {
        use crm_app::ports::EventRepo;
        if changes.is_empty() {
            return self.insert_events(tenant, events).await;
        }
        if events.is_empty() {
            return self.insert_changes(tenant, changes).await;
        }
        let q = tenant_query(
            "WITH e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body)
                        SELECT $1, $2, v.id, v.type, v.created_at, v.body::json
                        FROM unnest($3::text[], $4::text[], $5::int8[], $6::text[]) WITH ORDINALITY AS v(id, type, created_at, body, n)
                        ORDER BY v.n
                        RETURNING workspace_id, mode, id, type, created_at),
                  h AS (INSERT INTO record_changes (workspace_id, mode, record_id, id, object, body)
                        SELECT $1, $2, v.record_id, v.id, v.object, v.body::jsonb
                        FROM unnest($7::text[], $8::text[], $9::text[], $10::text[]) AS v(record_id, id, object, body))
             INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
            tenant,
        )
        .bind(events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.created_at.millis()).collect::<Vec<_>>())
        .bind(events.iter().map(crm_store_sql::stored::event::event_json).collect::<Vec<_>>())
        .bind(changes.iter().map(|c| c.record_id.as_str()).collect::<Vec<_>>())
        .bind(changes.iter().map(|c| c.id.as_str()).collect::<Vec<_>>())
        .bind(changes.iter().map(|c| c.object.as_str()).collect::<Vec<_>>())
        .bind(changes.iter().map(|c| crm_store_sql::stored::history::change_json(c).to_string()).collect::<Vec<_>>());
        self.execute(q).await.map(drop)
    }
}
