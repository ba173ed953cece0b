//! Passwords, hashed with Argon2id (decisions §21) by the `argon2` crate with its default
//! parameters (OWASP's minimum: 19 MiB, 2 passes). Only the PHC string is stored; a password
//! is never logged or returned.

use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};

use crate::error::AppError;

/// The PHC string of `password`'s Argon2id hash with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, AppError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AppError::Internal(format!("hashing a password: {e}")))
}

/// Whether `password` matches the stored `hash`. A hash that does not parse matches nothing.
pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Spends the time of one verification against a hash no password matches: what a sign-in with
/// an unknown email (or a user without a password) does, so that it answers in the time a wrong
/// password takes and its timing does not tell which emails have accounts.
pub fn verify_nothing(password: &str) {
    use std::sync::OnceLock;
    static DECOY: OnceLock<String> = OnceLock::new();
    let decoy =
        DECOY.get_or_init(|| hash_password("decoy password of no account").unwrap_or_default());
    let _ = verify_password(decoy, password);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(!h.contains("correct horse"));
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "wrong horse"));
        assert!(!verify_password("not a hash", "correct horse"));
        assert_ne!(h, hash_password("correct horse").unwrap(), "salted");
    }
}
