-- Sequences (spec "Sequence"; decisions §13) and their enrollments. Definitions are JSON as the
-- API shows them (JSON, not JSONB: key order kept). Every write that emits events reads the
-- tenant's enabled sequences for its event types through `sequences_triggered`; every write that
-- changes contacts or deals looks up active enrollments by source through
-- `sequence_enrollments_by_source`; the scheduler claims due steps across tenants through
-- `sequence_enrollments_due` with `FOR UPDATE SKIP LOCKED`.

CREATE TABLE sequences (
    workspace_id    TEXT NOT NULL,
    mode            TEXT NOT NULL,
    id              TEXT COLLATE "C" NOT NULL,
    name            TEXT NOT NULL,
    trigger_event   TEXT,
    trigger_def     JSON NOT NULL,
    exit_when       JSON NOT NULL,
    steps           JSON NOT NULL,
    enabled         BOOLEAN NOT NULL,
    enroll_existing BOOLEAN NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    version         BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX sequences_triggered ON sequences (workspace_id, mode, trigger_event, id) WHERE enabled;

CREATE TABLE sequence_enrollments (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    sequence_id   TEXT COLLATE "C" NOT NULL,
    contact_id    TEXT COLLATE "C" NOT NULL,
    source_object TEXT NOT NULL,
    source_id     TEXT COLLATE "C" NOT NULL,
    state         TEXT NOT NULL,
    exit_reason   TEXT,
    steps_sent    INTEGER NOT NULL,
    next_send_at  BIGINT,
    lease_holder  TEXT,
    lease_until   BIGINT,
    enrolled_at   BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    PRIMARY KEY (workspace_id, mode, id)
);
-- At most once per sequence and contact, ever.
CREATE UNIQUE INDEX sequence_enrollments_once ON sequence_enrollments (workspace_id, mode, sequence_id, contact_id);
CREATE INDEX sequence_enrollments_by_sequence ON sequence_enrollments (workspace_id, mode, sequence_id, id);
CREATE INDEX sequence_enrollments_by_source ON sequence_enrollments (workspace_id, mode, source_id) WHERE state = 'active';
CREATE INDEX sequence_enrollments_due ON sequence_enrollments (next_send_at) WHERE state = 'active';
