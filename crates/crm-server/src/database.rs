//! Opening the store the configuration names, and waiting for a Postgres server that is not up
//! yet: `serve` and `migrate` started before their database (a host's boot, a container started
//! beside the database's) wait for it rather than exit.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use crm_app::{Store, StoreError};

use crate::config::DatabaseArgs;

/// The first wait before trying an unavailable database again; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(2);

/// Opens and migrates the store the URL names: `postgres://…` is Postgres, anything else SQLite.
/// Without `keys` (commands that touch no secret) reading or writing a secret fails.
pub async fn open_store(
    db: &DatabaseArgs,
    keys: Option<Arc<crm_secrets::Keyring>>,
) -> Result<Arc<dyn Store>> {
    try_open(db, &keys)
        .await
        .map_err(|(step, e)| anyhow::Error::new(e).context(step))
}

/// [`open_store`], waiting while a Postgres database cannot be reached (a warning each time).
/// Any other failure ends it, and so does an SQLite file that cannot be opened: the embedded
/// database has no server to wait for, so that is a wrong path or permission.
pub async fn open_store_waiting(
    db: &DatabaseArgs,
    keys: Option<Arc<crm_secrets::Keyring>>,
) -> Result<Arc<dyn Store>> {
    let mut wait = FIRST_WAIT;
    loop {
        match try_open(db, &keys).await {
            Ok(store) => return Ok(store),
            Err((step, StoreError::Unavailable(e))) if is_postgres(db) => {
                tracing::warn!(
                    error = %e,
                    retry_in_ms = wait.as_millis() as u64,
                    "{step}: the database is unavailable; waiting for it"
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
            }
            Err((step, e)) => return Err(anyhow::Error::new(e).context(step)),
        }
    }
}

fn is_postgres(db: &DatabaseArgs) -> bool {
    let url = db.database_url.as_str();
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

async fn try_open(
    db: &DatabaseArgs,
    keys: &Option<Arc<crm_secrets::Keyring>>,
) -> Result<Arc<dyn Store>, (&'static str, StoreError)> {
    let url = db.database_url.as_str();
    let keys: Arc<dyn crm_app::secrets::SecretBox> = match keys {
        Some(keys) => keys.clone(),
        None => Arc::new(crm_app::secrets::NoKeys),
    };
    if is_postgres(db) {
        let store =
            crm_store_postgres::PostgresStore::connect_with(url, db.database_max_connections)
                .await
                .map_err(|e| ("connecting to Postgres", e))?
                .with_secrets(keys);
        store
            .migrate()
            .await
            .map_err(|e| ("migrating Postgres", e))?;
        Ok(Arc::new(store))
    } else {
        let store = crm_store_sqlite::SqliteStore::connect(url)
            .await
            .map_err(|e| ("opening SQLite", e))?
            .with_secrets(keys);
        store.migrate().await.map_err(|e| ("migrating SQLite", e))?;
        Ok(Arc::new(store))
    }
}
