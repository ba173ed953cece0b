//! Sealed secrets in the row layer (`SecretRepo`): the raw access `crm_app::secrets` needs to
//! seal and re-seal them all. Scrubbing what rewritten rows leave behind is each store's own.

use crm_app::{
    ports::RowLock,
    secrets::{StoredSecret, CONNECTIONS, WEBHOOKS},
    StoreError,
};

use crate::{rows::tenant_of, sql::Col, Arg, Unit};

/// (table, column) of every stored secret.
const SECRET_COLUMNS: [(&str, &str); 2] = [(WEBHOOKS, "secret"), (CONNECTIONS, "api_key")];

pub async fn secret_check<U: Unit>(tx: &mut U) -> Result<Option<String>, StoreError> {
    let q = sqlx::query::<U::Db>("SELECT value FROM secret_check WHERE id = 1");
    tx.optional(q, |r| r.col("value")).await
}

/// A concurrent claimer's uncommitted row makes this insert wait for its commit.
pub async fn claim_secret_check<U: Unit>(tx: &mut U, sealed: &str) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>(
        "INSERT INTO secret_check (id, value) VALUES (1, $1) ON CONFLICT DO NOTHING",
    )
    .arg(sealed);
    Ok(tx.execute(q).await? == 1)
}

pub async fn set_secret_check<U: Unit>(tx: &mut U, sealed: &str) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>("UPDATE secret_check SET value = $1 WHERE id = 1").arg(sealed);
    tx.execute(q).await?;
    Ok(())
}

/// Every stored secret, locked where the backend locks rows, since each is about to be
/// replaced.
pub async fn stored_secrets<U: Unit>(tx: &mut U) -> Result<Vec<StoredSecret>, StoreError> {
    let mut all = Vec::new();
    for (table, column) in SECRET_COLUMNS {
        let sql = format!(
            "SELECT workspace_id, mode, id, {column} AS value FROM {table} ORDER BY workspace_id, mode, id{}",
            tx.locking(RowLock::Update)
        );
        let found = tx
            .all(sqlx::query::<U::Db>(&sql), |r| {
                Ok(StoredSecret {
                    table,
                    tenant: tenant_of(r)?,
                    id: r.col("id")?,
                    value: r.col("value")?,
                })
            })
            .await?;
        all.extend(found);
    }
    Ok(all)
}

pub async fn replace_stored_secret<U: Unit>(
    tx: &mut U,
    secret: &StoredSecret,
) -> Result<(), StoreError> {
    let (table, column) = SECRET_COLUMNS
        .into_iter()
        .find(|(t, _)| *t == secret.table)
        .ok_or_else(|| StoreError::Backend(format!("no secrets in {}", secret.table).into()))?;
    let sql = format!(
        "UPDATE {table} SET {column} = $1 WHERE workspace_id = $2 AND mode = $3 AND id = $4"
    );
    let q = sqlx::query::<U::Db>(&sql)
        .arg(secret.value.as_str())
        .arg(secret.tenant.workspace_id.as_str())
        .arg(secret.tenant.mode.as_str())
        .arg(secret.id.as_str());
    tx.execute(q).await?;
    Ok(())
}

/// `impl SecretRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_secret_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::SecretRepo, $tx, secrets, [
            fn secret_check() -> Result<Option<String>, $crate::reexport::StoreError>;
            fn claim_secret_check(sealed: &str) -> Result<bool, $crate::reexport::StoreError>;
            fn set_secret_check(sealed: &str) -> Result<(), $crate::reexport::StoreError>;
            fn stored_secrets() -> Result<Vec<$crate::reexport::StoredSecret>, $crate::reexport::StoreError>;
            fn replace_stored_secret(secret: &$crate::reexport::StoredSecret) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
