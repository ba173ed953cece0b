-- Bulk imports (decisions §20, §23, §24). An import's row is also its idempotency claim; its file
-- is kept in `import_chunks` (whole CSV records each) until the import ends, and its row errors
-- in `import_errors` for 30 days after. `targets`, `author` and `error` are JSON text;
-- timestamps are Unix milliseconds. A worker claims an import with `claim_token` until
-- `lease_until`, and writes one chunk per transaction.
CREATE TABLE imports (
    workspace_id     TEXT NOT NULL,
    mode             TEXT NOT NULL,
    id               TEXT COLLATE "C" NOT NULL,
    object           TEXT NOT NULL,
    status           TEXT NOT NULL,
    on_duplicate     TEXT NOT NULL,
    dry_run          BOOLEAN NOT NULL,
    targets          TEXT NOT NULL,
    author           TEXT NOT NULL,
    rows_total       BIGINT NOT NULL DEFAULT 0,
    rows_done        BIGINT NOT NULL DEFAULT 0,
    created          BIGINT NOT NULL DEFAULT 0,
    updated          BIGINT NOT NULL DEFAULT 0,
    skipped          BIGINT NOT NULL DEFAULT 0,
    failed           BIGINT NOT NULL DEFAULT 0,
    chunks_total     BIGINT NOT NULL DEFAULT 0,
    chunks_done      BIGINT NOT NULL DEFAULT 0,
    error            TEXT,
    malformed_row    BIGINT,
    malformed_reason TEXT,
    idempotency_key  TEXT,
    fingerprint      TEXT,
    claim_token      TEXT,
    lease_until      BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    PRIMARY KEY (workspace_id, mode, id)
);

CREATE UNIQUE INDEX imports_idempotency_key ON imports (workspace_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The worker's scan: imports waiting or running, by lease end.
CREATE INDEX imports_due ON imports (lease_until) WHERE status IN ('queued', 'running');

CREATE TABLE import_chunks (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    import_id    TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    first_row    BIGINT NOT NULL,
    row_count    BIGINT NOT NULL,
    data         BYTEA NOT NULL,
    PRIMARY KEY (workspace_id, mode, import_id, seq)
);

CREATE TABLE import_errors (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    import_id    TEXT NOT NULL,
    row_no       BIGINT NOT NULL,
    problem      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, mode, import_id, row_no)
);
