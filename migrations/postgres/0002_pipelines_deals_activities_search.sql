-- Pipelines (stages kept with their pipeline as JSONB: always read and written together), deals,
-- activities, and substring search through trigram GIN indexes (pg_trgm).
--
-- The trigram indexes are the one exception to "indexes lead with (workspace_id, mode)": a GIN
-- index led by the tenant columns (btree_gin) makes every search read all of the tenant's entries
-- (measured: 18-34 ms against 0.9 ms for a rare needle at 200k rows); the tenant condition is
-- applied to the few matching rows instead.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE pipelines (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    key          TEXT NOT NULL,
    name         TEXT NOT NULL,
    is_default   BOOLEAN NOT NULL,
    stages       JSONB NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    version      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE UNIQUE INDEX pipelines_key ON pipelines (workspace_id, mode, key);

ALTER TABLE contacts ADD COLUMN search_text TEXT GENERATED ALWAYS AS (
    lower(coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(email, '') || ' ' ||
          coalesce(phone, '') || ' ' || coalesce(linkedin_url, ''))
) STORED;
CREATE INDEX contacts_search ON contacts USING gin (search_text gin_trgm_ops);

ALTER TABLE companies ADD COLUMN search_text TEXT GENERATED ALWAYS AS (lower(name || ' ' || coalesce(domain, ''))) STORED;
CREATE INDEX companies_search ON companies USING gin (search_text gin_trgm_ops);

CREATE TABLE deals (
    workspace_id       TEXT NOT NULL,
    mode               TEXT NOT NULL,
    id                 TEXT COLLATE "C" NOT NULL,
    title              TEXT NOT NULL,
    pipeline_id        TEXT NOT NULL,
    pipeline_key       TEXT NOT NULL,
    stage              TEXT NOT NULL,
    stage_type         TEXT NOT NULL,
    primary_contact_id TEXT,
    company_id         TEXT,
    value_cents        BIGINT,
    currency           TEXT,
    close_date         TEXT,
    custom_fields      JSONB NOT NULL,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    version            BIGINT NOT NULL,
    deleted_at         BIGINT,
    search_text        TEXT GENERATED ALWAYS AS (lower(title)) STORED,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX deals_stage ON deals (workspace_id, mode, pipeline_id, stage, id);
CREATE INDEX deals_company ON deals (workspace_id, mode, company_id, id) WHERE company_id IS NOT NULL;
CREATE INDEX deals_contact ON deals (workspace_id, mode, primary_contact_id, id) WHERE primary_contact_id IS NOT NULL;
CREATE INDEX deals_search ON deals USING gin (search_text gin_trgm_ops);

CREATE TABLE activities (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    type          TEXT NOT NULL,
    contact_id    TEXT,
    deal_id       TEXT,
    body          TEXT,
    occurred_at   BIGINT NOT NULL,
    custom_fields JSONB NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    version       BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX activities_time ON activities (workspace_id, mode, occurred_at, id);
CREATE INDEX activities_contact ON activities (workspace_id, mode, contact_id, occurred_at, id) WHERE contact_id IS NOT NULL;
CREATE INDEX activities_deal ON activities (workspace_id, mode, deal_id, occurred_at, id) WHERE deal_id IS NOT NULL;
