//! The use cases of `crm-app`, each run against the SQLite store on a file of its own and fakes
//! of the process's infrastructure (no cache, an in-memory meter, a rate limiter that admits
//! everything unless a test says otherwise). One binary, one module per area.

mod support;

mod admission;
mod batch;
mod create_groups;
mod dry_run;
mod idempotency;
mod keys;
mod mail;
mod owners;
mod pipelines;
mod records;
mod registry;
mod rules;
mod search;
mod sessions;
mod webhooks;
mod workspaces;
