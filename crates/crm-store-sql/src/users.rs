//! Users and their sign-in links (`UserRepo`): the same statements on both backends.

use crm_app::{
    ports::{RowLock, SignInLink, Slice},
    StoreError,
};
use crm_domain::{Email, Role, Timestamp, User, UserId, WorkspaceId};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::slice_clause,
    corrupt,
    rows::{opt_ts, ts},
    sql::{Col, PushArg},
    Arg, Sql, Unit,
};

const USER_COLUMNS: &str =
    "id, workspace_id, email, name, role, password_hash, created_at, last_login_at";

fn user<R: Row>(row: &R) -> Result<User, StoreError>
where
    R::Database: Sql,
{
    let role: String = row.col("role")?;
    Ok(User {
        id: UserId::from_trusted(row.col("id")?),
        workspace_id: WorkspaceId::from_trusted(row.col("workspace_id")?),
        email: Email::from_trusted(row.col("email")?),
        name: row.col("name")?,
        role: Role::parse(&role).map_err(|_| corrupt("user role"))?,
        password_hash: row.col("password_hash")?,
        created_at: ts(row, "created_at")?,
        last_login_at: opt_ts(row, "last_login_at")?,
    })
}

fn link<R: Row>(row: &R) -> Result<SignInLink, StoreError>
where
    R::Database: Sql,
{
    Ok(SignInLink {
        token_hash: row.col("token_hash")?,
        user_id: UserId::from_trusted(row.col("user_id")?),
        workspace_id: WorkspaceId::from_trusted(row.col("workspace_id")?),
        created_at: ts(row, "created_at")?,
        expires_at: ts(row, "expires_at")?,
    })
}

pub async fn insert_user<U: Unit>(tx: &mut U, u: &User) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>(
        "INSERT INTO users (id, workspace_id, email, name, role, password_hash, created_at, last_login_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .arg(u.id.as_str())
    .arg(u.workspace_id.as_str())
    .arg(u.email.as_str())
    .arg(u.name.as_str())
    .arg(u.role.as_str())
    .arg(u.password_hash.as_deref())
    .arg(u.created_at.millis())
    .arg(u.last_login_at.map(|t| t.millis()));
    tx.execute_unique(q).await?;
    Ok(())
}

pub async fn get_user<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    id: &UserId,
) -> Result<Option<User>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE workspace_id = $1 AND id = $2");
    let q = sqlx::query::<U::Db>(&sql)
        .arg(workspace.as_str())
        .arg(id.as_str());
    tx.optional(q, user).await
}

pub async fn record_login<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    id: &UserId,
    at: Timestamp,
) -> Result<Option<User>, StoreError> {
    let q = sqlx::query::<U::Db>(
        "UPDATE users SET last_login_at = $1 WHERE workspace_id = $2 AND id = $3",
    )
    .arg(at.millis())
    .arg(workspace.as_str())
    .arg(id.as_str());
    if tx.execute(q).await? == 0 {
        return Ok(None);
    }
    get_user(tx, workspace, id).await
}

pub async fn find_user_by_email<U: Unit>(
    tx: &mut U,
    email: &Email,
) -> Result<Option<User>, StoreError> {
    let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE email = $1");
    tx.optional(sqlx::query::<U::Db>(&sql).arg(email.as_str()), user)
        .await
}

pub async fn list_users<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    slice: &Slice,
) -> Result<Vec<User>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT {USER_COLUMNS} FROM users WHERE workspace_id = "
    ));
    qb.push_arg(workspace.as_str());
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, user).await
}

pub async fn update_user<U: Unit>(tx: &mut U, u: &User) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>(
        "UPDATE users SET email = $1, name = $2, role = $3, password_hash = $4, last_login_at = $5
         WHERE workspace_id = $6 AND id = $7",
    )
    .arg(u.email.as_str())
    .arg(u.name.as_str())
    .arg(u.role.as_str())
    .arg(u.password_hash.as_deref())
    .arg(u.last_login_at.map(|t| t.millis()))
    .arg(u.workspace_id.as_str())
    .arg(u.id.as_str());
    Ok(tx.execute_unique(q).await? == 1)
}

pub async fn delete_user<U: Unit>(
    tx: &mut U,
    workspace: &WorkspaceId,
    id: &UserId,
) -> Result<bool, StoreError> {
    for table in ["sign_in_links", "sessions"] {
        let sql = format!("DELETE FROM {table} WHERE workspace_id = $1 AND user_id = $2");
        let q = sqlx::query::<U::Db>(&sql)
            .arg(workspace.as_str())
            .arg(id.as_str());
        tx.execute(q).await?;
    }
    let q = sqlx::query::<U::Db>("DELETE FROM users WHERE workspace_id = $1 AND id = $2")
        .arg(workspace.as_str())
        .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn count_admins<U: Unit>(tx: &mut U, workspace: &WorkspaceId) -> Result<u64, StoreError> {
    // The rows themselves, locked, rather than `count(*)` (which cannot lock): two demotions
    // of two admins then run one after the other, and the second sees the first.
    let sql = format!(
        "SELECT id FROM users WHERE workspace_id = $1 AND role = 'admin'{}",
        tx.locking(RowLock::Update)
    );
    let ids = tx
        .all(sqlx::query::<U::Db>(&sql).arg(workspace.as_str()), |r| {
            r.col::<String>("id")
        })
        .await?;
    Ok(ids.len() as u64)
}

pub async fn replace_sign_in_link<U: Unit>(tx: &mut U, l: &SignInLink) -> Result<(), StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sign_in_links WHERE user_id = $1")
        .arg(l.user_id.as_str());
    tx.execute(q).await?;
    let q = sqlx::query::<U::Db>(
        "INSERT INTO sign_in_links (token_hash, user_id, workspace_id, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .arg(l.token_hash.as_str())
    .arg(l.user_id.as_str())
    .arg(l.workspace_id.as_str())
    .arg(l.created_at.millis())
    .arg(l.expires_at.millis());
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_sign_in_link<U: Unit>(
    tx: &mut U,
    token_hash: &str,
) -> Result<Option<SignInLink>, StoreError> {
    let q = sqlx::query::<U::Db>(
        "SELECT token_hash, user_id, workspace_id, created_at, expires_at FROM sign_in_links WHERE token_hash = $1",
    )
    .arg(token_hash);
    tx.optional(q, link).await
}

pub async fn delete_sign_in_link<U: Unit>(
    tx: &mut U,
    token_hash: &str,
) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>("DELETE FROM sign_in_links WHERE token_hash = $1").arg(token_hash);
    Ok(tx.execute(q).await? == 1)
}

/// `impl UserRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_user_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::UserRepo, $tx, users, [
            fn insert_user(user: &$crate::reexport::User) -> Result<(), $crate::reexport::StoreError>;
            fn get_user(workspace: &$crate::reexport::WorkspaceId, id: &$crate::reexport::UserId) -> Result<Option<$crate::reexport::User>, $crate::reexport::StoreError>;
            fn find_user_by_email(email: &$crate::reexport::Email) -> Result<Option<$crate::reexport::User>, $crate::reexport::StoreError>;
            fn list_users(workspace: &$crate::reexport::WorkspaceId, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::User>, $crate::reexport::StoreError>;
            fn update_user(user: &$crate::reexport::User) -> Result<bool, $crate::reexport::StoreError>;
            fn delete_user(workspace: &$crate::reexport::WorkspaceId, id: &$crate::reexport::UserId) -> Result<bool, $crate::reexport::StoreError>;
            fn record_login(workspace: &$crate::reexport::WorkspaceId, id: &$crate::reexport::UserId, at: $crate::reexport::Timestamp) -> Result<Option<$crate::reexport::User>, $crate::reexport::StoreError>;
            fn count_admins(workspace: &$crate::reexport::WorkspaceId) -> Result<u64, $crate::reexport::StoreError>;
            fn replace_sign_in_link(link: &$crate::reexport::SignInLink) -> Result<(), $crate::reexport::StoreError>;
            fn get_sign_in_link(token_hash: &str) -> Result<Option<$crate::reexport::SignInLink>, $crate::reexport::StoreError>;
            fn delete_sign_in_link(token_hash: &str) -> Result<bool, $crate::reexport::StoreError>;
        ], []);
    };
}
