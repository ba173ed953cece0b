-- A counter every transaction that changes a workspace's configuration (API keys, plan and
-- settings, registry, automations, sequences) bumps at commit. A server caches that
-- configuration and polls this row to learn of changes other processes on the same file (the
-- CLI) made; its own changes it knows at commit. Postgres uses NOTIFY instead.
CREATE TABLE config_epoch (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO config_epoch (id, seq) VALUES (1, 0);
