//! Black-box tests: the real `crm-server` binary, on SQLite and on Postgres, driven over HTTP.

mod support;

mod agents;
mod auth;
mod companies;
mod contacts;
mod errors;
mod idempotency;
mod platform;
