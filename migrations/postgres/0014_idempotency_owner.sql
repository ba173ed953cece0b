-- The process that holds an idempotency claim (decisions §9, "Idempotency, corrected"): each
-- server process holds a session-level advisory lock on (a fixed class, its owner id) for as long
-- as it runs, and writes that id beside every claim. A claim whose owner's lock no session holds
-- belongs to a process that is gone, and is taken over at once instead of after its lease.
-- NULL (claims written before this column): the lease alone decides.
ALTER TABLE idempotency_keys ADD COLUMN owner BIGINT;
