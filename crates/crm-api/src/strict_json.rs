//! JSON as the service reads it from clients (decisions §22): a value like `serde_json`'s, except
//! that an object with the same key twice is refused rather than keeping the last one, so a
//! client never has half of what it sent silently ignored. [`check`] applies the same rules to
//! bytes without building the value, for a body that is then read straight into its type.

use std::{borrow::Cow, collections::HashSet, fmt};

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{map::Entry, Map, Number, Value};

/// Parses `bytes` as one JSON value with no duplicate object keys.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// What [`check`] learned of a document it accepted, for [`crate::body::parse`] to read the
/// document once more straight into an operation's input type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// The names of the members of the document, in order, when it is an object.
    pub object_keys: Option<Vec<String>>,
    /// Some string or member name holds U+0000.
    pub nul: bool,
    /// Some number is written with a fraction or an exponent but is integral (`3.0`, `1e18`).
    pub integral_float: bool,
    /// The length in bytes of the longest string value (member names aside): no string holds
    /// more characters than this.
    pub longest_string: usize,
}

/// Checks that `bytes` are one JSON value with no duplicate object keys, as [`from_slice`] does
/// and with the same errors, without building the value.
pub fn check(bytes: &[u8]) -> Result<Facts, serde_json::Error> {
    let mut facts = Facts::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let object_keys = Check {
        facts: &mut facts,
        record: true,
    }
    .deserialize(&mut de)?;
    de.end()?;
    facts.object_keys = object_keys;
    Ok(facts)
}

/// The visitor of [`check`]: walks a document as [`Strict`] does, in the same order and with the
/// same errors, keeping only [`Facts`]. `Value`: the member names of an object, when `record`.
struct Check<'f> {
    facts: &'f mut Facts,
    record: bool,
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = Option<Vec<String>>;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = Option<Vec<String>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        if crm_domain::registry::integral_f64(v).is_some() {
            self.facts.integral_float = true;
        }
        Ok(None)
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        if v.contains('\0') {
            self.facts.nul = true;
        }
        self.facts.longest_string = self.facts.longest_string.max(v.len());
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq
            .next_element_seed(Check {
                facts: &mut *self.facts,
                record: false,
            })?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = Seen::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if key.contains('\0') {
                self.facts.nul = true;
            }
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one object"
                )));
            }
            map.next_value_seed(Check {
                facts: &mut *self.facts,
                record: false,
            })?;
        }
        Ok(self.record.then(|| seen.into_names()))
    }
}

/// An object member's name, borrowed from the input unless it holds escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The member names of one object read so far, in order; past a few, also in a hash set, so
/// that an object of many members is checked in linear time.
struct Seen<'de> {
    names: Vec<Cow<'de, str>>,
    set: Option<HashSet<Cow<'de, str>>>,
}

impl<'de> Seen<'de> {
    const FEW: usize = 16;

    fn new() -> Seen<'de> {
        Seen {
            names: Vec::new(),
            set: None,
        }
    }

    /// Adds `name`; false when the object already had it.
    fn insert(&mut self, name: Cow<'de, str>) -> bool {
        let new = match &mut self.set {
            Some(set) => set.insert(name.clone()),
            None => !self.names.contains(&name),
        };
        if new {
            self.names.push(name);
            if self.set.is_none() && self.names.len() > Self::FEW {
                self.set = Some(self.names.iter().cloned().collect());
            }
        }
        new
    }

    fn into_names(self) -> Vec<String> {
        self.names.into_iter().map(Cow::into_owned).collect()
    }
}

struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format_args!(
                        "the key `{}` appears twice in one object",
                        taken.key()
                    )))
                }
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(Strict)?);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": {"b": true, "b": true}}"#,
            r#"[{"c": null, "c": null}]"#,
        ] {
            let e = from_slice(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains("appears twice"), "{text}: {e}");
        }
    }

    #[test]
    fn reads_what_serde_json_reads() {
        let text = r#"{"b": [1, -2, 3.5, 1e18, "s\u00e9", null, false], "a": {"z": {}, "y": []}}"#;
        let strict = from_slice(text.as_bytes()).unwrap();
        assert_eq!(strict, serde_json::from_str::<Value>(text).unwrap());
        // Keys keep the order they came in, as serde_json's `preserve_order` map does.
        assert_eq!(
            strict.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["b", "a"]
        );
    }

    #[test]
    fn trailing_text_and_bad_syntax_are_refused() {
        for text in ["{} {}", "{", "{\"a\":}", "nul", "{\"a\": 1,}"] {
            assert!(from_slice(text.as_bytes()).is_err(), "{text}");
        }
    }

    /// `check` refuses what `from_slice` refuses, with the same message at the same place.
    #[test]
    fn check_refuses_as_from_slice_does() {
        let many: String = (0..40).map(|i| format!("\"k{i}\": {i}, ")).collect();
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": {"b": true, "b": true}}"#,
            r#"[{"c": null, "c": null}]"#,
            r#"{"\u0061": 1, "a": 2}"#,
            &format!("{{{many}\"k39\": 0}}"),
            "{} {}",
            "{",
            "{\"a\": 1,}",
            "1e400",
        ] {
            let strict = from_slice(text.as_bytes()).unwrap_err().to_string();
            let checked = check(text.as_bytes()).unwrap_err().to_string();
            assert_eq!(checked, strict, "{text}");
        }
        assert!(check("[".repeat(100_000).as_bytes()).is_err());
    }

    #[test]
    fn check_tells_the_members_nul_integral_floats_and_the_longest_string() {
        let facts = check(br#" {"b": [1, 2.5], "a\u0000": {"z": "x"}, "c": 1e3} "#).unwrap();
        assert_eq!(
            facts,
            Facts {
                object_keys: Some(vec!["b".into(), "a\0".into(), "c".into()]),
                nul: true,
                integral_float: true,
                longest_string: 1,
            }
        );
        let facts = check(br#"[{"a": "x\u0000"}, 2.5]"#).unwrap();
        assert_eq!(
            facts,
            Facts {
                object_keys: None,
                nul: true,
                integral_float: false,
                longest_string: 2,
            }
        );
        assert_eq!(check(b"{}").unwrap().object_keys, Some(vec![]));
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let deep = "[".repeat(100_000);
        assert!(from_slice(deep.as_bytes()).is_err());
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\u{e9}]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_document_without_repeated_keys_reads_as_serde_json_reads_it(value in any_json()) {
            let text = serde_json::to_vec(&value).unwrap();
            prop_assert!(check(&text).is_ok());
            prop_assert_eq!(from_slice(&text).unwrap(), value);
        }
    }
}
