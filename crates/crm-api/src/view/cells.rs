//! A record's CSV cells (an export's rows) straight from its typed body: the cells
//! [`crm_domain::export::csv_cells`] takes from the body as a [`Value`], without building that
//! `Value`'s map. Each member is turned into its cell as it is serialized, and only when a
//! column names it (or, for `custom_fields`, one of its keys).

use serde::ser::{self, Impossible, Serialize, SerializeStruct, Serializer};
use serde_json::Value;

/// An export's columns, read once for all its rows.
pub struct Columns<'a> {
    names: &'a [String],
    /// Whether a column names a key inside a member (`custom_fields.<key>`).
    nested: bool,
}

impl<'a> Columns<'a> {
    pub fn new(names: &'a [String]) -> Self {
        Columns {
            names,
            nested: names.iter().any(|c| c.contains('.')),
        }
    }
}

/// The cells of `body` under `columns`: text as it is, numbers and booleans as JSON writes
/// them, null or absent as an empty cell, arrays and objects as their JSON text.
pub fn csv_cells<B: Serialize>(body: &B, columns: &Columns<'_>) -> Vec<String> {
    let mut cells = vec![String::new(); columns.names.len()];
    let members = Members {
        columns,
        cells: &mut cells,
        next: 0,
    };
    match body.serialize(members) {
        Ok(()) => cells,
        // Not a struct: the body as a `Value`, as it would be read.
        Err(_) => crm_domain::export::csv_cells(
            &serde_json::to_value(body).unwrap_or_default(),
            columns.names,
        ),
    }
}

/// A member's value as one cell.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Takes a record body's top-level struct; refuses anything else.
struct Members<'a> {
    columns: &'a Columns<'a>,
    cells: &'a mut [String],
    /// The column after the last member's: the columns mostly follow the members' order.
    next: usize,
}

fn not_a_record() -> serde_json::Error {
    ser::Error::custom("an export row is a record body, a struct")
}

/// The serializer's methods a record body never calls at its top level.
macro_rules! refuse {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $method(self, $(_: $ty),*) -> Result<$ret, serde_json::Error> {
            Err(not_a_record())
        })*
    };
}

impl<'a> Serializer for Members<'a> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Impossible<(), serde_json::Error>;
    type SerializeTuple = Impossible<(), serde_json::Error>;
    type SerializeTupleStruct = Impossible<(), serde_json::Error>;
    type SerializeTupleVariant = Impossible<(), serde_json::Error>;
    type SerializeMap = Impossible<(), serde_json::Error>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), serde_json::Error>;

    refuse! {
        serialize_bool(v: bool) -> ();
        serialize_i8(v: i8) -> ();
        serialize_i16(v: i16) -> ();
        serialize_i32(v: i32) -> ();
        serialize_i64(v: i64) -> ();
        serialize_u8(v: u8) -> ();
        serialize_u16(v: u16) -> ();
        serialize_u32(v: u32) -> ();
        serialize_u64(v: u64) -> ();
        serialize_f32(v: f32) -> ();
        serialize_f64(v: f64) -> ();
        serialize_char(v: char) -> ();
        serialize_str(v: &str) -> ();
        serialize_bytes(v: &[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(name: &'static str) -> ();
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str) -> ();
        serialize_seq(len: Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(len: usize) -> Self::SerializeTuple;
        serialize_tuple_struct(name: &'static str, len: usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> Self::SerializeTupleVariant;
        serialize_map(len: Option<usize>) -> Self::SerializeMap;
        serialize_struct_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> Self::SerializeStructVariant;
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), serde_json::Error> {
        Err(not_a_record())
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), serde_json::Error> {
        Err(not_a_record())
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), serde_json::Error> {
        Err(not_a_record())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, serde_json::Error> {
        Ok(self)
    }
}

impl SerializeStruct for Members<'_> {
    type Ok = ();
    type Error = serde_json::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let names = self.columns.names;
        let whole = match names.get(self.next) {
            Some(c) if c == key => Some(self.next),
            _ => names.iter().position(|c| c == key),
        };
        if let Some(i) = whole {
            self.next = i + 1;
        }
        let nested = |column: &String| {
            column
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some()
        };
        if whole.is_none() && !(self.columns.nested && names.iter().any(nested)) {
            return Ok(());
        }
        let value = serde_json::to_value(value)?;
        let nested_columns = names.iter().zip(self.cells.iter_mut());
        for (column, slot) in nested_columns.filter(|_| self.columns.nested) {
            // `custom_fields.<key>`: one key of the object member.
            if let Some(inner) = column
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('.'))
            {
                *slot = cell(value.get(inner));
            }
        }
        if let Some(i) = whole {
            self.cells[i] = match value {
                Value::String(s) => s,
                other => cell(Some(&other)),
            };
        }
        Ok(())
    }

    fn end(self) -> Result<(), serde_json::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(serde::Serialize)]
    struct Body {
        id: &'static str,
        name: Option<String>,
        count: i64,
        flag: bool,
        tags: Vec<&'static str>,
        custom_fields: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        merged_into: Option<String>,
    }

    #[test]
    fn the_cells_are_those_of_the_body_as_a_value() {
        let body = Body {
            id: "con_1",
            name: None,
            count: 42,
            flag: true,
            tags: vec!["a", "b,c"],
            custom_fields: json!({"tier": "gold", "score": 7.5, "list": ["x"], "none": null}),
            merged_into: None,
        };
        let columns: Vec<String> = [
            "id",
            "name",
            "count",
            "flag",
            "tags",
            "custom_fields.tier",
            "custom_fields.score",
            "custom_fields.list",
            "custom_fields.none",
            "custom_fields.absent",
            "merged_into",
            "not_a_member",
            "custom_fields",
        ]
        .map(String::from)
        .to_vec();
        let as_value = serde_json::to_value(&body).unwrap();
        let cells = csv_cells(&body, &Columns::new(&columns));
        assert_eq!(cells, crm_domain::export::csv_cells(&as_value, &columns));
        // Columns in another order than the members': the same cells, in the columns' order.
        let reversed: Vec<String> = columns.iter().rev().cloned().collect();
        assert_eq!(
            csv_cells(&body, &Columns::new(&reversed)),
            crm_domain::export::csv_cells(&as_value, &reversed)
        );
        assert_eq!(cells[..5], ["con_1", "", "42", "true", r#"["a","b,c"]"#]);
    }

    #[test]
    fn what_is_not_a_struct_is_read_as_a_value() {
        let body = json!({"id": "con_1"});
        let columns = ["id".to_owned()];
        assert_eq!(csv_cells(&body, &Columns::new(&columns)), ["con_1"]);
    }
}
