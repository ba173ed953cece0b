-- Usage metering (decisions §8). One counter per tenant and billing period (keyed by the
-- period's start, ms), written by each server process's flush about once a second; and the
-- leases by which server processes reserve blocks of a capped allowance, so that together they
-- never admit more than it. A lease that is not renewed expires and its block is free again.
-- Reservations lock the counter row (SELECT ... FOR UPDATE), so they queue per tenant.

CREATE TABLE usage_counters (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    period_start BIGINT NOT NULL,
    used         BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, period_start)
);

CREATE TABLE usage_leases (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    period_start BIGINT NOT NULL,
    holder       TEXT COLLATE "C" NOT NULL,
    reserved     BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, mode, period_start, holder)
);
