//! The architecture's dependency rules (docs/architecture.md), checked mechanically: the domain
//! crate stays pure, the application never depends on an adapter, only the store crates use
//! sqlx, only the HTTP crates use axum; the three transports (REST, MCP, A2A) stand side by side
//! on the catalog and never depend on one another.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// (crate, dependencies it must not have)
const RULES: &[(&str, &[&str])] = &[
    (
        "crm-domain",
        &[
            "tokio",
            "sqlx",
            "axum",
            "reqwest",
            "crm-app",
            "crm-api",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
        ],
    ),
    (
        "crm-app",
        &[
            "sqlx",
            "axum",
            "reqwest",
            "crm-api",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
            "crm-email",
        ],
    ),
    (
        "crm-api",
        &[
            "sqlx",
            "axum",
            "reqwest",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
    (
        "crm-http",
        &["sqlx", "crm-store-sqlite", "crm-store-postgres"],
    ),
    (
        "crm-mcp",
        &[
            "sqlx",
            "crm-http",
            "crm-a2a",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
    (
        "crm-a2a",
        &[
            "sqlx",
            "crm-http",
            "crm-mcp",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
    (
        "crm-store-sqlite",
        &["axum", "reqwest", "crm-api", "crm-http"],
    ),
    (
        "crm-store-postgres",
        &["axum", "reqwest", "crm-api", "crm-http"],
    ),
    (
        "crm-outbound",
        &[
            "sqlx",
            "axum",
            "crm-api",
            "crm-http",
            "crm-mcp",
            "crm-a2a",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
    (
        "crm-redis",
        &[
            "sqlx",
            "axum",
            "reqwest",
            "crm-api",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
        ],
    ),
    // Email providers: an adapter of crm-app's EmailSender port, beside the stores.
    (
        "crm-email",
        &[
            "sqlx",
            "axum",
            "crm-api",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
    // Secrets at rest: the SecretBox port of crm-app, cryptography only.
    (
        "crm-secrets",
        &[
            "tokio",
            "sqlx",
            "axum",
            "reqwest",
            "crm-api",
            "crm-http",
            "crm-store-sqlite",
            "crm-store-postgres",
            "crm-server",
        ],
    ),
];

/// Names under `[dependencies]` (not dev-dependencies: tests may use anything).
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim().trim_end_matches(".workspace").trim();
                if !name.is_empty() && !name.starts_with('#') {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

/// The only file that may allow unsafe code (the workspace denies it): the global allocator's
/// calls into mimalloc.
const UNSAFE_ALLOWED_IN: &str = "crates/crm-server/src/allocator.rs";

/// Rust files under `dir` that allow `unsafe_code`, besides [`UNSAFE_ALLOWED_IN`].
fn unsafe_allowed_outside(root: &Path, dir: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                if relative != UNSAFE_ALLOWED_IN && text.contains(concat!("allow(", "unsafe_code"))
                {
                    found.push(format!(
                        "{relative} allows unsafe code (only {UNSAFE_ALLOWED_IN} may)"
                    ));
                }
            }
        }
    }
    Ok(found)
}

pub fn check(root: &Path) -> Result<()> {
    let mut broken = Vec::new();
    for (krate, banned) in RULES {
        let path = root.join("crates").join(krate).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for dep in normal_dependencies(&manifest) {
            if banned.contains(&dep.as_str()) {
                broken.push(format!("{krate} must not depend on {dep}"));
            }
        }
    }
    broken.extend(unsafe_allowed_outside(root, &root.join("crates"))?);
    broken.extend(unsafe_allowed_outside(root, &root.join("xtask"))?);
    if !broken.is_empty() {
        bail!("architecture rules broken:\n  {}", broken.join("\n  "));
    }
    eprintln!("xtask: tidy: dependency rules hold; no unsafe code outside the allocator");
    Ok(())
}
