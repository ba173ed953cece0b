-- The events a dispatcher has yet to turn into deliveries, in a queue of their own instead of a
-- `dispatched` flag on `events` (0005), as on Postgres: marking an event rewrote its row (the
-- JSON body with it) and its partial-index entry, on pages long written out, so each batch put
-- those pages in the WAL again under the single writer. Deleting a queue row touches only the
-- queue's few hot pages. Each write queues its events next to inserting them
-- (crm-store-sqlite, `EventRepo`); the dispatcher reads a batch oldest first and deletes it in
-- the transaction that inserts its deliveries. Dropping the column rewrites `events` once.
CREATE TABLE event_dispatch_queue (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    type         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
-- Oldest first, as the dispatcher takes them.
CREATE INDEX event_dispatch_queue_order ON event_dispatch_queue (created_at, id);

INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at)
SELECT workspace_id, mode, id, type, created_at FROM events WHERE dispatched = 0;

DROP INDEX events_undispatched;
ALTER TABLE events DROP COLUMN dispatched;
