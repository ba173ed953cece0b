-- Exports (decisions §25). A worker claims an export with `claim_token` until `lease_until`
-- (as imports are claimed) and writes its file in `export_chunks`, one chunk per transaction
-- together with the export's `resume_after` (the list position after the last record written), so a
-- killed worker's successor resumes there. `list_filter`, `csv_columns`, `author` and `error` are JSON
-- text; timestamps are Unix milliseconds. Exports and their chunks go once `expires_at` passes.
CREATE TABLE exports (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT NOT NULL,
    object       TEXT NOT NULL,
    format       TEXT NOT NULL,
    status       TEXT NOT NULL,
    list_filter  TEXT NOT NULL,
    csv_columns  TEXT NOT NULL,
    author       TEXT NOT NULL,
    rows_total   INTEGER,
    rows_done    INTEGER NOT NULL DEFAULT 0,
    resume_after TEXT,
    chunks_total INTEGER NOT NULL DEFAULT 0,
    error        TEXT,
    claim_token  TEXT,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    expires_at   INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;

-- The worker's scan: exports waiting or running, by lease end.
CREATE INDEX exports_due ON exports (lease_until) WHERE status IN ('queued', 'running');
-- The sweep of expired exports.
CREATE INDEX exports_expiry ON exports (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE export_chunks (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    export_id    TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    data         BLOB NOT NULL,
    PRIMARY KEY (workspace_id, mode, export_id, seq)
);
