//! The operation catalog and everything the transports share.
//!
//! Each operation is declared once ([`operation::Operation`]: name, method and path, input and
//! output schemas, scope, idempotency, description and handler) and listed in [`catalog`]. [`Api::call`] is the one way a
//! transport runs one: it authenticates the caller, admits the call, has the transport read the
//! input, and applies scopes and `Idempotency-Key` the same way whichever transport (REST, MCP,
//! A2A) received it, turning every error into a [`problem::Problem`]. This crate knows JSON and
//! the wire DTOs; it does not know axum, HTTP servers, MCP or A2A framing, or SQL.

pub mod agent;
mod alias;
mod api;
pub mod bodies;
pub mod body;
mod call;
pub mod catalog;
mod dry_run;
mod idempotency;
pub mod openapi;
pub mod operation;
pub mod ops;
mod output;
pub mod problem;
mod query;
mod rate;
mod reply_body;
pub mod schema;
mod sign_in;
pub mod strict_json;
pub mod view;

pub use api::Api;
pub use call::{Answer, Credentials, ReadRequest, Request};
pub use catalog::catalog;
pub use operation::{FileReply, Input, Method, Operation, Reply, ReplyBody, StaticBody};
pub use problem::{ErrorCode, Problem};
pub use rate::{rate_limit_headers, RateSlot};

/// The version of the interface description this service implements.
pub const SPEC_VERSION: &str = "0.14.0";
