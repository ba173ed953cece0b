//! Secrets at rest (docs/operations.md, "Secrets at rest"): where the keys come from
//! (`CRM_SECRET_KEYS`, or on SQLite a key file beside the database), the check at start, and
//! `crm-server secrets rotate`.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{bail, Context, Result};
use clap::Args;
use crm_app::{
    secrets::{self, Prepared, SecretBox, SecretsFailure},
    Store,
};
use crm_secrets::Keyring;

/// The text of `CRM_SECRET_KEYS`; `Debug` never shows it.
#[derive(Clone)]
pub struct SecretKeys(String);

impl std::fmt::Debug for SecretKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKeys(<redacted>)")
    }
}

impl std::str::FromStr for SecretKeys {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(SecretKeys(s.to_owned()))
    }
}

#[derive(Args, Debug, Clone)]
pub struct SecretArgs {
    /// Keys that encrypt webhook secrets and email provider keys in the database: base64 32-byte
    /// keys separated by commas, the first encrypting, the others only decrypting (rotation).
    /// Unset on SQLite: a key generated into `<database file>.secret-key` (mode 0600) on first
    /// start. Required on Postgres.
    #[arg(long, env = "CRM_SECRET_KEYS", hide_env_values = true)]
    pub secret_keys: Option<SecretKeys>,
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Where SQLite keeps its generated key: beside the database file.
pub fn key_file(database_file: &Path) -> PathBuf {
    let mut name = database_file.as_os_str().to_owned();
    name.push(".secret-key");
    PathBuf::from(name)
}

/// The keys for the database at `database_url`: `CRM_SECRET_KEYS` when set; else, on SQLite,
/// the key file beside the database, created with a new key when missing; on Postgres, an error
/// saying how to set them.
pub fn keyring(database_url: &str, args: &SecretArgs) -> Result<Arc<Keyring>> {
    if let Some(SecretKeys(list)) = &args.secret_keys {
        let ring = Keyring::parse(list).context("CRM_SECRET_KEYS (--secret-keys)")?;
        return Ok(Arc::new(ring));
    }
    if is_postgres(database_url) {
        bail!(
            "CRM_SECRET_KEYS is not set. On Postgres, webhook secrets and email provider keys are \
             encrypted under keys the operator provides: set CRM_SECRET_KEYS (or --secret-keys) to \
             a base64 32-byte key, e.g. the output of `openssl rand -base64 32`, the same on every \
             server process, and keep it safe: without it the stored secrets cannot be read \
             (docs/operations.md, \"Secrets at rest\")"
        );
    }
    let Some(file) = crm_store_sqlite::database_file(database_url)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("reading the SQLite database URL")?
    else {
        // An in-memory database lives as long as the process, and so may its key.
        return Ok(Arc::new(Keyring::parse(&crm_secrets::generate_key())?));
    };
    let path = key_file(&file);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key_file(&path)?,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let ring = Keyring::parse(&text).with_context(|| format!("the key in {}", path.display()))?;
    Ok(Arc::new(ring))
}

/// Writes a new key into `path`, readable by this user only; fails if the file appeared
/// meanwhile (another process created it: start again to use that one).
fn create_key_file(path: &Path) -> Result<String> {
    let key = crm_secrets::generate_key();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("creating the secret key file {}", path.display()))?;
    file.write_all(format!("{key}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing the secret key file {}", path.display()))?;
    // Told on stdout, as the first start's workspace keys are: the operator's to act on, once.
    println!(
        "first start: generated the key that encrypts stored webhook secrets and email provider keys in {}; back it up (apart from the database): without it they cannot be read",
        path.display()
    );
    Ok(key)
}

fn wrong_keys(ring: &dyn SecretBox, e: secrets::SecretError) -> anyhow::Error {
    anyhow::anyhow!(
        "the configured secret keys (ids {}) cannot decrypt the secrets stored in this database: {e}. \
         Start with the keys the database was set up with (CRM_SECRET_KEYS, or on SQLite the key \
         file beside the database); while rotating, keep the old key in the list after the new one \
         (docs/operations.md, \"Secrets at rest\")",
        ring.key_ids().join(", ")
    )
}

/// Run at every start after the migrations: seals what was stored before encryption (the first
/// start with keys), then erases its plaintext from the database's free space; or proves that
/// the keys open what is stored, refusing to start otherwise.
pub async fn prepare(store: &dyn Store, ring: &Keyring) -> Result<()> {
    match secrets::prepare_secrets(store, ring).await {
        Ok(Prepared::SetUp { sealed: 0 }) => Ok(()),
        Ok(Prepared::SetUp { sealed }) => {
            store
                .scrub_freed_space()
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
                .context("erasing the plaintext secrets left in the database's free space")?;
            tracing::warn!(
                sealed,
                "encrypted webhook secrets and email provider keys that were stored in plaintext; roll them, as backups and logs of the database may hold them (docs/operations.md, \"Secrets at rest\")"
            );
            Ok(())
        }
        Ok(Prepared::Verified { key_id }) => {
            if ring.key_ids().first() != Some(&key_id) {
                tracing::info!(
                    key_id,
                    "stored secrets are checked under a key that is no longer the first; `crm-server secrets rotate` re-encrypts them under the first"
                );
            }
            Ok(())
        }
        Err(SecretsFailure::WrongKeys(e)) => Err(wrong_keys(ring, e)),
        Err(SecretsFailure::Store(e)) => {
            Err(anyhow::anyhow!("{e}")).context("checking the stored secrets")
        }
    }
}

/// `crm-server secrets rotate`: every stored secret re-encrypted under the first key.
pub async fn rotate(store: &dyn Store, ring: &Keyring) -> Result<usize> {
    let count = match secrets::rotate_secrets(store, ring).await {
        Ok(count) => count,
        Err(SecretsFailure::WrongKeys(e)) => return Err(wrong_keys(ring, e)),
        Err(SecretsFailure::Store(e)) => {
            return Err(anyhow::anyhow!("{e}")).context("re-encrypting the stored secrets")
        }
    };
    store
        .scrub_freed_space()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("erasing the old ciphertexts from the database's free space")?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_sits_beside_the_database() {
        assert_eq!(
            key_file(Path::new("/var/lib/crm/crm.db")),
            PathBuf::from("/var/lib/crm/crm.db.secret-key")
        );
    }

    #[test]
    fn postgres_without_keys_is_refused_with_how_to_set_them() {
        let err = keyring("postgres://u@h/db", &SecretArgs { secret_keys: None })
            .unwrap_err()
            .to_string();
        assert!(err.contains("CRM_SECRET_KEYS"), "{err}");
        assert!(err.contains("openssl rand -base64 32"), "{err}");
    }

    #[test]
    fn sqlite_generates_a_private_key_file_once() {
        let dir = std::env::temp_dir().join(format!("crm-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("crm.db");
        let url = format!("sqlite://{}", db.display());
        let args = SecretArgs { secret_keys: None };
        let first = keyring(&url, &args).unwrap();
        let second = keyring(&url, &args).unwrap();
        assert_eq!(first.key_ids(), second.key_ids());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_file(&db))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Keys given explicitly win over the file.
        let given = crm_secrets::generate_key();
        let explicit = keyring(
            &url,
            &SecretArgs {
                secret_keys: Some(SecretKeys(given.clone())),
            },
        )
        .unwrap();
        assert_ne!(explicit.key_ids(), first.key_ids());
        assert!(!format!("{:?}", SecretKeys(given.clone())).contains(&given));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
