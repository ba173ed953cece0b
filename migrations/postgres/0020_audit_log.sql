-- The audit log (decisions §25): one row per change to configuration and access, written in the
-- transaction of the change. `body` holds the entry but for its keys (crm-store-sql
-- `stored::audit`); `action`, `target_id` and `actor_id` are columns for the list's filters,
-- `at` for the 400-day retention. Retention settings of history and emails (null: forever).
CREATE TABLE audit_entries (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    at           BIGINT NOT NULL,
    action       TEXT NOT NULL,
    target_id    TEXT COLLATE "C" NOT NULL,
    actor_id     TEXT COLLATE "C",
    body         JSONB NOT NULL,
    PRIMARY KEY (workspace_id, mode, id)
);
CREATE INDEX audit_entries_action ON audit_entries (workspace_id, mode, action, id);
CREATE INDEX audit_entries_target ON audit_entries (workspace_id, mode, target_id, id);
CREATE INDEX audit_entries_actor ON audit_entries (workspace_id, mode, actor_id, id) WHERE actor_id IS NOT NULL;
CREATE INDEX audit_entries_at ON audit_entries (at);

ALTER TABLE workspaces ADD COLUMN history_retention_days BIGINT;
ALTER TABLE workspaces ADD COLUMN email_retention_days BIGINT;
