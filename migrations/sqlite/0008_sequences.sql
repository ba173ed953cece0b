-- Sequences (spec "Sequence"; decisions §13) and their enrollments. Definitions are JSON as the
-- API shows them (text). Every write that emits events reads the
-- tenant's enabled sequences for its event types through `sequences_triggered`; every write that
-- changes contacts or deals looks up active enrollments by source through
-- `sequence_enrollments_by_source`; the scheduler claims due steps across tenants through
-- `sequence_enrollments_due` (the single writer serialises claims).

CREATE TABLE sequences (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    id              TEXT NOT NULL,
    name            TEXT NOT NULL,
    trigger_event   TEXT,
    trigger_def     TEXT NOT NULL,
    exit_when       TEXT NOT NULL,
    steps           TEXT NOT NULL,
    enabled         INTEGER NOT NULL,
    enroll_existing INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX sequences_triggered ON sequences (workspace_id, mode, trigger_event, id) WHERE enabled = 1;

CREATE TABLE sequence_enrollments (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    sequence_id   TEXT NOT NULL,
    contact_id    TEXT NOT NULL,
    source_object TEXT NOT NULL,
    source_id     TEXT NOT NULL,
    state         TEXT NOT NULL,
    exit_reason   TEXT,
    steps_sent    INTEGER NOT NULL,
    next_send_at  INTEGER,
    lease_holder  TEXT,
    lease_until   INTEGER,
    enrolled_at   INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
-- At most once per sequence and contact, ever.
CREATE UNIQUE INDEX sequence_enrollments_once ON sequence_enrollments (workspace_id, mode, sequence_id, contact_id);
CREATE INDEX sequence_enrollments_by_sequence ON sequence_enrollments (workspace_id, mode, sequence_id, id);
CREATE INDEX sequence_enrollments_by_source ON sequence_enrollments (workspace_id, mode, source_id) WHERE state = 'active';
CREATE INDEX sequence_enrollments_due ON sequence_enrollments (next_send_at) WHERE state = 'active';
