use std::path::{Path, PathBuf};

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, Package};

use super::{ALLOWED, COMMON, MAX_SOURCE_LINES, UNSAFE_ALLOWED_IN};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

fn metadata() -> Metadata {
    MetadataCommand::new()
        .manifest_path(workspace_root().join("Cargo.toml"))
        .no_deps()
        .exec()
        .expect("cargo metadata")
}

fn members(metadata: &Metadata) -> Vec<&Package> {
    metadata
        .packages
        .iter()
        .filter(|p| metadata.workspace_members.contains(&p.id))
        .collect()
}

/// The Rust files below `dir`, skipping build output.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable source tree") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn every_crate_depends_only_on_what_its_layer_allows() {
    let metadata = metadata();
    let mut broken = Vec::new();
    for package in members(&metadata) {
        let Some((_, normal, dev)) = ALLOWED
            .iter()
            .find(|(name, ..)| *name == package.name.as_str())
        else {
            broken.push(format!(
                "{} has no allow-list in xtask/src/tidy.rs: say what its layer may use",
                package.name
            ));
            continue;
        };
        for dependency in &package.dependencies {
            let name = dependency.name.as_str();
            let allowed = COMMON.contains(&name)
                || normal.contains(&name)
                || (dependency.kind == DependencyKind::Development && dev.contains(&name));
            if !allowed {
                let target = dependency
                    .target
                    .as_ref()
                    .map(|t| format!(" (for {t})"))
                    .unwrap_or_default();
                broken.push(format!(
                    "{} must not depend on {name} as a {:?} dependency{target}",
                    package.name, dependency.kind
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "layering broken:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn every_allow_list_names_a_workspace_crate() {
    let metadata = metadata();
    let names: Vec<&str> = members(&metadata).iter().map(|p| p.name.as_str()).collect();
    for (name, ..) in ALLOWED {
        assert!(
            names.contains(name),
            "{name} is not a workspace crate any more"
        );
    }
}

#[test]
fn every_library_opens_with_what_it_is_for() {
    let metadata = metadata();
    let mut missing = Vec::new();
    for package in members(&metadata) {
        for target in package.targets.iter().filter(|t| t.is_lib()) {
            let text = std::fs::read_to_string(&target.src_path).expect("a readable lib.rs");
            if !text.trim_start().starts_with("//!") {
                missing.push(relative(target.src_path.as_std_path()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these libraries do not open with a `//!` paragraph saying what they are for and what \
         they must not know:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn no_module_but_the_allocator_allows_unsafe_code() {
    let root = workspace_root();
    let offenders: Vec<String> = [root.join("crates"), root.join("xtask")]
        .iter()
        .flat_map(|dir| rust_files(dir))
        .map(|path| relative(&path))
        .filter(|path| path != UNSAFE_ALLOWED_IN)
        .filter(|path| {
            std::fs::read_to_string(root.join(path))
                .is_ok_and(|text| text.contains(concat!("allow(", "unsafe_code")))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "only {UNSAFE_ALLOWED_IN} may allow unsafe code:\n  {}",
        offenders.join("\n  ")
    );
}

/// Test code is exempt: a file of cases reads best whole.
fn is_test_code(path: &str) -> bool {
    path.contains("/tests/")
        || path.ends_with("/tests.rs")
        || path.starts_with("crates/crm-store-conformance/")
}

#[test]
fn no_source_file_outside_the_tests_is_too_long() {
    let root = workspace_root();
    let long: Vec<String> = [root.join("crates"), root.join("xtask")]
        .iter()
        .flat_map(|dir| rust_files(dir))
        .filter_map(|path| {
            let name = relative(&path);
            let lines = std::fs::read_to_string(&path).ok()?.lines().count();
            (!is_test_code(&name) && lines > MAX_SOURCE_LINES)
                .then(|| format!("{name}: {lines} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these into modules of at most {MAX_SOURCE_LINES} lines:\n  {}",
        long.join("\n  ")
    );
}
