//! The list envelope of decisions §4, generic over its item body.

use std::borrow::Cow;

use crm_app::Page;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

/// One page of a list: `{object: "list", data, has_more, next_cursor}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListBody<T> {
    pub object: &'static str,
    pub data: Vec<T>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

impl<T> ListBody<T> {
    /// The page with each record made its body.
    pub fn of<R>(page: Page<R>) -> ListBody<T>
    where
        T: for<'r> From<&'r R>,
    {
        ListBody {
            object: "list",
            data: page.data.iter().map(T::from).collect(),
            has_more: page.has_more,
            next_cursor: page.next_cursor,
        }
    }
}

/// Written out rather than derived: `object` is the constant `list`, and the name is the item's
/// (`ContactList`), which is what a generated client calls the class.
impl<T: JsonSchema> JsonSchema for ListBody<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}List", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("crm_api::ListBody<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let items = generator.subschema_for::<T>();
        json_schema!({
            "type": "object",
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": items},
                "has_more": {"type": "boolean"},
                "next_cursor": {"type": ["string", "null"]},
            },
            "required": ["object", "data", "has_more", "next_cursor"],
        })
    }
}
