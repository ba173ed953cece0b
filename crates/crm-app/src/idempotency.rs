//! `Idempotency-Key` (decisions §9). A key is claimed in its own short transaction so that a
//! second request with the same key sees it "in progress" while the first runs; the outcome is
//! then stored by the write's own transaction (success) or separately (4xx). 5xx outcomes release
//! the key. A claim whose process died is taken over at once: the store tells whether a claim's
//! owner still runs (`IdempotencyRepo::get_idempotency`). The lease is the backstop for what
//! the store cannot see at once, such as a host that vanished with its connections still open
//! on the database's side.

use crm_domain::{Tenant, Timestamp};

pub use crate::ports::{IdemRecord, StoredReply};
use crate::{error::AppError, App};

/// How long a key and its stored result are kept.
pub const RETENTION_MS: i64 = 24 * 60 * 60 * 1000;
/// How long a claim may stay in progress, while its owner seems alive, before another request
/// may take it over.
pub const LEASE_MS: i64 = 60 * 1000;
pub const MAX_KEY_LEN: usize = 255;

/// A claimed key: the request holding it must finish or release it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdemClaim {
    pub key: String,
    /// When it was claimed: tells this claim from a later one that took the key over.
    pub claimed_at: Timestamp,
    /// The status the operation answers a success with (its declared success status, which
    /// the caller of [`App::claim_idempotency`] knows): stored with the answer to replay it.
    pub success_status: u16,
}

/// How often a release that found the database unavailable is tried again.
const RELEASE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug)]
pub enum Claim {
    Fresh(IdemClaim),
    Replay(StoredReply),
}

impl App {
    /// Claims `key` for a request with this fingerprint, or returns the stored outcome of the
    /// same request, or fails with `idempotency_key_reused` / `idempotency_in_progress`.
    pub async fn claim_idempotency(
        &self,
        tenant: &Tenant,
        key: &str,
        fingerprint: &str,
        success_status: u16,
    ) -> Result<Claim, AppError> {
        let now = self.clock.now();
        let fresh = IdemRecord {
            key: key.to_owned(),
            fingerprint: fingerprint.to_owned(),
            reply: None,
            created_at: now,
            locked_until: now.plus_millis(LEASE_MS),
            owner_alive: true,
        };
        let fresh_claim = || {
            Claim::Fresh(IdemClaim {
                key: key.to_owned(),
                claimed_at: now,
                success_status,
            })
        };
        let mut tx = self.store.begin_write().await?;
        if tx.insert_idempotency(tenant, &fresh).await? {
            tx.commit().await?;
            return Ok(fresh_claim());
        }
        let existing = match tx.get_idempotency(tenant, key).await? {
            Some(existing) => existing,
            // Deleted between the insert and the read (a claim released by its owner; Postgres
            // reads what committed before each statement): the key is free again.
            None if tx.insert_idempotency(tenant, &fresh).await? => {
                tx.commit().await?;
                return Ok(fresh_claim());
            }
            None => {
                return Err(AppError::Internal(
                    "idempotency record vanished twice inside a transaction".into(),
                ))
            }
        };
        let expired = existing.created_at.plus_millis(RETENTION_MS) <= now;
        let abandoned =
            existing.reply.is_none() && (!existing.owner_alive || existing.locked_until <= now);
        if expired || (abandoned && existing.fingerprint == fingerprint) {
            tx.put_idempotency(tenant, &fresh).await?;
            tx.commit().await?;
            return Ok(fresh_claim());
        }
        if existing.fingerprint != fingerprint {
            return Err(AppError::IdempotencyKeyReused);
        }
        match existing.reply {
            Some(reply) => Ok(Claim::Replay(reply)),
            None => Err(AppError::IdempotencyInProgress),
        }
    }

    /// Stores an outcome that was not written by the operation's own transaction (a 4xx).
    pub async fn finish_idempotency(
        &self,
        tenant: &Tenant,
        claim: &IdemClaim,
        reply: &StoredReply,
    ) -> Result<(), AppError> {
        let mut tx = self.store.begin_write().await?;
        tx.finish_idempotency(tenant, &claim.key, reply).await?;
        Ok(tx.commit().await?)
    }

    /// Gives the key back after an unexpected failure, so that a retry runs the request again.
    /// When the database is unavailable (as it likely was for the request too), the release is
    /// tried again in the background until it succeeds or the claim's lease has ended: otherwise
    /// this live process's claim would answer `idempotency_in_progress` for the rest of its lease
    /// once the database is back.
    pub async fn release_idempotency(
        &self,
        tenant: &Tenant,
        claim: &IdemClaim,
    ) -> Result<(), AppError> {
        let released = self.release_claim(tenant, claim).await;
        if matches!(released, Err(AppError::Unavailable(_))) {
            self.release_when_back(tenant.clone(), claim.clone());
        }
        released
    }

    /// Deletes the claim unless it was finished or taken over meanwhile.
    async fn release_claim(&self, tenant: &Tenant, claim: &IdemClaim) -> Result<(), AppError> {
        let mut tx = self.store.begin_write().await?;
        let ours = tx
            .get_idempotency(tenant, &claim.key)
            .await?
            .is_some_and(|r| r.reply.is_none() && r.created_at == claim.claimed_at);
        if ours {
            tx.delete_idempotency(tenant, &claim.key).await?;
        }
        Ok(tx.commit().await?)
    }

    fn release_when_back(&self, tenant: Tenant, claim: IdemClaim) {
        let app = self.clone();
        self.background.spawn(Box::pin(async move {
            let until = claim.claimed_at.plus_millis(LEASE_MS);
            while app.clock.now() < until {
                app.background.sleep(RELEASE_RETRY).await;
                match app.release_claim(&tenant, &claim).await {
                    Err(AppError::Unavailable(_)) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "releasing an idempotency claim failed; its lease will");
                        return;
                    }
                    Ok(()) => return,
                }
            }
        }));
    }
}
