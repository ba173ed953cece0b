-- Automations (decisions §12) and their runs (one row per evaluation of a rule for an event).
-- Conditions and actions are JSON text as the API shows them. Every write that emits events
-- reads the tenant's enabled rules for its event types through `automations_active`.

CREATE TABLE automations (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL,
    trigger_event TEXT NOT NULL,
    conditions    TEXT NOT NULL,
    actions       TEXT NOT NULL,
    enabled       INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX automations_active ON automations (workspace_id, mode, trigger_event, id) WHERE enabled = 1;

CREATE TABLE automation_runs (
    workspace_id  TEXT NOT NULL,
    mode          TEXT NOT NULL,
    id            TEXT NOT NULL,
    automation_id TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    event_type    TEXT NOT NULL,
    record_id     TEXT NOT NULL,
    matched       INTEGER NOT NULL,
    actions       TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
) WITHOUT ROWID;
CREATE INDEX automation_runs_by_rule ON automation_runs (workspace_id, mode, automation_id, id);
