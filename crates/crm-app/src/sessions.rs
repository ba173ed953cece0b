//! Console sessions (decisions §21, §24): a user signs in with email and password, or sets a
//! password through a one-time link, and gets a session that resolves, on every request, to a
//! [`Caller`] of the user's role in the session's mode. The role is read afresh each time;
//! sessions end 30 days after sign-in however active, and are revoked at sign-out, on a password
//! or role change and with the user. Failed sign-ins are throttled per (email, address) and per
//! email, and an unknown email costs the time a wrong password does.

use crm_domain::{user::check_password, Email, Mode, Tenant, User, UserId};

use crate::{
    auth::{generate_token, hash_key, Caller},
    error::AppError,
    passwords::{hash_password, verify_nothing, verify_password},
    ports::{Session, SignInLink, Tx},
    App,
};

/// How long a session works after its sign-in, active or not.
pub const SESSION_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// Failures of one email from one address within a minute that are let through; the next one is
/// refused (429) before the password is checked.
pub const FAILURES_PER_ADDRESS_MINUTE: u64 = 5;
/// Failures of one email, from any address, within an hour that are let through.
pub const FAILURES_PER_EMAIL_HOUR: u64 = 20;
/// A session's `last_seen_at` is written at most this often: reading a page writes nothing more.
const TOUCH_EVERY_MS: i64 = 60_000;
const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// The "address" a wrong current password is counted under: its failures count towards the
/// email's hourly limit with its sign-ins', and have a per-minute limit of their own.
const CHANGE_PASSWORD: &str = "password change";

/// The one answer to a failed sign-in, whether the email is unknown or the password wrong.
pub const WRONG_EMAIL_OR_PASSWORD: &str = "wrong email or password";

/// A session just made: its id and CSRF token, shown this once (the cookie and the forms).
#[derive(Debug)]
pub struct NewSession {
    /// The id the session cookie carries; stored only as its SHA-256.
    pub id: String,
    pub csrf_token: String,
    pub user: User,
}

/// A live session, read for one console request.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    /// The caller the user's writes and reads run as (channel set by the transport).
    pub caller: Caller,
    pub user: User,
    pub mode: Mode,
    pub csrf_token: String,
    id_hash: String,
}

impl ConsoleSession {
    /// Whether `token` is this session's CSRF token, compared in constant time.
    pub fn csrf_matches(&self, token: &str) -> bool {
        constant_time_eq(self.csrf_token.as_bytes(), token.as_bytes())
    }
}

/// Equality of two byte strings that takes the same time wherever they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn wrong() -> AppError {
    AppError::Unauthorized(WRONG_EMAIL_OR_PASSWORD)
}

fn link_unusable() -> AppError {
    AppError::Unauthorized("this sign-in link has expired or was already used")
}

impl App {
    /// Signs a user in with email and password from client `address`. A refusal is the same
    /// for an unknown email and a wrong password ([`WRONG_EMAIL_OR_PASSWORD`]); past the
    /// throttle it is 429 and the password is not checked.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        address: &str,
    ) -> Result<NewSession, AppError> {
        let normalised = Email::parse(email.trim());
        // What failures are counted under: the normalised email, or the text as typed.
        let counted = normalised
            .as_ref()
            .map_or_else(|| email.trim().to_lowercase(), |e| e.as_str().to_owned());
        let user = match &normalised {
            Some(e) => self.store.begin_read().await?.find_user_by_email(e).await?,
            None => None,
        };
        let attempt = self
            .reserve_attempt(user.as_ref(), &counted, address)
            .await?;
        let hash = user.as_ref().and_then(|u| u.password_hash.clone());
        let checked = hash.clone();
        let password = password.to_owned();
        let verified = self
            .background
            .off_thread(Box::new(move || match checked {
                Some(h) => verify_password(&h, &password),
                None => {
                    verify_nothing(&password);
                    false
                }
            }))
            .await;
        let Some(user) = user.filter(|_| verified) else {
            return Err(wrong());
        };
        let mut tx = self.store.begin_write().await?;
        // The user as it is now: a password changed while this one was checked, or a deleted
        // user, refuses the sign-in; a role or name changed meanwhile is kept.
        let Some(user) = tx
            .record_login(&user.workspace_id, &user.id, attempt)
            .await?
            .filter(|fresh| fresh.password_hash == hash)
        else {
            return Err(wrong());
        };
        tx.delete_sign_in_failure(&counted, address, attempt)
            .await?;
        let session = self.open_session(&mut tx, user).await?;
        tx.commit().await?;
        Ok(session)
    }

    /// Counts an attempt of `email` from `address` as a failure before its password is checked
    /// (a right one forgets it), so that parallel guesses cannot all pass the throttle before
    /// any is recorded: 429 once the failures reach a limit, per address this minute or in all
    /// this hour. Attempts on one account are serialized by a lock on its email. Answers when
    /// the attempt was recorded.
    async fn reserve_attempt(
        &self,
        user: Option<&User>,
        email: &str,
        address: &str,
    ) -> Result<crm_domain::Timestamp, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        if let Some(user) = user {
            let tenant = Tenant {
                workspace_id: user.workspace_id.clone(),
                mode: Mode::Live,
            };
            tx.lock_key(&tenant, &format!("sign-in:{email}")).await?;
        }
        let minute = now.plus_millis(-MINUTE_MS);
        if tx
            .count_sign_in_failures(email, Some(address), minute)
            .await?
            >= FAILURES_PER_ADDRESS_MINUTE
        {
            return Err(AppError::RateLimited {
                retry_after_secs: 60,
            });
        }
        let hour = now.plus_millis(-HOUR_MS);
        if tx.count_sign_in_failures(email, None, hour).await? >= FAILURES_PER_EMAIL_HOUR {
            return Err(AppError::RateLimited {
                retry_after_secs: 3600,
            });
        }
        tx.record_sign_in_failure(email, address, now).await?;
        tx.commit().await?;
        Ok(now)
    }

    /// A new session of `user` in live mode.
    async fn open_session(&self, tx: &mut Box<dyn Tx>, user: User) -> Result<NewSession, AppError> {
        let now = self.clock.now();
        let id = generate_token();
        let csrf_token = generate_token();
        tx.insert_session(&Session {
            id_hash: hash_key(&id),
            user_id: user.id.clone(),
            workspace_id: user.workspace_id.clone(),
            mode: Mode::Live,
            csrf_token: csrf_token.clone(),
            created_at: now,
            last_seen_at: now,
        })
        .await?;
        Ok(NewSession {
            id,
            csrf_token,
            user,
        })
    }

    /// The session a cookie names, if it still works: `None` for an unknown, ended or revoked
    /// session, or one whose user is gone.
    pub async fn console_session(&self, id: &str) -> Result<Option<ConsoleSession>, AppError> {
        let id_hash = hash_key(id);
        let now = self.clock.now();
        let mut tx = self.store.begin_read().await?;
        let Some(session) = tx.get_session(&id_hash).await? else {
            return Ok(None);
        };
        if session.created_at.plus_millis(SESSION_MS) <= now {
            return Ok(None);
        }
        let Some(user) = tx.get_user(&session.workspace_id, &session.user_id).await? else {
            return Ok(None);
        };
        let Some(workspace) = tx.get_workspace(&session.workspace_id).await? else {
            return Ok(None);
        };
        drop(tx);
        if now.millis() - session.last_seen_at.millis() >= TOUCH_EVERY_MS {
            let mut tx = self.store.begin_write().await?;
            tx.touch_session(&id_hash, now).await?;
            tx.commit().await?;
        }
        let tenant = Tenant {
            workspace_id: session.workspace_id,
            mode: session.mode,
        };
        let caller = Caller::user(
            tenant,
            user.id.clone(),
            user.name.clone(),
            user.role,
            workspace,
        );
        Ok(Some(ConsoleSession {
            caller,
            user,
            mode: session.mode,
            csrf_token: session.csrf_token,
            id_hash,
        }))
    }

    /// Ends the session (sign-out).
    pub async fn sign_out(&self, session: &ConsoleSession) -> Result<(), AppError> {
        let mut tx = self.store.begin_write().await?;
        tx.delete_session(&session.id_hash).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Switches the session to `mode`.
    pub async fn switch_mode(&self, session: &ConsoleSession, mode: Mode) -> Result<(), AppError> {
        let mut tx = self.store.begin_write().await?;
        tx.set_session_mode(&session.id_hash, mode).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The user a sign-in link is for, while the link works (its GET shows the form).
    pub async fn sign_in_link_user(&self, token: &str) -> Result<User, AppError> {
        let mut tx = self.store.begin_read().await?;
        let link = self.working_link(&mut tx, token).await?;
        tx.get_user(&link.workspace_id, &link.user_id)
            .await?
            .ok_or_else(link_unusable)
    }

    async fn working_link(
        &self,
        tx: &mut Box<dyn Tx>,
        token: &str,
    ) -> Result<SignInLink, AppError> {
        tx.get_sign_in_link(&hash_key(token))
            .await?
            .filter(|l| l.expires_at > self.clock.now())
            .ok_or_else(link_unusable)
    }

    /// Uses a sign-in link once: sets the user's password, revokes the user's sessions and
    /// opens a new one.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn set_password_with_link(
        &self,
        token: &str,
        password: &str,
    ) -> Result<NewSession, AppError> {
        check_password(password)?;
        // A link that does not work costs no hash.
        self.sign_in_link_user(token).await?;
        let hash = self.hash_off_thread(password).await?;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let link = self.working_link(&mut tx, token).await?;
        // Of two uses of one link, only the one that deletes it goes on.
        if !tx.delete_sign_in_link(&link.token_hash).await? {
            return Err(link_unusable());
        }
        let mut user = tx
            .record_login(&link.workspace_id, &link.user_id, now)
            .await?
            .ok_or_else(link_unusable)?;
        user.password_hash = Some(hash);
        let session = self.replace_sessions(&mut tx, user).await?;
        tx.commit().await?;
        Ok(session)
    }

    /// A signed-in user changes their own password with the current one; every session of the
    /// user ends and a new one opens for this browser.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn change_password(
        &self,
        session: &ConsoleSession,
        current: &str,
        new: &str,
    ) -> Result<NewSession, AppError> {
        check_password(new)?;
        // Guessing the current password from a session is throttled with the email's sign-ins.
        let email = session.user.email.as_str();
        let attempt = self
            .reserve_attempt(Some(&session.user), email, CHANGE_PASSWORD)
            .await?;
        let stored = session.user.password_hash.clone();
        let current = current.to_owned();
        let verified = self
            .background
            .off_thread(Box::new(move || {
                stored.is_some_and(|h| verify_password(&h, &current))
            }))
            .await;
        if !verified {
            return Err(AppError::Unauthorized("the current password is wrong"));
        }
        let hash = self.hash_off_thread(new).await?;
        let mut tx = self.store.begin_write().await?;
        let mut user = tx
            .record_login(&session.user.workspace_id, &session.user.id, attempt)
            .await?
            .ok_or(AppError::Unauthorized("this user no longer exists"))?;
        tx.delete_sign_in_failure(email, CHANGE_PASSWORD, attempt)
            .await?;
        user.password_hash = Some(hash);
        let new_session = self.replace_sessions(&mut tx, user).await?;
        tx.commit().await?;
        Ok(new_session)
    }

    /// Stores `user` (its new password; read locked in this transaction), ends all its sessions
    /// and opens a new one.
    async fn replace_sessions(
        &self,
        tx: &mut Box<dyn Tx>,
        user: User,
    ) -> Result<NewSession, AppError> {
        tx.update_user(&user).await?;
        tx.delete_user_sessions(&user.id).await?;
        self.open_session(tx, user).await
    }

    async fn hash_off_thread(&self, password: &str) -> Result<String, AppError> {
        let password = password.to_owned();
        let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
        let out = slot.clone();
        self.background
            .off_thread(Box::new(move || {
                let hashed = hash_password(&password).ok();
                let done = hashed.is_some();
                *out.lock().unwrap_or_else(|e| e.into_inner()) = hashed;
                done
            }))
            .await;
        let hashed = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        hashed.ok_or_else(|| AppError::Internal("hashing a password failed".into()))
    }

    /// Ends the sessions of `user` (a role change: decisions §24).
    pub(crate) async fn revoke_sessions(
        tx: &mut Box<dyn Tx>,
        user: &UserId,
    ) -> Result<(), AppError> {
        tx.delete_user_sessions(user).await?;
        Ok(())
    }

    /// Forgets sessions that have ended and failures older than any throttling window.
    pub async fn sweep_sessions(&self) -> Result<(), AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        tx.delete_sessions_created_before(now.plus_millis(-SESSION_MS))
            .await?;
        tx.delete_sign_in_failures_before(now.plus_millis(-HOUR_MS))
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_equality_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
