//! Black-box tests: the real `crm-server` binary, on SQLite and on Postgres, driven over HTTP.

mod support;

mod activities;
mod agents;
mod auth;
mod automations;
mod batch;
mod caching;
mod companies;
mod contacts;
mod create_groups;
mod deals;
mod edge;
mod email;
mod email_delivery;
mod errors;
mod history;
mod idempotency;
mod keys;
mod limits;
mod pipelines;
mod plans;
mod platform;
mod reading;
mod readme;
mod registry;
mod schema;
mod search;
mod secrets;
mod sequences;
mod stage_aliases;
mod strict_input;
mod unavailable;
mod upserts;
mod webhook_kill;
mod webhooks;
