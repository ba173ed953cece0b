//! A record written in its [`Shape`] straight from its typed body: the members `fields=` left
//! out are skipped, a cut `custom_fields` keeps only the keys named, and each expanded relation
//! is written right after its `_id` member. Nothing passes through `serde_json::Value`.

use std::collections::HashMap;

use crm_domain::JsonMap;
use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::Shape;
use crate::bodies::{ActivityBody, CompanyBody, ContactBody, DealBody};

/// What shaping needs of a body besides its serialization.
pub trait Record: Serialize {
    /// The id held in `id_field`, a relation's `_id` member, when it is set.
    fn related_id(&self, id_field: &str) -> Option<&str>;
    fn custom_fields(&self) -> &JsonMap;
}

impl Record for ContactBody {
    fn related_id(&self, id_field: &str) -> Option<&str> {
        match id_field {
            "company_id" => self.company_id.as_deref(),
            _ => None,
        }
    }
    fn custom_fields(&self) -> &JsonMap {
        &self.custom_fields
    }
}

impl Record for CompanyBody {
    fn related_id(&self, _: &str) -> Option<&str> {
        None
    }
    fn custom_fields(&self) -> &JsonMap {
        &self.custom_fields
    }
}

impl Record for DealBody {
    fn related_id(&self, id_field: &str) -> Option<&str> {
        match id_field {
            "company_id" => self.company_id.as_deref(),
            "primary_contact_id" => self.primary_contact_id.as_deref(),
            _ => None,
        }
    }
    fn custom_fields(&self) -> &JsonMap {
        &self.custom_fields
    }
}

impl Record for ActivityBody {
    fn related_id(&self, id_field: &str) -> Option<&str> {
        match id_field {
            "contact_id" => self.contact_id.as_deref(),
            "deal_id" => self.deal_id.as_deref(),
            _ => None,
        }
    }
    fn custom_fields(&self) -> &JsonMap {
        &self.custom_fields
    }
}

/// A related record, answered exactly as a GET of it would be.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum RelatedBody {
    Contact(ContactBody),
    Company(CompanyBody),
    Deal(DealBody),
}

/// The related records of a page, by id.
pub type RelatedBodies = HashMap<String, RelatedBody>;

/// `body` as a read in `shape` answers it.
pub struct Shaped<'a, B> {
    pub body: &'a B,
    pub shape: &'a Shape,
    pub related: &'a RelatedBodies,
}

impl<B: Record> Serialize for Shaped<'_, B> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.body.serialize(RecordSerializer {
            inner: serializer,
            record: self,
        })
    }
}

/// Passes everything to `inner` but a struct, whose members go through [`ShapedStruct`].
struct RecordSerializer<'a, B, S> {
    inner: S,
    record: &'a Shaped<'a, B>,
}

/// The serializer's methods that only pass their arguments on to `inner`.
macro_rules! pass_on {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<$ret, S::Error> {
            self.inner.$method($($arg),*)
        })*
    };
}

impl<'a, B: Record, S: Serializer> Serializer for RecordSerializer<'a, B, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = S::SerializeSeq;
    type SerializeTuple = S::SerializeTuple;
    type SerializeTupleStruct = S::SerializeTupleStruct;
    type SerializeTupleVariant = S::SerializeTupleVariant;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = ShapedStruct<'a, B, S::SerializeStruct>;
    type SerializeStructVariant = S::SerializeStructVariant;

    pass_on! {
        serialize_bool(v: bool) -> S::Ok;
        serialize_i8(v: i8) -> S::Ok;
        serialize_i16(v: i16) -> S::Ok;
        serialize_i32(v: i32) -> S::Ok;
        serialize_i64(v: i64) -> S::Ok;
        serialize_u8(v: u8) -> S::Ok;
        serialize_u16(v: u16) -> S::Ok;
        serialize_u32(v: u32) -> S::Ok;
        serialize_u64(v: u64) -> S::Ok;
        serialize_f32(v: f32) -> S::Ok;
        serialize_f64(v: f64) -> S::Ok;
        serialize_char(v: char) -> S::Ok;
        serialize_str(v: &str) -> S::Ok;
        serialize_bytes(v: &[u8]) -> S::Ok;
        serialize_none() -> S::Ok;
        serialize_unit() -> S::Ok;
        serialize_unit_struct(name: &'static str) -> S::Ok;
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str) -> S::Ok;
        serialize_seq(len: Option<usize>) -> S::SerializeSeq;
        serialize_tuple(len: usize) -> S::SerializeTuple;
        serialize_tuple_struct(name: &'static str, len: usize) -> S::SerializeTupleStruct;
        serialize_tuple_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> S::SerializeTupleVariant;
        serialize_map(len: Option<usize>) -> S::SerializeMap;
        serialize_struct_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> S::SerializeStructVariant;
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_some(value)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_newtype_struct(name, value)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_variant(name, index, variant, value)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let len = len + self.record.shape.expand.len();
        Ok(ShapedStruct {
            inner: self.inner.serialize_struct(name, len)?,
            record: self.record,
        })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A record's members: the kept ones written, each relation added after its `_id`.
struct ShapedStruct<'a, B, S> {
    inner: S,
    record: &'a Shaped<'a, B>,
}

impl<B: Record, S: SerializeStruct> SerializeStruct for ShapedStruct<'_, B, S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), S::Error> {
        let Shaped {
            body,
            shape,
            related,
        } = self.record;
        match &shape.fields {
            Some(selection) if !selection.keeps(key) => self.inner.skip_field(key)?,
            Some(selection) if key == "custom_fields" && selection.cuts_custom() => {
                let kept = CustomFieldsCut {
                    all: body.custom_fields(),
                    keys: &selection.custom,
                };
                self.inner.serialize_field(key, &kept)?
            }
            _ => self.inner.serialize_field(key, value)?,
        }
        for relation in shape.expand.iter().filter(|r| r.id_field == key) {
            let found = body.related_id(key).and_then(|id| related.get(id));
            self.inner.serialize_field(relation.name, &found)?;
        }
        Ok(())
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
        self.inner.skip_field(key)
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.inner.end()
    }
}

/// `custom_fields` with only the keys `fields=` named, in their stored order.
struct CustomFieldsCut<'a> {
    all: &'a JsonMap,
    keys: &'a [String],
}

impl Serialize for CustomFieldsCut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.all.iter().filter(|(k, _)| self.keys.contains(k)))
    }
}
