-- E-mail addresses are stored normalised (NFKC, lower-cased, the domain in ASCII; decisions §22).
-- Normalising needs Unicode tables and IDNA, which SQL lacks, so the rows are rewritten by the
-- store's data step that runs after the migrations (`crm-store-postgres`, `normalise_contact_emails`),
-- once: it records itself in `data_migrations`. A contact whose normalised address another contact
-- of its workspace and mode already holds keeps its address as it was and is listed in
-- `email_normalisation_conflicts` for an operator to resolve (docs/operations.md); so is one whose
-- address no longer passes as an address.
CREATE TABLE data_migrations (
    name       TEXT NOT NULL PRIMARY KEY,
    applied_at BIGINT NOT NULL
);

CREATE TABLE email_normalisation_conflicts (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    contact_id   TEXT COLLATE "C" NOT NULL,
    email        TEXT NOT NULL,
    -- 'taken': `normalised` is held by `held_by`; 'invalid': the address does not normalise.
    reason       TEXT NOT NULL,
    normalised   TEXT,
    held_by      TEXT,
    recorded_at  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, contact_id)
);
