-- The events a dispatcher has yet to turn into deliveries, in a queue of their own instead of a
-- `dispatched` flag on `events` (0005). Marking an event was an UPDATE of its whole row (the JSON
-- body with it) that could not be HOT, as the flag is in a partial index's predicate: a new heap
-- tuple and an entry in every index of `events` for each event, and about 2 KB of WAL. Deleting
-- its queue row writes a tenth of that and no index entry: a 500-event batch took 13 ms marked
-- and 3.7 ms deleted (docs/performance.md). Each write queues its events in the statement that
-- inserts them (crm-store-postgres, `EventRepo`); the dispatcher locks a batch of queue rows
-- (FOR UPDATE SKIP LOCKED) and deletes them in the transaction that inserts their deliveries.
-- Writers wait until this commits (readers do not): an event committed after the copy below but
-- before the flag is dropped would otherwise never be queued.
LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE event_dispatch_queue (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    type         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
-- Oldest first, as the dispatcher takes them.
CREATE INDEX event_dispatch_queue_order ON event_dispatch_queue (created_at, id);

INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at)
SELECT workspace_id, mode, id, type, created_at FROM events WHERE NOT dispatched;

DROP INDEX events_undispatched;
ALTER TABLE events DROP COLUMN dispatched;
