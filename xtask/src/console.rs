//! The web console (`/`, server-rendered HTML) driven by a real headless Chromium through
//! Selenium (`tests/console`). Chromium and its chromedriver are Debian's (`/usr/bin/chromium`,
//! `/usr/bin/chromedriver`), installed with apt-get when missing; a virtualenv at
//! `target/venv-console` holds the pinned `tests/console/requirements.txt`. `crm-server` is
//! started on a fresh SQLite database and on a fresh Postgres database, each with a new
//! workspace and three users (admin, member, viewer) with known passwords, and pytest runs once
//! against each. The SQLite run also writes the console's screenshots to `docs/console/`.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use crate::{
    agents::{create_workspace, server_binary, venv_with, Database, Server},
    postgres::Postgres,
    run, target_dir,
};

const REQUIREMENTS: &str = "tests/console/requirements.txt";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's packages of the two binaries above.
const PACKAGES: [&str; 2] = ["chromium", "chromium-driver"];
const ROLES: [&str; 3] = ["admin", "member", "viewer"];

pub fn test(root: &Path, pg: &Postgres) -> Result<()> {
    let (chromium, chromedriver) = browser()?;
    let python = venv_with(root, "venv-console", REQUIREMENTS)?;
    let bin = server_binary(root)?;
    let failures = target_dir(root).join("console-failures");
    let _ = std::fs::remove_dir_all(&failures);
    let mut failed = Vec::new();
    for store in ["sqlite", "postgres"] {
        eprintln!(
            "xtask: console: the web console in headless Chromium against crm-server on {store}"
        );
        let database = Database::fresh(root, "console", store, pg)?;
        let run = Run {
            root,
            python: &python,
            bin: &bin,
            store,
            database_url: &database.url,
            chromium: &chromium,
            chromedriver: &chromedriver,
            failures: &failures.join(store),
        };
        let passed = run.suite()?;
        drop(database);
        if !passed {
            failed.push(store);
        }
    }
    if !failed.is_empty() {
        bail!(
            "the console suite (tests/console) failed on {} (screenshots and page sources of the failures in {})",
            failed.join(" and "),
            failures.display()
        );
    }
    Ok(())
}

/// Chromium and chromedriver: Debian's, installed with apt-get when either is missing.
fn browser() -> Result<(PathBuf, PathBuf)> {
    let found = || Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !found() {
        eprintln!("xtask: console: {CHROMIUM} or {CHROMEDRIVER} is missing; installing Debian's {} with apt-get", PACKAGES.join(" and "));
        let installed = apt_install();
        if let Err(e) = &installed {
            eprintln!("xtask: console: {e:#}");
        }
        if installed.is_err() || !found() {
            bail!(
                "the console suite needs Chromium at {CHROMIUM} and chromedriver at {CHROMEDRIVER}, and \
                 installing them failed: as root, `apt-get update && apt-get install -y {}` (Debian), \
                 then run it again",
                PACKAGES.join(" ")
            );
        }
    }
    Ok((PathBuf::from(CHROMIUM), PathBuf::from(CHROMEDRIVER)))
}

/// `apt-get install -y chromium chromium-driver`, and when that fails (no package lists yet),
/// `apt-get update` and the install again. As root, else through sudo when there is one.
fn apt_install() -> Result<()> {
    let apt_get = || -> Result<Command> {
        if rustix::process::geteuid().is_root() {
            Ok(Command::new("apt-get"))
        } else if crate::has_command("sudo", "--version") {
            let mut c = Command::new("sudo");
            c.arg("apt-get");
            Ok(c)
        } else {
            bail!("not root and no sudo: cannot run apt-get")
        }
    };
    let install = || -> Result<()> {
        run(apt_get()?
            .args(["install", "-y"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_ok() {
        return Ok(());
    }
    run(apt_get()?.arg("update")).context("apt-get update")?;
    install()
}

/// One pytest run of the console suite, against one store.
struct Run<'a> {
    root: &'a Path,
    python: &'a Path,
    bin: &'a Path,
    store: &'a str,
    database_url: &'a str,
    chromium: &'a Path,
    chromedriver: &'a Path,
    failures: &'a Path,
}

impl Run<'_> {
    /// Creates a workspace and its users, starts the server and runs pytest; whether every test
    /// passed.
    fn suite(&self) -> Result<bool> {
        let created = create_workspace(self.bin, "console", self.database_url)?;
        let field = |name: &str| {
            created[name]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("no `{name}` in {created}"))
        };
        let (workspace, test_key) = (field("workspace_id")?, field("test_key")?);
        let mut users = Vec::new();
        for role in ROLES {
            let (email, password) = (format!("{role}@console.test"), password(role));
            self.create_user(&workspace, role, &email, &password)?;
            users.push((role, email, password));
        }
        let server = Server::start(self.bin, self.database_url)?;
        let mut pytest = Command::new(self.python);
        pytest
            .args([
                "-m",
                "pytest",
                "tests/console",
                "-p",
                "no:cacheprovider",
                "-rs",
            ])
            .current_dir(self.root)
            .env("CRM_CONSOLE_URL", &server.base_url)
            .env("CRM_API_URL", format!("{}/v1", server.base_url))
            .env("CRM_API_KEY", test_key)
            .env("CRM_STORE", self.store)
            .env("CHROMIUM", self.chromium)
            .env("CHROMEDRIVER", self.chromedriver)
            .env("CRM_CONSOLE_FAILURES", self.failures)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("CRM_SCREENSHOTS");
        for (role, email, password) in &users {
            let role = role.to_uppercase();
            pytest
                .env(format!("CRM_{role}_EMAIL"), email)
                .env(format!("CRM_{role}_PASSWORD"), password);
        }
        // One store is enough for the documentation's screenshots.
        if self.store == "sqlite" {
            pytest.env("CRM_SCREENSHOTS", self.root.join("docs").join("console"));
        }
        let status = pytest.status().context("running pytest")?;
        drop(server);
        Ok(status.success())
    }

    /// `crm-server user create ... --password-stdin`.
    fn create_user(&self, workspace: &str, role: &str, email: &str, password: &str) -> Result<()> {
        let mut child = Command::new(self.bin)
            .args(["user", "create", "--workspace", workspace, "--email", email])
            .args(["--name", &format!("Console {role}"), "--role", role])
            .args(["--password-stdin", "--database-url", self.database_url])
            .env("CRM_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running crm-server user create")?;
        if let Some(mut stdin) = child.stdin.take() {
            writeln!(stdin, "{password}")
                .context("writing the password to crm-server user create")?;
        }
        let out = child
            .wait_with_output()
            .context("running crm-server user create")?;
        if !out.status.success() {
            bail!(
                "crm-server user create ({role} {email}) failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

/// The known password of the console user with `role`.
fn password(role: &str) -> String {
    format!("console-{role}-pw-1")
}
