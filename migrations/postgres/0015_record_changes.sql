-- Field history (decisions §18, §24): one row per change of a contact, company or deal, written
-- in the transaction (on the plain create path, the statement) of the write that made it. The
-- row outlives the record's soft delete; `body` holds the entry but for its keys (crm-domain
-- `history::Change::stored_body`). Keyed for the one read: a record's entries, newest first.
CREATE TABLE record_changes (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    record_id    TEXT COLLATE "C" NOT NULL,
    id           TEXT COLLATE "C" NOT NULL,
    object       TEXT NOT NULL,
    body         JSONB NOT NULL,
    PRIMARY KEY (workspace_id, mode, record_id, id)
);
