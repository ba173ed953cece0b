-- Foundation: workspaces, keys, registry, contacts, companies, events (outbox), idempotency.
-- Times are BIGINT milliseconds since the Unix epoch (UTC). Every tenant table's primary key and
-- indexes lead with (workspace_id, mode); ids are time-ordered and compared bytewise (COLLATE "C"),
-- so `ORDER BY id DESC` is newest first.

CREATE TABLE workspaces (
    id                         TEXT PRIMARY KEY,
    name                       TEXT NOT NULL,
    plan                       TEXT NOT NULL,
    created_at                 BIGINT NOT NULL,
    overage_cap_usd            DOUBLE PRECISION,
    rate_limit_override        BIGINT,
    included_requests_override BIGINT
);

CREATE TABLE api_keys (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    name         TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    key_hash     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT,
    expires_at   BIGINT,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (key_hash);

CREATE TABLE enum_groups (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    grp          TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, grp)
);

CREATE TABLE enum_values (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    grp          TEXT NOT NULL,
    value        TEXT NOT NULL,
    label        TEXT,
    created_at   BIGINT NOT NULL,
    position     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, grp, value)
);

CREATE TABLE custom_fields (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    object       TEXT NOT NULL,
    key          TEXT NOT NULL,
    label        TEXT,
    data_type    TEXT NOT NULL,
    enum_group   TEXT,
    required     BOOLEAN NOT NULL,
    created_at   BIGINT NOT NULL,
    position     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, object, key)
);

CREATE TABLE contacts (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    first_name    TEXT,
    last_name     TEXT,
    email         TEXT,
    phone         TEXT,
    linkedin_url  TEXT,
    company_id    TEXT,
    type          TEXT,
    custom_fields JSONB NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    version       BIGINT NOT NULL,
    deleted_at    BIGINT,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, mode, email) WHERE email IS NOT NULL;
CREATE INDEX contacts_company ON contacts (workspace_id, mode, company_id, id) WHERE company_id IS NOT NULL;
CREATE INDEX contacts_type ON contacts (workspace_id, mode, type, id) WHERE type IS NOT NULL;

CREATE TABLE companies (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    name          TEXT NOT NULL,
    domain        TEXT,
    custom_fields JSONB NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    version       BIGINT NOT NULL,
    deleted_at    BIGINT,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX companies_domain ON companies (workspace_id, mode, domain, id) WHERE domain IS NOT NULL;

-- The outbox: one row per event, written in the transaction of the change that caused it. The body is
-- JSON (not JSONB) so it keeps the key order webhooks and GET /events show on both stores.
CREATE TABLE events (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    type         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    body         JSON NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX events_type ON events (workspace_id, mode, type, id);

CREATE TABLE idempotency_keys (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    key           TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    reply_status  BIGINT,
    reply_body    BYTEA,
    created_at    BIGINT NOT NULL,
    locked_until  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, key)
);
