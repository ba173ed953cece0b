//! What routing found for an operation's request, handed from [`crate::dispatch`] (which
//! matches the routes) to [`crate::rest`] (which serves the request).

use std::collections::BTreeMap;

use crm_api::{catalog::Alias, Operation};

/// An operation route's handler: the operation, and the alias it was reached by, if any.
#[derive(Clone, Copy)]
pub(crate) struct Target {
    pub op: &'static Operation,
    pub alias: Option<&'static Alias>,
}

/// The path parameters, percent-decoded; `Err` when one is not UTF-8 once decoded (the request
/// is then refused after authentication and admission, like any other malformed input).
pub(crate) type PathParams = Result<BTreeMap<String, String>, ()>;
