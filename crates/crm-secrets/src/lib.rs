//! The [`SecretBox`] port of `crm-app`: secrets sealed with XChaCha20-Poly1305 (the RustCrypto
//! `chacha20poly1305` crate) under a ring of 32-byte keys, `CRM_SECRET_KEYS`.
//!
//! A sealed value is text, `v1.<key id>.<base64url of nonce ‖ ciphertext ‖ tag>`: a fresh random
//! 24-byte nonce each time (XChaCha's nonce is long enough for random ones), the key id the first
//! 4 bytes of the key's SHA-256 in hex, so a value opens with whichever configured key sealed it
//! whatever the keys' order, and the associated data binds the value to its row (workspace, mode,
//! table, id): copied into another row, it does not open. The first key of the ring seals; the
//! others only open, which is what rotation needs (docs/operations.md, "Secrets at rest").

use base64::{
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
    Engine,
};
use chacha20poly1305::{
    aead::{Aead, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};
use crm_app::secrets::{SecretBox, SecretError, SecretSlot};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Bytes in a key.
pub const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;
const VERSION: &str = "v1";

/// Why a key list was refused. Names the key by its position, never by its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("no keys given: expected a comma-separated list of base64 32-byte keys")]
    Empty,
    #[error("key {0} (counting from 1) is not base64")]
    NotBase64(usize),
    #[error("key {position} (counting from 1) is {len} bytes; keys are 32 bytes (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)")]
    WrongLength { position: usize, len: usize },
    #[error("key {position} (counting from 1) repeats key {first}")]
    Repeated { position: usize, first: usize },
}

struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

/// The configured keys, the sealing one first. `Debug` shows key ids only.
pub struct Keyring {
    keys: Vec<Key>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("key_ids", &self.key_ids())
            .finish()
    }
}

/// The id of a key: the first 4 bytes of its SHA-256, in hex. Not secret.
fn key_id(key: &[u8; KEY_BYTES]) -> String {
    hex::encode(&Sha256::digest(key)[..4])
}

/// The associated data of a slot: each part length-prefixed, so no two slots share a spelling.
fn associated_data(slot: &SecretSlot<'_>) -> Vec<u8> {
    let mut ad = Vec::with_capacity(64);
    ad.extend_from_slice(b"crm-secret-v1");
    for part in [slot.workspace, slot.mode, slot.table, slot.id] {
        ad.extend_from_slice(&(part.len() as u32).to_be_bytes());
        ad.extend_from_slice(part.as_bytes());
    }
    ad
}

/// A new random key, base64 (what `CRM_SECRET_KEYS` takes).
pub fn generate_key() -> String {
    let mut key = [0u8; KEY_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut key);
    STANDARD.encode(key)
}

impl Keyring {
    /// Parses `CRM_SECRET_KEYS`: base64 32-byte keys separated by commas (spaces around them
    /// ignored), the first sealing.
    pub fn parse(list: &str) -> Result<Keyring, KeyringError> {
        let mut keys: Vec<[u8; KEY_BYTES]> = Vec::new();
        for (i, text) in list
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .enumerate()
        {
            let position = i + 1;
            let bytes = STANDARD
                .decode(text)
                .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
                .map_err(|_| KeyringError::NotBase64(position))?;
            let key: [u8; KEY_BYTES] =
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| KeyringError::WrongLength {
                        position,
                        len: bytes.len(),
                    })?;
            if let Some(first) = keys.iter().position(|k| *k == key) {
                return Err(KeyringError::Repeated {
                    position,
                    first: first + 1,
                });
            }
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(KeyringError::Empty);
        }
        Ok(Keyring::from_keys(&keys))
    }

    /// A ring of raw keys, the first sealing.
    pub fn from_keys(keys: &[[u8; KEY_BYTES]]) -> Keyring {
        Keyring {
            keys: keys
                .iter()
                .map(|k| Key {
                    id: key_id(k),
                    cipher: XChaCha20Poly1305::new(k.into()),
                })
                .collect(),
        }
    }
}

impl SecretBox for Keyring {
    fn seal(&self, slot: &SecretSlot<'_>, plaintext: &str) -> Result<String, SecretError> {
        let key = self.keys.first().ok_or(SecretError::NoKeys)?;
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let ad = associated_data(slot);
        let sealed = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: &ad,
                },
            )
            // Encryption fails only for messages beyond the cipher's limit (256 GiB).
            .map_err(|_| SecretError::Malformed)?;
        let mut data = Vec::with_capacity(NONCE_BYTES + sealed.len());
        data.extend_from_slice(&nonce);
        data.extend_from_slice(&sealed);
        Ok(format!(
            "{VERSION}.{}.{}",
            key.id,
            URL_SAFE_NO_PAD.encode(data)
        ))
    }

    fn open(&self, slot: &SecretSlot<'_>, sealed: &str) -> Result<String, SecretError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some(VERSION), Some(id), Some(data)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(SecretError::Malformed);
        };
        let data = URL_SAFE_NO_PAD
            .decode(data)
            .map_err(|_| SecretError::Malformed)?;
        if data.len() < NONCE_BYTES + TAG_BYTES {
            return Err(SecretError::Malformed);
        }
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| SecretError::UnknownKey(id.to_owned()))?;
        let (nonce, ciphertext) = data.split_at(NONCE_BYTES);
        let ad = associated_data(slot);
        let plain = key
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &ad,
                },
            )
            .map_err(|_| SecretError::Forged(id.to_owned()))?;
        String::from_utf8(plain).map_err(|_| SecretError::Malformed)
    }

    fn key_ids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.id.clone()).collect()
    }

    fn key_id_of(&self, sealed: &str) -> Option<String> {
        let mut parts = sealed.splitn(3, '.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(VERSION), Some(id), Some(_)) => Some(id.to_owned()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot<'a>(id: &'a str) -> SecretSlot<'a> {
        SecretSlot {
            workspace: "ws_1",
            mode: "test",
            table: "webhooks",
            id,
        }
    }

    fn ring(seeds: &[u8]) -> Keyring {
        let keys: Vec<[u8; KEY_BYTES]> = seeds.iter().map(|s| [*s; KEY_BYTES]).collect();
        Keyring::from_keys(&keys)
    }

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn round_trip_and_the_plaintext_is_not_in_the_sealed_text() {
        let r = ring(&[1]);
        let sealed = r.seal(&slot("wh_1"), SECRET).unwrap();
        assert!(!sealed.contains("whsec"), "{sealed}");
        assert!(sealed.starts_with(&format!("v1.{}.", r.key_ids()[0])));
        assert_eq!(r.open(&slot("wh_1"), &sealed).unwrap(), SECRET);
        // A fresh nonce each time: the same plaintext never seals the same way twice.
        assert_ne!(sealed, r.seal(&slot("wh_1"), SECRET).unwrap());
    }

    #[test]
    fn another_row_or_tenant_does_not_open() {
        let r = ring(&[1]);
        let sealed = r.seal(&slot("wh_1"), SECRET).unwrap();
        assert!(matches!(
            r.open(&slot("wh_2"), &sealed),
            Err(SecretError::Forged(_))
        ));
        for other in [
            SecretSlot {
                workspace: "ws_2",
                ..slot("wh_1")
            },
            SecretSlot {
                mode: "live",
                ..slot("wh_1")
            },
            SecretSlot {
                table: "connections",
                ..slot("wh_1")
            },
        ] {
            assert!(matches!(
                r.open(&other, &sealed),
                Err(SecretError::Forged(_))
            ));
        }
    }

    #[test]
    fn a_wrong_key_or_an_altered_value_does_not_open() {
        let sealed = ring(&[1]).seal(&slot("wh_1"), SECRET).unwrap();
        assert!(matches!(
            ring(&[2]).open(&slot("wh_1"), &sealed),
            Err(SecretError::UnknownKey(_))
        ));
        // The same id with other key bytes (a forged id) fails authentication.
        let forged = format!(
            "v1.{}.{}",
            ring(&[2]).key_ids()[0],
            sealed.splitn(3, '.').nth(2).unwrap()
        );
        assert!(matches!(
            ring(&[2]).open(&slot("wh_1"), &forged),
            Err(SecretError::Forged(_))
        ));
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(ring(&[1])
            .open(&slot("wh_1"), std::str::from_utf8(&altered).unwrap())
            .is_err());
        for junk in ["", SECRET, "v1.abcd", "v2.x.y", "v1.00000000.!!"] {
            assert!(ring(&[1]).open(&slot("wh_1"), junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn the_first_key_seals_and_any_configured_key_opens_by_id() {
        let old = ring(&[1]);
        let sealed_old = old.seal(&slot("wh_1"), SECRET).unwrap();
        // Rotation: the new key first, the old one kept.
        let both = ring(&[2, 1]);
        assert_eq!(both.open(&slot("wh_1"), &sealed_old).unwrap(), SECRET);
        let sealed_new = both.seal(&slot("wh_1"), SECRET).unwrap();
        assert_eq!(
            both.key_id_of(&sealed_new).unwrap(),
            ring(&[2]).key_ids()[0]
        );
        // The order does not matter for opening: ids, not positions.
        assert_eq!(
            ring(&[1, 2]).open(&slot("wh_1"), &sealed_new).unwrap(),
            SECRET
        );
        // Once the old key is dropped, only re-sealed values open.
        let new_only = ring(&[2]);
        assert_eq!(new_only.open(&slot("wh_1"), &sealed_new).unwrap(), SECRET);
        assert!(matches!(
            new_only.open(&slot("wh_1"), &sealed_old),
            Err(SecretError::UnknownKey(_))
        ));
    }

    #[test]
    fn parsing_keys() {
        let a = generate_key();
        let b = generate_key();
        let r = Keyring::parse(&format!(" {a} , {b},")).unwrap();
        assert_eq!(r.key_ids().len(), 2);
        assert_eq!(Keyring::parse("").unwrap_err(), KeyringError::Empty);
        assert_eq!(Keyring::parse(" , ").unwrap_err(), KeyringError::Empty);
        assert_eq!(
            Keyring::parse(&format!("{a},not base64!")).unwrap_err(),
            KeyringError::NotBase64(2)
        );
        assert_eq!(
            Keyring::parse("AAAA").unwrap_err(),
            KeyringError::WrongLength {
                position: 1,
                len: 3
            }
        );
        assert_eq!(
            Keyring::parse(&format!("{a},{b},{a}")).unwrap_err(),
            KeyringError::Repeated {
                position: 3,
                first: 1
            }
        );
        // base64url without padding is accepted too.
        let url = URL_SAFE_NO_PAD.encode(STANDARD.decode(&a).unwrap());
        assert_eq!(
            Keyring::parse(&url).unwrap().key_ids(),
            Keyring::parse(&a).unwrap().key_ids()
        );
    }

    #[test]
    fn debug_shows_ids_not_keys() {
        let a = generate_key();
        let r = Keyring::parse(&a).unwrap();
        let shown = format!("{r:?}");
        assert!(shown.contains(&r.key_ids()[0]));
        assert!(!shown.contains(&a));
        let err = Keyring::parse(&format!("{a},{}", &a[..20])).unwrap_err();
        assert!(!err.to_string().contains(&a[..20]));
    }
}
