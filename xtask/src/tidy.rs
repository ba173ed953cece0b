//! The architecture's rules (docs/architecture.md), checked as plain tests over `cargo metadata`
//! and the source tree, so `cargo xtask test` (and any `cargo test -p xtask`) enforces them:
//!
//! - each workspace crate depends only on what its layer's allow-list names, for every kind of
//!   dependency (normal, build and dev) and every target platform;
//! - every library opens with a `//!` paragraph saying what it is for and what it must not know;
//! - no module allows unsafe code but the server's allocator;
//! - no source file outside the tests grows past [`MAX_SOURCE_LINES`] lines.
//!
//! An allow-list rather than a deny-list: a new dependency is a decision about the layer, so it
//! is written down here, beside the others of its layer, rather than slipping in unnoticed.

#[cfg(test)]
mod tests;

/// The crates every library of ours may use: plain data helpers with no I/O.
#[cfg(test)]
const COMMON: &[&str] = &["base64", "hex", "serde_json", "sha2", "thiserror", "uuid"];

/// What each workspace crate may depend on besides [`COMMON`]: (crate, normal and build
/// dependencies, dev-dependencies). Dev-dependencies may also use everything the crate itself
/// may.
#[cfg(test)]
const ALLOWED: &[(&str, &[&str], &[&str])] = &[
    // Pure rules: no runtime, no I/O, no adapter. serde_json for custom-field values
    // (docs/decisions.md).
    (
        "crm-domain",
        &["hmac", "idna", "time", "unicode-normalization", "url"],
        &["proptest"],
    ),
    // Use cases and their ports: the domain and async traits, no runtime (background work and
    // waiting go through the `Background` port). Caches, metering, limiting and write grouping
    // are crm-runtime's. Tests run on tokio.
    (
        "crm-app",
        &[
            "crm-domain",
            "argon2",
            "async-trait",
            "csv",
            "csv-core",
            // An export reads its next page while it writes the current one (`future::join`,
            // no runtime).
            "futures",
            "rand",
            // The key cache's keyed hash (docs/decisions.md): a pure function, like sha2.
            "siphasher",
            "tracing",
        ],
        &["mockall", "crm-store-sqlite", "tokio"],
    ),
    // The in-process infrastructure behind crm-app's ports.
    (
        "crm-runtime",
        &[
            "crm-app",
            "crm-domain",
            "async-trait",
            "foldhash",
            "governor",
            "rustix",
            "tokio",
            "tracing",
        ],
        &[],
    ),
    // The operation catalog: JSON, schemas, no transport and no store.
    (
        "crm-api",
        &[
            "crm-app",
            "crm-domain",
            "futures",
            "schemars",
            "serde",
            "serde_path_to_error",
            "tracing",
        ],
        &["proptest", "tokio"],
    ),
    // The transports: HTTP only here; none depends on another.
    (
        "crm-http",
        &[
            "crm-api",
            "crm-app",
            "crm-domain",
            "axum",
            "bytes",
            "foldhash",
            "form_urlencoded",
            "http",
            "http-body",
            "http-body-util",
            "hyper",
            "hyper-util",
            "itoa",
            "matchit",
            "percent-encoding",
            "pin-project-lite",
            "tokio",
            "tower",
            "tracing",
        ],
        // Tests read a streamed body (crm-api's `BodyStream`) as a stream.
        &["futures"],
    ),
    (
        "crm-mcp",
        &[
            "crm-api",
            "crm-app",
            "axum",
            "http",
            "http-body-util",
            "rmcp",
            "tracing",
        ],
        &[],
    ),
    (
        "crm-a2a",
        &["crm-api", "crm-app", "crm-domain", "axum", "http-body-util"],
        &[],
    ),
    // Pages for people: templates checked at compile time, forms read by form_urlencoded.
    (
        "crm-console",
        &[
            "crm-api",
            "crm-app",
            "crm-domain",
            "askama",
            "axum",
            "form_urlencoded",
            "percent-encoding",
            "serde",
            "tracing",
        ],
        &["tokio"],
    ),
    // Adapters of crm-app's ports: each knows its own library and nothing of the transports.
    // What both stores share, generic over the sqlx backend.
    (
        "crm-store-sql",
        &["crm-app", "crm-domain", "async-trait", "sqlx"],
        &["tokio"],
    ),
    (
        "crm-store-sqlite",
        &[
            "crm-app",
            "crm-domain",
            "crm-store-sql",
            "async-trait",
            "sqlx",
            "tokio",
            "tracing",
        ],
        &["crm-store-conformance"],
    ),
    (
        "crm-store-postgres",
        &[
            "crm-app",
            "crm-domain",
            "crm-store-sql",
            "async-trait",
            "deadpool",
            "sqlx",
            "tokio",
            "tracing",
        ],
        &["crm-store-conformance"],
    ),
    (
        "crm-store-conformance",
        &["crm-app", "crm-domain", "crm-secrets", "tokio"],
        &[],
    ),
    (
        "crm-outbound",
        &[
            "crm-app",
            "crm-domain",
            "async-trait",
            "reqwest",
            "tokio",
            "tracing",
        ],
        &[],
    ),
    (
        "crm-email",
        &[
            "crm-app",
            "crm-domain",
            "async-trait",
            "lettre",
            "reqwest",
            "tracing",
        ],
        &[],
    ),
    (
        "crm-redis",
        &[
            "crm-app",
            "crm-domain",
            "crm-runtime",
            "async-trait",
            "redis",
            "tokio",
            "tracing",
        ],
        &[],
    ),
    ("crm-secrets", &["crm-app", "chacha20poly1305", "rand"], &[]),
    // The binary wires everything; its dev-dependencies drive the black-box suite.
    (
        "crm-server",
        &[
            "crm-a2a",
            "crm-api",
            "crm-app",
            "crm-console",
            "crm-domain",
            "crm-email",
            "crm-http",
            "crm-mcp",
            "crm-outbound",
            "crm-redis",
            "crm-runtime",
            "crm-secrets",
            "crm-store-postgres",
            "crm-store-sqlite",
            "anyhow",
            "axum",
            "clap",
            "indicatif",
            "libmimalloc-sys",
            "libsqlite3-sys",
            "rustix",
            "tokio",
            "tower",
            "tracing",
            "tracing-appender",
            "tracing-subscriber",
        ],
        &[
            "crm-store-conformance",
            "futures",
            "hmac",
            "reqwest",
            "sqlx",
        ],
    ),
    // Automation: the bench's load generator, its hello-world ceiling and raw SQL loops need
    // axum and sqlx (deny.toml lists xtask as their wrapper too).
    (
        "xtask",
        &[
            "anyhow", "axum", "httparse", "rand", "rustix", "sqlx", "tokio",
        ],
        &["cargo_metadata"],
    ),
];

/// Longest a source file outside the tests may be: past it, a file holds more than one idea.
#[cfg(test)]
const MAX_SOURCE_LINES: usize = 800;

/// The only file that may allow unsafe code (the workspace denies it): the global allocator's
/// calls into mimalloc.
#[cfg(test)]
const UNSAFE_ALLOWED_IN: &str = "crates/crm-server/src/allocator.rs";
