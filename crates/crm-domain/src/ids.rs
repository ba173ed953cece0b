//! Prefixed, time-ordered identifiers: `<prefix>` + 26 lowercase Crockford base32 characters of a
//! UUIDv7. Because the alphabet is in ASCII order and the length is fixed, ids sort by creation time,
//! which is what "newest first" lists and cursors rely on.

use std::fmt;

use uuid::Uuid;

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
const BODY_LEN: usize = 26;

/// Encodes 128 bits as 26 base32 characters (the first carries the top 3 bits).
pub fn encode_uuid(uuid: Uuid) -> String {
    let mut n = uuid.as_u128();
    let mut out = [0u8; BODY_LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(n & 31) as usize];
        n >>= 5;
    }
    // The buffer holds only ALPHABET bytes, which are ASCII.
    out.iter().map(|&b| b as char).collect()
}

fn is_valid_body(body: &str) -> bool {
    body.len() == BODY_LEN
        && body.bytes().all(|b| ALPHABET.contains(&b))
        // 26 * 5 = 130 bits: the first character may only carry 3.
        && body.as_bytes()[0] <= b'7'
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {kind} id: {}", self.fault())]
pub struct IdError {
    pub kind: &'static str,
    pub prefix: &'static str,
    pub value: String,
}

impl IdError {
    /// What is wrong with the value, so that a client sees which part to fix (an id of the right
    /// length can still hold a character outside the alphabet, or one too high to be the first).
    fn fault(&self) -> String {
        let prefix = self.prefix;
        let Some(body) = self.value.strip_prefix(prefix) else {
            return format!("it must start with `{prefix}`");
        };
        if let Some((at, c)) = body
            .char_indices()
            .find(|(_, c)| !c.is_ascii() || !ALPHABET.contains(&(*c as u8)))
        {
            let at = body[..at].chars().count() + 1;
            return format!(
                "character {at} after `{prefix}` is `{c}`, which is not one of the lowercase Crockford base32 characters `0-9a-z` without `i`, `l`, `o` and `u`"
            );
        }
        let len = body.chars().count();
        if len != BODY_LEN {
            return format!("expected `{prefix}` followed by {BODY_LEN} characters, found {len}");
        }
        // 26 characters of 5 bits are 130 bits: the first may only carry the top 3 of the 128.
        format!("the first character after `{prefix}` must be `0` to `7` (the id encodes 128 bits), found `{}`", &body[..1])
    }
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;
            /// What [`Self::parse`] accepts, as a regular expression for JSON Schemas.
            pub const PATTERN: &'static str = concat!("^", $prefix, "[0-7][0-9a-hjkmnp-tv-z]{25}$");
            pub const KIND: &'static str = $kind;

            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(format!("{}{}", $prefix, encode_uuid(uuid)))
            }

            /// Parses an id received from outside; any other prefix or shape is an error.
            pub fn parse(value: &str) -> Result<Self, IdError> {
                match value.strip_prefix($prefix) {
                    Some(body) if is_valid_body(body) => Ok(Self(value.to_owned())),
                    _ => Err(IdError { kind: $kind, prefix: $prefix, value: value.to_owned() }),
                }
            }

            /// Wraps a value read back from our own store, which only ever holds valid ids.
            pub fn from_trusted(value: String) -> Self {
                debug_assert!(Self::parse(&value).is_ok(), "corrupt {} id {value}", $kind);
                Self(value)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The lowest id a UUIDv7 of the millisecond `at` can make: every id made before
            /// `at` sorts below it, every one made at or after it not.
            pub fn first_at(at: crate::Timestamp) -> Self {
                let ms = u128::from(at.millis().max(0) as u64 & ((1 << 48) - 1));
                Self::from_uuid(Uuid::from_u128(ms << 80))
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

typed_id!(ContactId, "con_", "contact");
typed_id!(CompanyId, "cmp_", "company");
typed_id!(DealId, "deal_", "deal");
typed_id!(PipelineId, "pl_", "pipeline");
typed_id!(StageId, "stg_", "stage");
typed_id!(ActivityId, "act_", "activity");
typed_id!(WebhookId, "wh_", "webhook");
typed_id!(SequenceId, "seq_", "sequence");
typed_id!(EventId, "evt_", "event");
typed_id!(WorkspaceId, "ws_", "workspace");
typed_id!(ApiKeyId, "key_", "key");
typed_id!(DeliveryId, "dlv_", "webhook delivery");
typed_id!(AutomationId, "aut_", "automation");
typed_id!(AutomationRunId, "run_", "automation run");
typed_id!(EmailId, "em_", "email");
typed_id!(TemplateId, "tpl_", "template");
typed_id!(ConnectionId, "conn_", "connection");
typed_id!(EnrollmentId, "enr_", "sequence enrollment");
typed_id!(ChangeId, "chg_", "history entry");
typed_id!(ImportId, "imp_", "import");
typed_id!(AuditId, "aud_", "audit entry");
typed_id!(UserId, "usr_", "user");
typed_id!(ExportId, "exp_", "export");

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encodes_to_26_chars_and_parses_back() {
        let id = ContactId::from_uuid(Uuid::from_u128(u128::MAX));
        assert_eq!(id.as_str().len(), 4 + 26);
        assert_eq!(ContactId::parse(id.as_str()).unwrap(), id);
    }

    #[test]
    fn rejects_wrong_prefix_length_and_alphabet() {
        let good = CompanyId::from_uuid(Uuid::from_u128(42));
        assert!(ContactId::parse(good.as_str()).is_err());
        assert!(CompanyId::parse("cmp_abc").is_err());
        assert!(CompanyId::parse(&good.as_str().to_uppercase()).is_err());
        assert!(
            CompanyId::parse("cmp_0000000000000000000000000u").is_err(),
            "u is not in the alphabet"
        );
        assert!(
            CompanyId::parse("cmp_80000000000000000000000000").is_err(),
            "overflows 128 bits"
        );
    }

    #[test]
    fn errors_say_what_is_wrong_with_the_id() {
        let detail = |v: &str| CompanyId::parse(v).unwrap_err().to_string();
        assert_eq!(
            detail("con_0000000000000000000000000a"),
            "`con_0000000000000000000000000a` is not a valid company id: it must start with `cmp_`"
        );
        assert_eq!(detail("cmp_abc"), "`cmp_abc` is not a valid company id: expected `cmp_` followed by 26 characters, found 3");
        assert!(detail("cmp_0000000000000000000000000u")
            .contains("character 26 after `cmp_` is `u`, which is not one of"));
        assert!(detail("cmp_00A").contains("character 3 after `cmp_` is `A`"));
        assert!(detail("cmp_é0").contains("character 1 after `cmp_` is `é`"));
        assert_eq!(
            detail("cmp_zkccp76qbapy3hwwvgt8btbhmt"),
            "`cmp_zkccp76qbapy3hwwvgt8btbhmt` is not a valid company id: the first character after `cmp_` must be `0` to `7` (the id encodes 128 bits), found `z`"
        );
    }

    proptest! {
        #[test]
        fn order_of_ids_is_order_of_uuids(a: u128, b: u128) {
            let (ia, ib) = (DealId::from_uuid(Uuid::from_u128(a)), DealId::from_uuid(Uuid::from_u128(b)));
            prop_assert_eq!(a.cmp(&b), ia.cmp(&ib));
            prop_assert!(DealId::parse(ia.as_str()).is_ok());
        }
    }
}
