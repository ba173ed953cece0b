-- The dedupe keys a dry-run import has seen (decisions §20, §24): a dry run writes nothing, so a
-- row duplicating a row of an earlier chunk is found here, not among the records. One row per
-- normalised email (contacts) or domain (companies) a dry run would have created; dropped with
-- the import's chunks when it ends or is cancelled.
CREATE TABLE import_keys (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    import_id    TEXT NOT NULL,
    key          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (workspace_id, mode, import_id, key)
);
