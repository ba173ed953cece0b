-- Foundation: workspaces, keys, registry, contacts, companies, events (outbox), idempotency.
-- Times are INTEGER milliseconds since the Unix epoch (UTC). Every tenant table's primary key and
-- indexes lead with (workspace_id, mode); ids are time-ordered, so `ORDER BY id DESC` is newest first.

CREATE TABLE workspaces (
    id                         TEXT PRIMARY KEY,
    name                       TEXT NOT NULL,
    plan                       TEXT NOT NULL,
    created_at                 INTEGER NOT NULL,
    overage_cap_usd            REAL,
    rate_limit_override        INTEGER,
    included_requests_override INTEGER
);

CREATE TABLE api_keys (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    name         TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    key_hash     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER,
    expires_at   INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX api_keys_hash ON api_keys (key_hash);

CREATE TABLE enum_groups (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    grp          TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, grp)
) WITHOUT ROWID;

CREATE TABLE enum_values (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    grp          TEXT NOT NULL,
    value        TEXT NOT NULL,
    label        TEXT,
    created_at   INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, grp, value)
) WITHOUT ROWID;

CREATE TABLE custom_fields (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    object       TEXT NOT NULL,
    key          TEXT NOT NULL,
    label        TEXT,
    data_type    TEXT NOT NULL,
    enum_group   TEXT,
    required     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, object, key)
) WITHOUT ROWID;

CREATE TABLE contacts (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    first_name    TEXT,
    last_name     TEXT,
    email         TEXT,
    phone         TEXT,
    linkedin_url  TEXT,
    company_id    TEXT,
    type          TEXT,
    custom_fields TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    deleted_at    INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, mode, email) WHERE email IS NOT NULL;
CREATE INDEX contacts_company ON contacts (workspace_id, mode, company_id, id) WHERE company_id IS NOT NULL;
CREATE INDEX contacts_type ON contacts (workspace_id, mode, type, id) WHERE type IS NOT NULL;

CREATE TABLE companies (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL,
    domain        TEXT,
    custom_fields TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    deleted_at    INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX companies_domain ON companies (workspace_id, mode, domain, id) WHERE domain IS NOT NULL;

-- The outbox: one row per event, written in the transaction of the change that caused it.
CREATE TABLE events (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    type         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    body         TEXT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX events_type ON events (workspace_id, mode, type, id);

CREATE TABLE idempotency_keys (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    key           TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    reply_status  INTEGER,
    reply_body    BLOB,
    created_at    INTEGER NOT NULL,
    locked_until  INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, key)
) WITHOUT ROWID;
