//! Secrets at rest (decisions §22, §24): webhook signing secrets and email provider keys are kept
//! sealed by an AEAD. This module is the port ([`SecretBox`], implemented by `crm-secrets` with a
//! well-kept AEAD crate; this crate knows no cryptography), the slot a sealed value is bound to
//! ([`SecretSlot`]: workspace, mode, table, id, so a value copied into another row does not open),
//! and the two operator steps over every stored secret, written once for both stores against the
//! [`SecretRepo`] port: [`prepare_secrets`] (first start: seal what is still plaintext and store
//! the check value; later starts: prove the configured keys open the check value) and
//! [`rotate_secrets`] (re-seal everything under the key that seals now).
//!
//! The stores seal and open in their row layer, with the box they were built with: everything
//! above them (use cases, domain records) sees plaintext, and the database sees only sealed text.

use crm_domain::Tenant;

pub use crate::ports::{SecretRepo, StoredSecret};
use crate::ports::{Store, StoreError};

/// The table of webhooks, whose `secret` is sealed.
pub const WEBHOOKS: &str = "webhooks";
/// The table of email connections, whose `api_key` is sealed.
pub const CONNECTIONS: &str = "connections";
/// The slot of the check value (one row, no tenant).
const CHECK_TABLE: &str = "secret_check";
/// What the check value seals: any fixed text will do, the point is that it opens.
const CHECK_PLAINTEXT: &str = "crm secret check v1";

/// The row a sealed value belongs to; part of the AEAD's associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretSlot<'a> {
    pub workspace: &'a str,
    pub mode: &'a str,
    pub table: &'a str,
    pub id: &'a str,
}

impl<'a> SecretSlot<'a> {
    pub fn new(tenant: &'a Tenant, table: &'a str, id: &'a str) -> SecretSlot<'a> {
        SecretSlot {
            workspace: tenant.workspace_id.as_str(),
            mode: tenant.mode.as_str(),
            table,
            id,
        }
    }

    fn check() -> SecretSlot<'static> {
        SecretSlot {
            workspace: "",
            mode: "",
            table: CHECK_TABLE,
            id: "1",
        }
    }
}

/// Why a secret could not be sealed or opened. Never carries key material or plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The store was built without keys (a command that does not touch secrets).
    #[error("no secret keys are configured (CRM_SECRET_KEYS)")]
    NoKeys,
    /// The value names a key that is not configured.
    #[error("the value is sealed under key {0}, which is not among the configured keys")]
    UnknownKey(String),
    /// The value is not in the sealed format.
    #[error("the stored value is not a sealed secret")]
    Malformed,
    /// Authentication failed: the value was altered, or belongs to another row.
    #[error("the stored value does not open under key {0} for its row")]
    Forged(String),
}

impl SecretError {
    /// As the stores' row layer reports it (not a `From`: a second `From` into `StoreError`
    /// would leave `?` in closures of the stores without one type to convert from).
    pub fn into_store(self) -> StoreError {
        StoreError::Backend(Box::new(self))
    }
}

/// `plaintext` sealed for row `id` of `table`, as the stores' row layer writes it.
pub fn seal_row(
    secrets: &std::sync::Arc<dyn SecretBox>,
    tenant: &Tenant,
    table: &str,
    id: &str,
    plaintext: &str,
) -> Result<String, StoreError> {
    secrets
        .seal(&SecretSlot::new(tenant, table, id), plaintext)
        .map_err(SecretError::into_store)
}

/// The plaintext of `sealed`, stored in row `id` of `table`, as the stores' row layer reads it.
pub fn open_row(
    secrets: &std::sync::Arc<dyn SecretBox>,
    tenant: &Tenant,
    table: &str,
    id: &str,
    sealed: &str,
) -> Result<String, StoreError> {
    secrets
        .open(&SecretSlot::new(tenant, table, id), sealed)
        .map_err(SecretError::into_store)
}

/// Seals and opens secrets. Implementations keep their keys out of `Debug`.
pub trait SecretBox: Send + Sync + std::fmt::Debug {
    /// `plaintext` sealed under the key that seals now, bound to `slot`.
    fn seal(&self, slot: &SecretSlot<'_>, plaintext: &str) -> Result<String, SecretError>;
    /// The plaintext of `sealed`, opened with whichever configured key it names.
    fn open(&self, slot: &SecretSlot<'_>, sealed: &str) -> Result<String, SecretError>;
    /// The ids of every configured key, the sealing key first (not secret: short digests).
    fn key_ids(&self) -> Vec<String>;
    /// The id of the key `sealed` names, if it is in the sealed format.
    fn key_id_of(&self, sealed: &str) -> Option<String>;
}

/// The box of a store built without keys: it seals and opens nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoKeys;

impl SecretBox for NoKeys {
    fn seal(&self, _: &SecretSlot<'_>, _: &str) -> Result<String, SecretError> {
        Err(SecretError::NoKeys)
    }
    fn open(&self, _: &SecretSlot<'_>, _: &str) -> Result<String, SecretError> {
        Err(SecretError::NoKeys)
    }
    fn key_ids(&self) -> Vec<String> {
        Vec::new()
    }
    fn key_id_of(&self, _: &str) -> Option<String> {
        None
    }
}

/// What [`prepare_secrets`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// The first start with keys: `sealed` plaintext secrets were sealed and the check value
    /// stored. Their plaintext may linger in the database's free space and log.
    SetUp { sealed: usize },
    /// The check value opened under key `key_id`.
    Verified { key_id: String },
}

/// Why the stored secrets cannot be used with the configured keys, or the store failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsFailure {
    #[error("the configured secret keys cannot open the stored secrets: {0}")]
    WrongKeys(SecretError),
    #[error(transparent)]
    Store(StoreError),
}

impl From<SecretError> for SecretsFailure {
    fn from(e: SecretError) -> SecretsFailure {
        SecretsFailure::WrongKeys(e)
    }
}

/// `StoreError` into [`SecretsFailure`] (not a `From`: a second `From<StoreError>` impl would
/// leave `?` in the stores without one type to convert to).
fn failed(e: StoreError) -> SecretsFailure {
    SecretsFailure::Store(e)
}

/// On the first start with keys (no check value yet), seals every stored secret (all plaintext
/// then) and stores the check value, in one transaction; on later starts, opens the check value,
/// so that a server with the wrong keys refuses to start rather than fail at each delivery.
pub async fn prepare_secrets(
    store: &dyn Store,
    secrets: &dyn SecretBox,
) -> Result<Prepared, SecretsFailure> {
    let check = secrets.seal(&SecretSlot::check(), CHECK_PLAINTEXT)?;
    let mut tx = store.begin_write().await.map_err(failed)?;
    if tx.claim_secret_check(&check).await.map_err(failed)? {
        let rows = tx.stored_secrets().await.map_err(failed)?;
        for mut row in rows.iter().cloned() {
            row.value = secrets.seal(
                &SecretSlot::new(&row.tenant, row.table, &row.id),
                &row.value,
            )?;
            tx.replace_stored_secret(&row).await.map_err(failed)?;
        }
        tx.commit().await.map_err(failed)?;
        return Ok(Prepared::SetUp { sealed: rows.len() });
    }
    let stored = tx.secret_check().await.map_err(failed)?.ok_or_else(|| {
        failed(StoreError::Backend(
            "the secret check value vanished".into(),
        ))
    })?;
    drop(tx);
    verify_check(secrets, &stored)?;
    Ok(Prepared::Verified {
        key_id: secrets.key_id_of(&stored).unwrap_or_default(),
    })
}

fn verify_check(secrets: &dyn SecretBox, stored: &str) -> Result<(), SecretError> {
    match secrets.open(&SecretSlot::check(), stored)? {
        p if p == CHECK_PLAINTEXT => Ok(()),
        _ => Err(SecretError::Malformed),
    }
}

/// Re-seals every stored secret and the check value under the key that seals now, in one
/// transaction; each opens with whichever configured key it names. Returns how many secrets
/// were re-sealed. Refuses (changing nothing) when any stored value does not open.
pub async fn rotate_secrets(
    store: &dyn Store,
    secrets: &dyn SecretBox,
) -> Result<usize, SecretsFailure> {
    let mut tx = store.begin_write().await.map_err(failed)?;
    let stored = tx.secret_check().await.map_err(failed)?.ok_or_else(|| {
        failed(StoreError::Backend(
            "no secret check value is stored: run `crm-server serve` or `migrate` once with keys first"
                .into(),
        ))
    })?;
    verify_check(secrets, &stored)?;
    let rows = tx.stored_secrets().await.map_err(failed)?;
    for mut row in rows.iter().cloned() {
        let slot = SecretSlot::new(&row.tenant, row.table, &row.id);
        let plaintext = secrets.open(&slot, &row.value)?;
        row.value = secrets.seal(&slot, &plaintext)?;
        tx.replace_stored_secret(&row).await.map_err(failed)?;
    }
    tx.set_secret_check(&secrets.seal(&SecretSlot::check(), CHECK_PLAINTEXT)?)
        .await
        .map_err(failed)?;
    tx.commit().await.map_err(failed)?;
    Ok(rows.len())
}
