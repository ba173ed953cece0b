//! Authentication: API keys made, hashed and resolved into the caller they stand for.

use std::{hash::Hasher, sync::LazyLock};

use crm_domain::{Mode, Timestamp};
use rand::{distributions::Alphanumeric, Rng};
use sha2::{Digest, Sha256};
use siphasher::sip128::{Hasher128, SipHasher24};

pub use crate::identity::{
    Access, ApiKeyRecord, Caller, Identity, KeyAuth, KeyDigest, Origin, Scope, Scopes, Workspace,
    SCOPE_RESOURCES, TOUCH_EVERY_MS,
};
use crate::{error::AppError, ports::COARSE_SLACK_MS, App};

/// Length of the random part of a key (decisions §7).
const KEY_RANDOM_LEN: usize = 32;

/// A new key secret for `mode`: the prefix plus 32 random base62 characters.
pub fn generate_key(mode: Mode) -> String {
    let random: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(KEY_RANDOM_LEN)
        .map(char::from)
        .collect();
    format!("{}{}", mode.key_prefix(), random)
}

/// A one-time token (a sign-in link's, a session's): 32 random base62 characters, about 190
/// bits. Stored only as its SHA-256 ([`hash_key`]).
pub fn generate_token() -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(KEY_RANDOM_LEN)
        .map(char::from)
        .collect()
}

/// What the key cache knows a key by: its SipHash-2-4, 128 bits, under a random key drawn once
/// per process. SipHash is a pseudorandom function: without this process's random key no other
/// string can be made to land on a cached key's entry, and the cache never holds the key itself.
/// The store keeps SHA-256 ([`hash_key`]), computed only when the cache misses: on a machine
/// without SHA instructions it costs about a fifth of a cached request.
pub fn key_digest(key: &str) -> KeyDigest {
    static PROCESS_KEY: LazyLock<[u8; 16]> = LazyLock::new(rand::random);
    let mut hasher = SipHasher24::new_with_key(&PROCESS_KEY);
    hasher.write(key.as_bytes());
    hasher.finish128().as_bytes()
}

/// Hex SHA-256 of a key, as stored.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The mode a well-formed key selects, or `None` for a malformed key.
pub fn key_mode(key: &str) -> Option<Mode> {
    let (mode, random) = if let Some(r) = key.strip_prefix(Mode::Test.key_prefix()) {
        (Mode::Test, r)
    } else {
        (Mode::Live, key.strip_prefix(Mode::Live.key_prefix())?)
    };
    (random.len() == KEY_RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(mode)
}

impl App {
    /// Resolves an `Authorization` header value into a caller. Every failure is 401, with a
    /// detail that says which of missing, malformed, unknown, revoked or expired it was.
    ///
    /// The key and its workspace come from the configuration cache when this process has them, else from
    /// one lookup by a unique index. Revoking or rolling a key and changing a plan or settings
    /// mark the workspace's configuration changed, so every process forgets its copy as the
    /// change commits (see [`crate::ports::ConfigCache`]); revocation, expiry and scopes are checked on every
    /// request against the record either way.
    ///
    /// Not `#[tracing::instrument]`ed as the operations are: even a disabled span costs every
    /// request, and a refusal is in the response's log line anyway.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, AppError> {
        let header = authorization.ok_or(AppError::Unauthorized(
            "missing Authorization header; send `Authorization: Bearer <API_KEY>`",
        ))?;
        let key = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or(AppError::Unauthorized(
                "the Authorization header must be `Bearer <API_KEY>`",
            ))?;
        let digest = key_digest(key);
        let now = self.clock.now_coarse();
        let auth = match self.config.key(&digest, now) {
            // Only keys found in the store are kept, so a hit is a well-formed key.
            Some(hit) => hit,
            // Boxed: the lookup's future, inline, would size every cached request's future too.
            None => Box::pin(self.look_up_key(key, &digest)).await?,
        };
        if auth.revoked_at.is_some() {
            return Err(AppError::Unauthorized("this API key has been revoked"));
        }
        // The coarse clock is never ahead: past `at` by it is past; just short of it, ask the
        // precise one (a key rolled without a grace period stops at once).
        let expired = |at: Timestamp| {
            at <= now || (at.millis() - now.millis() <= COARSE_SLACK_MS && at <= self.clock.now())
        };
        if auth.expires_at.is_some_and(expired) {
            return Err(AppError::Unauthorized("this API key has expired"));
        }
        let caller = auth.caller;
        debug_assert_eq!(Some(caller.tenant.mode), key_mode(key));
        // `last_used_at` is written in batches by the flush, never on the request path.
        if let Some(key_id) = caller.key_id().filter(|_| caller.should_touch(now)) {
            self.meter.touch(&caller.tenant, key_id, now);
        }
        Ok(caller)
    }

    /// A key this process has not cached: from the store, then kept.
    async fn look_up_key(&self, key: &str, digest: &KeyDigest) -> Result<KeyAuth, AppError> {
        key_mode(key).ok_or(AppError::Unauthorized(
            "malformed API key: expected svc_test_ or svc_live_ followed by 32 characters",
        ))?;
        let seen = self.config.generation();
        let mut tx = self.store.begin_read().await?;
        let (record, workspace) = tx
            .find_api_key(&hash_key(key))
            .await?
            .ok_or(AppError::Unauthorized("unknown API key"))?;
        drop(tx);
        let auth = KeyAuth::new(record, workspace);
        self.config.keep_key(seen, digest, &auth);
        Ok(auth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_knows_each_key_by_its_own_digest() {
        let a = generate_key(Mode::Test);
        let b = generate_key(Mode::Test);
        assert_eq!(key_digest(&a), key_digest(&a));
        assert_ne!(key_digest(&a), key_digest(&b));
        assert_ne!(&key_digest(&a)[..], &Sha256::digest(a.as_bytes())[..16]);
    }

    #[test]
    fn generated_keys_are_well_formed() {
        for mode in [Mode::Test, Mode::Live] {
            let k = generate_key(mode);
            assert_eq!(key_mode(&k), Some(mode));
        }
        assert_eq!(key_mode("svc_test_short"), None);
        assert_eq!(key_mode("sk_test_0123456789012345678901234567890a"), None);
        assert_eq!(key_mode("svc_live_0123456789012345678901234567890!"), None);
    }
}
