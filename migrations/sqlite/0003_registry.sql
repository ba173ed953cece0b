-- Registry: custom object types (a schema grouping only; spec, "Custom object type").
-- Custom fields and enum groups live in 0001's tables.

CREATE TABLE object_types (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    key          TEXT NOT NULL,
    label        TEXT,
    created_at   INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, mode, key)
) WITHOUT ROWID;
