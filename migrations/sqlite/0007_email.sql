-- Email: the workspace's sending connections (the provider key is kept to send with and never
-- shown again), templates, and every email sent or simulated. Queued live emails are claimed by
-- the sending worker through `emails_due` (across tenants, like any outbox).

CREATE TABLE connections (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    provider     TEXT NOT NULL,
    api_key      TEXT NOT NULL,
    from_addr    TEXT NOT NULL,
    base_url     TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;

CREATE TABLE templates (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    name         TEXT NOT NULL,
    subject      TEXT NOT NULL,
    body         TEXT NOT NULL,
    text         TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;

CREATE TABLE emails (
    workspace_id        TEXT NOT NULL,
    mode                TEXT NOT NULL,
    id                  TEXT NOT NULL,
    to_addr             TEXT NOT NULL,
    from_addr           TEXT NOT NULL,
    subject             TEXT NOT NULL,
    html                TEXT NOT NULL,
    text                TEXT NOT NULL,
    status              TEXT NOT NULL,
    error               TEXT,
    source              TEXT NOT NULL,
    contact_id          TEXT,
    deal_id             TEXT,
    attempts            INTEGER NOT NULL,
    next_attempt_at     INTEGER,
    claimed_until       INTEGER,
    provider_message_id TEXT,
    created_at          INTEGER NOT NULL,
    sent_at             INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX emails_contact ON emails (workspace_id, mode, contact_id, id) WHERE contact_id IS NOT NULL;
CREATE INDEX emails_deal ON emails (workspace_id, mode, deal_id, id) WHERE deal_id IS NOT NULL;
CREATE INDEX emails_status ON emails (workspace_id, mode, status, id);
CREATE INDEX emails_due ON emails (next_attempt_at) WHERE status = 'queued';
