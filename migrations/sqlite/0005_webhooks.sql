-- Webhooks (decisions §11): subscriptions, one delivery per (event, webhook), and every attempt.
--
-- Dispatch: `events.dispatched` marks the events a dispatcher has turned into deliveries. A
-- dispatcher locks a batch of undispatched events (the single writer serialises dispatchers, so several processes
-- take different batches), inserts their deliveries (idempotent through the unique key
-- (event, webhook)) and marks them, in one transaction.
--
-- Delivery: a worker claims due deliveries (status pending or retrying, next_attempt_at <= now)
-- (an UPDATE ... RETURNING under the single writer) and moves next_attempt_at to the end of its lease, with a fresh
-- claim_token. An attempt's outcome is recorded only while the token still matches; a process
-- killed mid-delivery leaves the row to come due again when its lease ends.

ALTER TABLE events ADD COLUMN dispatched INTEGER NOT NULL DEFAULT 0;
CREATE INDEX events_undispatched ON events (created_at, id) WHERE dispatched = 0;

CREATE TABLE webhooks (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    url          TEXT NOT NULL,
    events       TEXT NOT NULL,
    description  TEXT,
    enabled      INTEGER NOT NULL,
    secret       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);

CREATE TABLE webhook_deliveries (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    id              TEXT NOT NULL,
    webhook_id      TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    claim_token     TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE UNIQUE INDEX webhook_deliveries_pair ON webhook_deliveries (workspace_id, mode, event_id, webhook_id);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (workspace_id, mode, webhook_id, id);
-- The due-claim query: only deliveries still to be sent are indexed.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'retrying');

CREATE TABLE webhook_delivery_attempts (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    seq             TEXT NOT NULL,
    webhook_id      TEXT NOT NULL,
    delivery_id     TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status          TEXT NOT NULL,
    response_status INTEGER,
    error           TEXT,
    duration_ms     INTEGER NOT NULL,
    next_attempt_at INTEGER,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, seq)
);
CREATE INDEX webhook_delivery_attempts_webhook ON webhook_delivery_attempts (workspace_id, mode, webhook_id, seq);
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (workspace_id, mode, delivery_id);
