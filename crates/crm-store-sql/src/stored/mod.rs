//! The storage encodings of the domain values a row keeps as JSON text: rules (conditions,
//! actions, run outcomes), sequences (trigger, exit conditions, steps), pipeline stages, an
//! email's source and the outbox event. crm-domain builds no JSON of its own; what a column
//! holds is decided here, once for both stores, and read back here.
//!
//! Each value was validated when it was written, so a decoder answers `None` only for a row that
//! is corrupt, never for a client's mistake.

pub mod audit;
pub mod event;
pub mod history;
pub mod import;
pub mod mail;
pub mod rule;
pub mod sequence;
pub mod stage;

#[cfg(test)]
mod tests;
