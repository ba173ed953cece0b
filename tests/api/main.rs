//! Black-box tests: the real `crm-server` binary, on SQLite and on Postgres, driven over HTTP.

mod support;

mod auth;
mod companies;
mod contacts;
mod errors;
mod idempotency;
mod keys;
mod limits;
mod platform;
mod plans;
