-- Automations (decisions §12) and their runs (one row per evaluation of a rule for an event).
-- Conditions and actions are JSON as the API shows them (JSON, not JSONB: key order kept). Every
-- write that emits events reads the tenant's enabled rules for its event types through
-- `automations_active`.

CREATE TABLE automations (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    name          TEXT NOT NULL,
    trigger_event TEXT NOT NULL,
    conditions    JSON NOT NULL,
    actions       JSON NOT NULL,
    enabled       BOOLEAN NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    version       BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX automations_active ON automations (workspace_id, mode, trigger_event, id) WHERE enabled;

CREATE TABLE automation_runs (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    automation_id TEXT COLLATE "C" NOT NULL,
    event_id      TEXT NOT NULL,
    event_type    TEXT NOT NULL,
    record_id     TEXT NOT NULL,
    matched       BOOLEAN NOT NULL,
    actions       JSON NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX automation_runs_by_rule ON automation_runs (workspace_id, mode, automation_id, id);
