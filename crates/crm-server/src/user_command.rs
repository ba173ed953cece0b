//! `crm-server user create` (decisions §21): the operator adds a user to a workspace, with a
//! password read from standard input or, without one, a one-time sign-in link printed once.

use std::io::Read;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use crm_app::{users::UserInput, App};
use crm_domain::WorkspaceId;

use crate::config::DatabaseArgs;

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user and print its id with a one-time sign-in link (or, with
    /// `--password-stdin`, set its password from standard input and print no link).
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
        /// admin, member or viewer.
        #[arg(long)]
        role: String,
        /// Read the password from standard input (its first line), so it is in no shell
        /// history or process list.
        #[arg(long)]
        password_stdin: bool,
        /// The console's address, which the sign-in link is built from.
        #[arg(long, env = "CRM_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
        public_url: String,
        /// Print one JSON line `{"user_id", "sign_in_url", "expires_at"}`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

impl UserCommand {
    pub fn db(&self) -> &DatabaseArgs {
        match self {
            UserCommand::Create { db, .. } => db,
        }
    }
}

/// The password's first line from standard input, without its line ending.
fn read_password() -> Result<String> {
    let mut raw = String::new();
    std::io::stdin()
        .read_to_string(&mut raw)
        .context("reading the password from standard input")?;
    let line = raw.lines().next().unwrap_or_default().to_owned();
    if line.is_empty() {
        bail!("--password-stdin: standard input held no password");
    }
    Ok(line)
}

pub async fn run(app: App, command: UserCommand) -> Result<()> {
    let UserCommand::Create {
        workspace,
        email,
        name,
        role,
        password_stdin,
        public_url,
        json,
        db: _,
    } = command;
    let workspace = WorkspaceId::parse(&workspace).map_err(|e| anyhow::anyhow!("{e}"))?;
    let password = password_stdin.then(read_password).transpose()?;
    let input = UserInput {
        email: Some(email),
        name: Some(name),
        role: Some(role),
    };
    let created = app
        .create_user_as_operator(&workspace, input, password.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let url = created
        .token
        .as_deref()
        .map(|t| crm_api::bodies::sign_in_url(&public_url, t));
    let expires_at = created.expires_at.map(|t| t.to_string());
    if json {
        let line = serde_json::json!({
            "user_id": created.user.id.as_str(),
            "sign_in_url": url,
            "expires_at": expires_at,
        });
        println!("{line}");
        return Ok(());
    }
    println!(
        "user {} ({}, {}) in workspace {}",
        created.user.id,
        created.user.email,
        created.user.role.as_str(),
        workspace
    );
    match (url, expires_at) {
        (Some(url), Some(at)) => {
            println!("  sign-in link (works once, until {at}): {url}");
        }
        _ => println!(
            "  password set; sign in at {}/login",
            public_url.trim_end_matches('/')
        ),
    }
    Ok(())
}
