//! Console sessions and failed sign-ins (`SessionRepo`): the same statements on both backends.

use crm_app::{ports::Session, StoreError};
use crm_domain::{Mode, Timestamp, UserId, WorkspaceId};
use sqlx::Row;

use crate::{
    rows::{mode, ts},
    sql::Col,
    Arg, Sql, Unit,
};

const SESSION_COLUMNS: &str =
    "id_hash, user_id, workspace_id, mode, csrf_token, created_at, last_seen_at";

fn session<R: Row>(row: &R) -> Result<Session, StoreError>
where
    R::Database: Sql,
{
    Ok(Session {
        id_hash: row.col("id_hash")?,
        user_id: UserId::from_trusted(row.col("user_id")?),
        workspace_id: WorkspaceId::from_trusted(row.col("workspace_id")?),
        mode: mode(row, "mode")?,
        csrf_token: row.col("csrf_token")?,
        created_at: ts(row, "created_at")?,
        last_seen_at: ts(row, "last_seen_at")?,
    })
}

pub async fn insert_session<U: Unit>(tx: &mut U, s: &Session) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>(
        "INSERT INTO sessions (id_hash, user_id, workspace_id, mode, csrf_token, created_at, last_seen_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .arg(s.id_hash.as_str())
    .arg(s.user_id.as_str())
    .arg(s.workspace_id.as_str())
    .arg(s.mode.as_str())
    .arg(s.csrf_token.as_str())
    .arg(s.created_at.millis())
    .arg(s.last_seen_at.millis());
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_session<U: Unit>(
    tx: &mut U,
    id_hash: &str,
) -> Result<Option<Session>, StoreError> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id_hash = $1");
    tx.optional(sqlx::query::<U::Db>(&sql).arg(id_hash), session)
        .await
}

pub async fn touch_session<U: Unit>(
    tx: &mut U,
    id_hash: &str,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>("UPDATE sessions SET last_seen_at = $1 WHERE id_hash = $2")
        .arg(at.millis())
        .arg(id_hash);
    Ok(tx.execute(q).await? == 1)
}

pub async fn set_session_mode<U: Unit>(
    tx: &mut U,
    id_hash: &str,
    mode: Mode,
) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>("UPDATE sessions SET mode = $1 WHERE id_hash = $2")
        .arg(mode.as_str())
        .arg(id_hash);
    Ok(tx.execute(q).await? == 1)
}

pub async fn delete_session<U: Unit>(tx: &mut U, id_hash: &str) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sessions WHERE id_hash = $1").arg(id_hash);
    Ok(tx.execute(q).await? == 1)
}

pub async fn delete_user_sessions<U: Unit>(
    tx: &mut U,
    user_id: &UserId,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sessions WHERE user_id = $1").arg(user_id.as_str());
    tx.execute(q).await
}

pub async fn delete_sessions_created_before<U: Unit>(
    tx: &mut U,
    before: Timestamp,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sessions WHERE created_at < $1").arg(before.millis());
    tx.execute(q).await
}

pub async fn record_sign_in_failure<U: Unit>(
    tx: &mut U,
    email: &str,
    address: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>(
        "INSERT INTO sign_in_failures (email, address, at) VALUES ($1, $2, $3)",
    )
    .arg(email)
    .arg(address)
    .arg(at.millis());
    tx.execute(q).await?;
    Ok(())
}

pub async fn delete_sign_in_failure<U: Unit>(
    tx: &mut U,
    email: &str,
    address: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>(
        "DELETE FROM sign_in_failures WHERE email = $1 AND address = $2 AND at = $3",
    )
    .arg(email)
    .arg(address)
    .arg(at.millis());
    tx.execute(q).await?;
    Ok(())
}

/// (`CAST` gives the address parameter a type where it is compared with NULL; Postgres cannot
/// infer one there.)
pub async fn count_sign_in_failures<U: Unit>(
    tx: &mut U,
    email: &str,
    address: Option<&str>,
    since: Timestamp,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>(
        "SELECT COUNT(*) AS n FROM sign_in_failures
         WHERE email = $1 AND at >= $2 AND (CAST($3 AS TEXT) IS NULL OR address = $3)",
    )
    .arg(email)
    .arg(since.millis())
    .arg(address);
    let n = tx.optional(q, |r| r.col::<i64>("n")).await?.unwrap_or(0);
    Ok(n.max(0) as u64)
}

pub async fn delete_sign_in_failures_before<U: Unit>(
    tx: &mut U,
    before: Timestamp,
) -> Result<u64, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sign_in_failures WHERE at < $1").arg(before.millis());
    tx.execute(q).await
}

/// `impl SessionRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_session_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::SessionRepo, $tx, sessions, [
            fn insert_session(session: &$crate::reexport::Session) -> Result<(), $crate::reexport::StoreError>;
            fn get_session(id_hash: &str) -> Result<Option<$crate::reexport::Session>, $crate::reexport::StoreError>;
            fn touch_session(id_hash: &str, at: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn set_session_mode(id_hash: &str, mode: $crate::reexport::Mode) -> Result<bool, $crate::reexport::StoreError>;
            fn delete_session(id_hash: &str) -> Result<bool, $crate::reexport::StoreError>;
            fn delete_user_sessions(user_id: &$crate::reexport::UserId) -> Result<u64, $crate::reexport::StoreError>;
            fn delete_sessions_created_before(before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn record_sign_in_failure(email: &str, address: &str, at: $crate::reexport::Timestamp) -> Result<(), $crate::reexport::StoreError>;
            fn delete_sign_in_failure(email: &str, address: &str, at: $crate::reexport::Timestamp) -> Result<(), $crate::reexport::StoreError>;
            fn count_sign_in_failures(email: &str, address: Option<&str>, since: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn delete_sign_in_failures_before(before: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], []);
    };
}
