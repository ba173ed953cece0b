//! JSON as the service reads it from clients (decisions §22): a value like `serde_json`'s, except
//! that an object with the same key twice is refused rather than keeping the last one, so a
//! client never has half of what it sent silently ignored.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{map::Entry, Map, Number, Value};

/// Parses `bytes` as one JSON value with no duplicate object keys.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
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
        assert_eq!(strict.as_object().unwrap().keys().collect::<Vec<_>>(), ["b", "a"]);
    }

    #[test]
    fn trailing_text_and_bad_syntax_are_refused() {
        for text in ["{} {}", "{", "{\"a\":}", "nul", "{\"a\": 1,}"] {
            assert!(from_slice(text.as_bytes()).is_err(), "{text}");
        }
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
            prop_assert_eq!(from_slice(&text).unwrap(), value);
        }
    }
}
