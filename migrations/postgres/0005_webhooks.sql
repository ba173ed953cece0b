-- Webhooks (decisions §11): subscriptions, one delivery per (event, webhook), and every attempt.
--
-- Dispatch: `events.dispatched` marks the events a dispatcher has turned into deliveries. A
-- dispatcher locks a batch of undispatched events (FOR UPDATE SKIP LOCKED, so several processes
-- take different batches), inserts their deliveries (idempotent through the unique key
-- (event, webhook)) and marks them, in one transaction.
--
-- Delivery: a worker claims due deliveries (status pending or retrying, next_attempt_at <= now)
-- with FOR UPDATE SKIP LOCKED and moves next_attempt_at to the end of its lease, with a fresh
-- claim_token. An attempt's outcome is recorded only while the token still matches; a process
-- killed mid-delivery leaves the row to come due again when its lease ends.

ALTER TABLE events ADD COLUMN dispatched BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX events_undispatched ON events (created_at, id) WHERE NOT dispatched;

CREATE TABLE webhooks (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    url          TEXT NOT NULL,
    events       TEXT NOT NULL,
    description  TEXT,
    enabled      BOOLEAN NOT NULL,
    secret       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    version      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);

CREATE TABLE webhook_deliveries (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    id              TEXT COLLATE "C" NOT NULL,
    webhook_id      TEXT COLLATE "C" NOT NULL,
    event_id        TEXT COLLATE "C" NOT NULL,
    event_type      TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    claim_token     TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE UNIQUE INDEX webhook_deliveries_pair ON webhook_deliveries (workspace_id, mode, event_id, webhook_id);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (workspace_id, mode, webhook_id, id);
-- The due-claim query: only deliveries still to be sent are indexed.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'retrying');

CREATE TABLE webhook_delivery_attempts (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    seq             TEXT COLLATE "C" NOT NULL,
    webhook_id      TEXT COLLATE "C" NOT NULL,
    delivery_id     TEXT COLLATE "C" NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status          TEXT NOT NULL,
    response_status INTEGER,
    error           TEXT,
    duration_ms     BIGINT NOT NULL,
    next_attempt_at BIGINT,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, seq)
);
CREATE INDEX webhook_delivery_attempts_webhook ON webhook_delivery_attempts (workspace_id, mode, webhook_id, seq);
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (workspace_id, mode, delivery_id);
