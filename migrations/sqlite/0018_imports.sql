-- Bulk imports (decisions §20, §23, §24). An import's row is also its idempotency claim; its file
-- is kept in `import_chunks` (whole CSV records each) until the import ends, and its row errors
-- in `import_errors` for 30 days after. `targets`, `author` and `error` are JSON text;
-- timestamps are Unix milliseconds. A worker claims an import with `claim_token` until
-- `lease_until`, and writes one chunk per transaction.
CREATE TABLE imports (
    workspace_id     TEXT NOT NULL,
    mode             TEXT NOT NULL,
    id               TEXT NOT NULL,
    object           TEXT NOT NULL,
    status           TEXT NOT NULL,
    on_duplicate     TEXT NOT NULL,
    dry_run          INTEGER NOT NULL,
    targets          TEXT NOT NULL,
    author           TEXT NOT NULL,
    rows_total       INTEGER NOT NULL DEFAULT 0,
    rows_done        INTEGER NOT NULL DEFAULT 0,
    created          INTEGER NOT NULL DEFAULT 0,
    updated          INTEGER NOT NULL DEFAULT 0,
    skipped          INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    chunks_total     INTEGER NOT NULL DEFAULT 0,
    chunks_done      INTEGER NOT NULL DEFAULT 0,
    error            TEXT,
    malformed_row    INTEGER,
    malformed_reason TEXT,
    idempotency_key  TEXT,
    fingerprint      TEXT,
    claim_token      TEXT,
    lease_until      INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX imports_idempotency_key ON imports (workspace_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The worker's scan: imports waiting or running, by lease end.
CREATE INDEX imports_due ON imports (lease_until) WHERE status IN ('queued', 'running');

CREATE TABLE import_chunks (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    import_id    TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    first_row    INTEGER NOT NULL,
    row_count    INTEGER NOT NULL,
    data         BLOB NOT NULL,
    PRIMARY KEY (workspace_id, mode, import_id, seq)
);

CREATE TABLE import_errors (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    import_id    TEXT NOT NULL,
    row_no       INTEGER NOT NULL,
    problem      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, mode, import_id, row_no)
) WITHOUT ROWID;
