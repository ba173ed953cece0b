//! [`Output`]: the schema of a body an operation takes or answers, from its type. The OpenAPI
//! document refers to the type by name (`#/components/schemas/<Name>`); the agent transports,
//! whose tool schemas cannot refer to a document, take it inline.

use std::ops::Deref;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use crate::schema::schema_of;

/// The schema of a request or success body. From a type ([`Output::of`]) it is the type the
/// handler reads or answers with, so the schema and the body cannot drift; the OpenAPI document
/// refers to it by name, the agent transports take it inline.
#[derive(Clone, Copy)]
pub struct Output {
    inline: fn() -> Value,
    /// `None` for a schema written by hand ([`Output::written`]), which has no name.
    named: Option<fn(&mut SchemaGenerator) -> Schema>,
}

impl Output {
    /// The schema of the body type `T`.
    pub fn of<T: JsonSchema>() -> Output {
        Output {
            inline: schema_of::<T>,
            named: Some(|generator| generator.subschema_for::<T>()),
        }
    }

    /// A schema written out by hand, for documents that are not one type.
    pub fn written(schema: fn() -> Value) -> Output {
        Output {
            inline: schema,
            named: None,
        }
    }

    /// The schema with its subschemas inlined: self-contained, for MCP and A2A.
    pub fn inline(&self) -> Value {
        (self.inline)()
    }

    /// The schema as `generator` describes it: a `$ref` to the body type's definition where the
    /// type has a name (the generator collects the definitions), else the inline schema.
    pub fn in_generator(&self, generator: &mut SchemaGenerator) -> Value {
        match self.named {
            Some(named) => named(generator).to_value(),
            None => self.inline(),
        }
    }
}

/// `(op.output)()` is the inline schema.
impl Deref for Output {
    type Target = fn() -> Value;

    fn deref(&self) -> &Self::Target {
        &self.inline
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("named", &self.named.is_some())
            .finish()
    }
}
