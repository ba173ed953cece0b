-- Pipelines (stages kept with their pipeline as JSON: always read and written together), deals,
-- activities, and substring search.
--
-- Search: FTS5 trigram indexes over a generated `search_text` column, kept in step by triggers.
-- FTS5 external-content tables address rows by rowid, so contacts and companies move from
-- WITHOUT ROWID tables to rowid tables here (their primary key becomes a unique index).

CREATE TABLE pipelines (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    key          TEXT NOT NULL,
    name         TEXT NOT NULL,
    is_default   INTEGER NOT NULL,
    stages       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX pipelines_key ON pipelines (workspace_id, mode, key);

-- Contacts, rebuilt as a rowid table with its search text.
CREATE TABLE contacts_v2 (
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
    search_text   TEXT GENERATED ALWAYS AS (
        lower(coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(email, '') || ' ' ||
              coalesce(phone, '') || ' ' || coalesce(linkedin_url, ''))
    ) VIRTUAL
);
INSERT INTO contacts_v2 (workspace_id, mode, id, first_name, last_name, email, phone, linkedin_url, company_id, type,
                         custom_fields, created_at, updated_at, version, deleted_at)
    SELECT workspace_id, mode, id, first_name, last_name, email, phone, linkedin_url, company_id, type,
           custom_fields, created_at, updated_at, version, deleted_at FROM contacts;
DROP TABLE contacts;
ALTER TABLE contacts_v2 RENAME TO contacts;
CREATE UNIQUE INDEX contacts_pk ON contacts (workspace_id, mode, id);
CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, mode, email) WHERE email IS NOT NULL;
CREATE INDEX contacts_company ON contacts (workspace_id, mode, company_id, id) WHERE company_id IS NOT NULL;
CREATE INDEX contacts_type ON contacts (workspace_id, mode, type, id) WHERE type IS NOT NULL;

CREATE TABLE companies_v2 (
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
    search_text   TEXT GENERATED ALWAYS AS (lower(name || ' ' || coalesce(domain, ''))) VIRTUAL
);
INSERT INTO companies_v2 (workspace_id, mode, id, name, domain, custom_fields, created_at, updated_at, version, deleted_at)
    SELECT workspace_id, mode, id, name, domain, custom_fields, created_at, updated_at, version, deleted_at FROM companies;
DROP TABLE companies;
ALTER TABLE companies_v2 RENAME TO companies;
CREATE UNIQUE INDEX companies_pk ON companies (workspace_id, mode, id);
CREATE INDEX companies_domain ON companies (workspace_id, mode, domain, id) WHERE domain IS NOT NULL;

CREATE TABLE deals (
    workspace_id       TEXT NOT NULL,
    mode               TEXT NOT NULL,
    id                 TEXT NOT NULL,
    title              TEXT NOT NULL,
    pipeline_id        TEXT NOT NULL,
    pipeline_key       TEXT NOT NULL,
    stage              TEXT NOT NULL,
    stage_type         TEXT NOT NULL,
    primary_contact_id TEXT,
    company_id         TEXT,
    value_cents        INTEGER,
    currency           TEXT,
    close_date         TEXT,
    custom_fields      TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL,
    deleted_at         INTEGER,
    search_text        TEXT GENERATED ALWAYS AS (lower(title)) VIRTUAL
);
CREATE UNIQUE INDEX deals_pk ON deals (workspace_id, mode, id);
CREATE INDEX deals_stage ON deals (workspace_id, mode, pipeline_id, stage, id);
CREATE INDEX deals_company ON deals (workspace_id, mode, company_id, id) WHERE company_id IS NOT NULL;
CREATE INDEX deals_contact ON deals (workspace_id, mode, primary_contact_id, id) WHERE primary_contact_id IS NOT NULL;

CREATE TABLE activities (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    type          TEXT NOT NULL,
    contact_id    TEXT,
    deal_id       TEXT,
    body          TEXT,
    occurred_at   INTEGER NOT NULL,
    custom_fields TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX activities_time ON activities (workspace_id, mode, occurred_at, id);
CREATE INDEX activities_contact ON activities (workspace_id, mode, contact_id, occurred_at, id) WHERE contact_id IS NOT NULL;
CREATE INDEX activities_deal ON activities (workspace_id, mode, deal_id, occurred_at, id) WHERE deal_id IS NOT NULL;

-- Trigram indexes. The text is lower-cased already; the tokenizer folds case as well.
CREATE VIRTUAL TABLE contacts_fts USING fts5(search_text, content='contacts', content_rowid='rowid', tokenize='trigram');
CREATE VIRTUAL TABLE companies_fts USING fts5(search_text, content='companies', content_rowid='rowid', tokenize='trigram');
CREATE VIRTUAL TABLE deals_fts USING fts5(search_text, content='deals', content_rowid='rowid', tokenize='trigram');
INSERT INTO contacts_fts (contacts_fts) VALUES ('rebuild');
INSERT INTO companies_fts (companies_fts) VALUES ('rebuild');

CREATE TRIGGER contacts_fts_insert AFTER INSERT ON contacts BEGIN
    INSERT INTO contacts_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER contacts_fts_delete AFTER DELETE ON contacts BEGIN
    INSERT INTO contacts_fts (contacts_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER contacts_fts_update AFTER UPDATE OF first_name, last_name, email, phone, linkedin_url ON contacts BEGIN
    INSERT INTO contacts_fts (contacts_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO contacts_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;

CREATE TRIGGER companies_fts_insert AFTER INSERT ON companies BEGIN
    INSERT INTO companies_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER companies_fts_delete AFTER DELETE ON companies BEGIN
    INSERT INTO companies_fts (companies_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER companies_fts_update AFTER UPDATE OF name, domain ON companies BEGIN
    INSERT INTO companies_fts (companies_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO companies_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;

CREATE TRIGGER deals_fts_insert AFTER INSERT ON deals BEGIN
    INSERT INTO deals_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER deals_fts_delete AFTER DELETE ON deals BEGIN
    INSERT INTO deals_fts (deals_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER deals_fts_update AFTER UPDATE OF title ON deals BEGIN
    INSERT INTO deals_fts (deals_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO deals_fts (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
