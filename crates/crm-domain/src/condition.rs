//! Conditions `{field, op, value?}` evaluated against a record snapshot (automations, and the
//! trigger filters and exit conditions of sequences). The eleven operators of the capability
//! catalog ([`crate::automation::ConditionOp`]), with the semantics of decisions §12:
//!
//! - `eq`/`neq`: JSON equality, numbers compared by value (`3` equals `3.0`);
//! - `in`/`nin`: `eq` any / none of the listed values;
//! - `exists`: the field is present and not null; `empty`: absent, null, `""` or `[]`;
//! - `contains`: case-insensitive substring of a string field, or member of an array field;
//! - `gt`/`lt`/`gte`/`lte`: numbers by value, or dates and timestamps in time order; any other
//!   pair of values does not match.
//!
//! A field names a built-in field of the record, a custom field (bare key or
//! `custom_fields.<key>`; a built-in field of the same name wins for the bare key), or
//! `previous_stage` on `deal.stage_changed`.

use std::cmp::Ordering;

use serde_json::Value;

use crate::{
    automation::ConditionOp,
    time::{Date, Timestamp},
};

/// One condition of a rule, already checked against the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub field: String,
    pub op: ConditionOp,
    /// `None` for `exists` and `empty`; an array for `in` and `nin`.
    pub value: Option<Value>,
}

impl Condition {
    pub fn new(field: impl Into<String>, op: ConditionOp, value: Option<Value>) -> Condition {
        Condition {
            field: field.into(),
            op,
            value,
        }
    }
}

/// What conditions are evaluated against: a record snapshot and, for `deal.stage_changed`, the
/// stage the deal left.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub record: &'a Value,
    /// `Some(previous)` on `deal.stage_changed` (previous is `None` on a create).
    pub previous_stage: Option<Option<&'a str>>,
}

impl<'a> Subject<'a> {
    pub fn record(record: &'a Value) -> Subject<'a> {
        Subject {
            record,
            previous_stage: None,
        }
    }

    /// The value of a record field (`previous_stage` is answered by [`Condition::matches`]).
    pub fn field(&self, field: &str) -> Option<&'a Value> {
        lookup(self.record, field)
    }
}

/// The value of `field` in a record snapshot: a top-level field, else a custom field.
pub fn lookup<'a>(record: &'a Value, field: &str) -> Option<&'a Value> {
    if let Some(key) = field.strip_prefix("custom_fields.") {
        return record.get("custom_fields").and_then(|c| c.get(key));
    }
    if field != "custom_fields" {
        if let Some(v) = record.get(field) {
            return Some(v);
        }
    }
    record.get("custom_fields").and_then(|c| c.get(field))
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// JSON equality with numbers compared by value.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        _ => a == b,
    }
}

/// A date (midnight UTC) or timestamp, in milliseconds.
fn instant(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    if let Some(t) = Timestamp::parse_rfc3339(s) {
        return Some(t.millis());
    }
    Date::parse(s).map(|d| d.midnight_utc().millis())
}

fn order(actual: &Value, value: &Value) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (number(actual), number(value)) {
        return a.partial_cmp(&b);
    }
    match (instant(actual), instant(value)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => None,
    }
}

fn is_empty_value(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

/// Applies `op` to the field's value (`None`: the record has no such field).
pub fn test(op: ConditionOp, actual: Option<&Value>, value: Option<&Value>) -> bool {
    const NULL: Value = Value::Null;
    let actual_or_null = actual.unwrap_or(&NULL);
    match op {
        ConditionOp::Eq => value.is_some_and(|v| values_equal(actual_or_null, v)),
        ConditionOp::Neq => !test(ConditionOp::Eq, actual, value),
        ConditionOp::In => match value {
            Some(Value::Array(options)) => options.iter().any(|v| values_equal(actual_or_null, v)),
            _ => false,
        },
        ConditionOp::Nin => !test(ConditionOp::In, actual, value),
        ConditionOp::Exists => !matches!(actual, None | Some(Value::Null)),
        ConditionOp::Empty => is_empty_value(actual),
        ConditionOp::Contains => match (actual_or_null, value) {
            (Value::String(s), Some(Value::String(needle))) => {
                s.to_lowercase().contains(&needle.to_lowercase())
            }
            (Value::Array(items), Some(v)) => items.iter().any(|i| values_equal(i, v)),
            _ => false,
        },
        ConditionOp::Gt | ConditionOp::Lt | ConditionOp::Gte | ConditionOp::Lte => {
            let Some(ord) = value.and_then(|v| order(actual_or_null, v)) else {
                return false;
            };
            match op {
                ConditionOp::Gt => ord == Ordering::Greater,
                ConditionOp::Lt => ord == Ordering::Less,
                ConditionOp::Gte => ord != Ordering::Less,
                _ => ord != Ordering::Greater,
            }
        }
    }
}

impl Condition {
    /// Whether the subject satisfies this condition.
    pub fn matches(&self, subject: &Subject<'_>) -> bool {
        if self.field == "previous_stage" {
            if let Some(prev) = subject.previous_stage {
                let v = prev.map(|s| Value::String(s.to_owned()));
                return test(
                    self.op,
                    Some(v.as_ref().unwrap_or(&Value::Null)),
                    self.value.as_ref(),
                );
            }
        }
        test(self.op, subject.field(&self.field), self.value.as_ref())
    }
}

/// Whether every condition holds (AND; an empty list matches).
pub fn all_match(conditions: &[Condition], subject: &Subject<'_>) -> bool {
    conditions.iter().all(|c| c.matches(subject))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn contact() -> Value {
        json!({
            "id": "con_1", "object": "contact", "first_name": "Ada", "last_name": null, "email": "ada@example.com",
            "type": "customer", "created_at": "2026-03-04T05:06:07.000Z",
            "custom_fields": {"score": 42, "tags": ["vip", "beta"], "nickname": "", "birthday": "1990-12-10", "first_name": "custom"},
        })
    }

    fn check(field: &str, op: ConditionOp, value: Option<Value>) -> bool {
        let record = contact();
        Condition::new(field, op, value).matches(&Subject::record(&record))
    }

    use ConditionOp::*;

    #[test]
    fn eq_and_neq() {
        assert!(check("first_name", Eq, Some(json!("Ada"))));
        assert!(!check("first_name", Eq, Some(json!("ada"))), "eq is exact");
        assert!(check("first_name", Neq, Some(json!("Bob"))));
        assert!(
            check("score", Eq, Some(json!(42.0))),
            "numbers by value, custom field by bare key"
        );
        assert!(check("custom_fields.score", Eq, Some(json!(42))));
        assert!(check("last_name", Eq, Some(Value::Null)));
        assert!(check("missing", Neq, Some(json!("x"))));
        assert!(!check("missing", Eq, Some(json!("x"))));
        assert!(
            check("custom_fields.first_name", Eq, Some(json!("custom"))),
            "the prefix reaches a shadowed custom field"
        );
    }

    #[test]
    fn in_and_nin() {
        assert!(check("type", In, Some(json!(["lead", "customer"]))));
        assert!(!check("type", In, Some(json!(["lead"]))));
        assert!(check("type", Nin, Some(json!(["lead"]))));
        assert!(!check("type", Nin, Some(json!(["customer"]))));
        assert!(check("score", In, Some(json!([1, 42]))));
    }

    #[test]
    fn exists_and_empty() {
        assert!(check("email", Exists, None));
        assert!(!check("last_name", Exists, None));
        assert!(!check("nope", Exists, None));
        assert!(check("last_name", Empty, None));
        assert!(check("nickname", Empty, None), "empty string");
        assert!(check("nope", Empty, None));
        assert!(!check("tags", Empty, None));
        assert!(check("nickname", Exists, None), "an empty string is set");
    }

    #[test]
    fn contains_is_substring_or_membership() {
        assert!(check("email", Contains, Some(json!("EXAMPLE"))));
        assert!(!check("email", Contains, Some(json!("acme"))));
        assert!(check("tags", Contains, Some(json!("vip"))));
        assert!(
            !check("tags", Contains, Some(json!("vi"))),
            "arrays test membership, not substrings"
        );
        assert!(!check("score", Contains, Some(json!("4"))));
    }

    #[test]
    fn ordering_on_numbers_and_dates() {
        assert!(check("score", Gt, Some(json!(41))));
        assert!(!check("score", Gt, Some(json!(42))));
        assert!(check("score", Gte, Some(json!(42))));
        assert!(check("score", Lte, Some(json!(42.5))));
        assert!(check("score", Lt, Some(json!(100))));
        assert!(check("birthday", Lt, Some(json!("1991-01-01"))));
        assert!(
            check("created_at", Gt, Some(json!("2026-03-04"))),
            "timestamps compare with dates"
        );
        assert!(
            !check("first_name", Gt, Some(json!("A"))),
            "text is not ordered"
        );
        assert!(!check("nope", Lt, Some(json!(5))));
    }

    #[test]
    fn previous_stage_comes_from_the_event() {
        let record = json!({"stage": "won"});
        let moved = Subject {
            record: &record,
            previous_stage: Some(Some("proposal")),
        };
        assert!(Condition::new("previous_stage", Eq, Some(json!("proposal"))).matches(&moved));
        assert!(Condition::new("previous_stage", Exists, None).matches(&moved));
        let created = Subject {
            record: &record,
            previous_stage: Some(None),
        };
        assert!(Condition::new("previous_stage", Empty, None).matches(&created));
        assert!(all_match(&[], &created));
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::String),
        ]
    }

    fn field_value() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            scalar().prop_map(Some),
            prop::collection::vec(scalar(), 0..3).prop_map(|v| Some(Value::Array(v))),
        ]
    }

    proptest! {
        #[test]
        fn in_is_any_eq(actual in field_value(), options in prop::collection::vec(scalar(), 0..4)) {
            let any_eq = options.iter().any(|o| test(Eq, actual.as_ref(), Some(o)));
            prop_assert_eq!(test(In, actual.as_ref(), Some(&Value::Array(options.clone()))), any_eq);
            prop_assert_eq!(test(Nin, actual.as_ref(), Some(&Value::Array(options))), !any_eq);
        }

        #[test]
        fn neq_is_not_eq(actual in field_value(), value in scalar()) {
            prop_assert_eq!(test(Neq, actual.as_ref(), Some(&value)), !test(Eq, actual.as_ref(), Some(&value)));
        }

        #[test]
        fn empty_is_not_exists_or_an_empty_value(actual in field_value()) {
            let empty_value = matches!(&actual, Some(Value::String(s)) if s.is_empty()) || matches!(&actual, Some(Value::Array(a)) if a.is_empty());
            prop_assert_eq!(test(Empty, actual.as_ref(), None), !test(Exists, actual.as_ref(), None) || empty_value);
        }

        #[test]
        fn orderings_agree(a in -100i64..100, b in -100i64..100) {
            let (x, y) = (json!(a), json!(b));
            prop_assert_eq!(test(Gt, Some(&x), Some(&y)), a > b);
            prop_assert_eq!(test(Lt, Some(&x), Some(&y)), a < b);
            prop_assert_eq!(test(Gte, Some(&x), Some(&y)), !test(Lt, Some(&x), Some(&y)));
            prop_assert_eq!(test(Lte, Some(&x), Some(&y)), !test(Gt, Some(&x), Some(&y)));
            prop_assert_eq!(test(Eq, Some(&x), Some(&y)), a == b);
        }

        #[test]
        fn dates_order_like_their_days(a in 0u32..3650, b in 0u32..3650) {
            let day = |n: u32| {
                let d = time::Date::from_julian_day(2_440_588 + n as i32).unwrap();
                json!(format!("{:04}-{:02}-{:02}", d.year(), d.month() as u8, d.day()))
            };
            prop_assert_eq!(test(Gt, Some(&day(a)), Some(&day(b))), a > b);
            prop_assert_eq!(test(Lte, Some(&day(a)), Some(&day(b))), a <= b);
        }
    }
}
