-- The process that holds an idempotency claim (decisions §9, "Idempotency, corrected"): each
-- process that opens the file holds an exclusive lock on a file of its own beside the database,
-- named after its owner id, for as long as it runs, and writes that id beside every claim. A claim
-- whose owner's file nobody holds locked belongs to a process that is gone, and is taken over at
-- once instead of after its lease. NULL (claims written before this column): the lease decides.
ALTER TABLE idempotency_keys ADD COLUMN owner INTEGER;
