//! The body a DELETE answers with (decisions §3).

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

/// `{id, object, deleted: true}`: what a delete answers for any object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeletedBody {
    pub id: String,
    pub object: &'static str,
    pub deleted: bool,
}

impl DeletedBody {
    pub fn new(id: &str, object: &'static str) -> DeletedBody {
        DeletedBody {
            id: id.to_owned(),
            object,
            deleted: true,
        }
    }
}

/// Written out: `deleted` is always `true`.
impl JsonSchema for DeletedBody {
    fn schema_name() -> Cow<'static, str> {
        "Deleted".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "object": {"type": "string"}, "deleted": {"const": true}},
            "required": ["id", "object", "deleted"],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_the_handlers_rendered() {
        crate::bodies::assert_same_json(
            &DeletedBody::new("con_x", "contact"),
            &serde_json::json!({"id": "con_x", "object": "contact", "deleted": true}),
        );
    }
}
