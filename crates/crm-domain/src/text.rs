//! How long text may be, and how large a record may grow (decisions §22, §24). Lengths count
//! characters (Unicode scalar values), as a client counts them, not bytes.

use crate::{error::ValidationError, JsonMap};

/// Single-line built-in fields: names, title, email, phone, URLs, domain, keys, labels, subjects.
pub const MAX_LINE: usize = 1_024;
/// Free text: an activity's `body`, a template's and a sequence step's body.
pub const MAX_BODY: usize = 100_000;
/// A custom field's `text` value.
pub const MAX_CUSTOM_TEXT: usize = 10_000;
/// Custom fields registered for one object.
pub const MAX_CUSTOM_FIELDS: usize = 500;
/// Values in one enum group.
pub const MAX_ENUM_VALUES: usize = 1_000;
/// Values in one multiselect value.
pub const MAX_MULTISELECT: usize = 100;
/// A record's stored `custom_fields` as JSON, in bytes.
pub const MAX_CUSTOM_FIELDS_JSON: usize = 256 * 1024;

/// `text` of `field` holds at most `max` characters.
pub fn check_len(field: &str, text: &str, max: usize) -> Result<(), ValidationError> {
    // A string of at most `max` bytes has at most `max` characters: most text is counted free.
    if text.len() <= max || text.chars().count() <= max {
        return Ok(());
    }
    Err(ValidationError::invalid(
        field,
        format!("must be at most {max} characters"),
    ))
}

/// Each present single-line field of `fields` holds at most [`MAX_LINE`] characters. With
/// `changed`, only the fields named in it are checked: a record stored before the limit keeps
/// a longer value until that field is written.
pub fn check_lines(
    fields: &[(&'static str, Option<&str>)],
    changed: Option<&[&'static str]>,
) -> Result<(), ValidationError> {
    for (name, value) in fields {
        if changed.is_some_and(|c| !c.contains(name)) {
            continue;
        }
        if let Some(value) = value {
            check_len(name, value, MAX_LINE)?;
        }
    }
    Ok(())
}

/// A registry that now holds `fields` custom fields of one object is within
/// [`MAX_CUSTOM_FIELDS`]; checked after a registration, which is undone when it is not.
pub fn check_field_count(fields: usize) -> Result<(), ValidationError> {
    if fields > MAX_CUSTOM_FIELDS {
        return Err(ValidationError::invalid(
            "key",
            format!("an object may have at most {MAX_CUSTOM_FIELDS} custom fields"),
        ));
    }
    Ok(())
}

/// An enum group that now holds `values` values is within [`MAX_ENUM_VALUES`]; checked after a
/// value is added, which is undone when it is not.
pub fn check_enum_value_count(values: usize) -> Result<(), ValidationError> {
    if values > MAX_ENUM_VALUES {
        return Err(ValidationError::invalid(
            "value",
            format!("an enum group may hold at most {MAX_ENUM_VALUES} values"),
        ));
    }
    Ok(())
}

/// A record's custom fields fit in [`MAX_CUSTOM_FIELDS_JSON`] bytes of JSON.
pub fn check_custom_fields_size(values: &JsonMap) -> Result<(), ValidationError> {
    if values.is_empty() {
        return Ok(());
    }
    let size = serde_json::to_vec(values).map_or(0, |json| json.len());
    if size > MAX_CUSTOM_FIELDS_JSON {
        return Err(ValidationError::invalid(
            "custom_fields",
            format!(
                "the record's custom fields take {size} bytes as JSON; at most {MAX_CUSTOM_FIELDS_JSON} are allowed"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_characters() {
        assert!(check_len("name", &"é".repeat(MAX_LINE), MAX_LINE).is_ok());
        let err = check_len("name", &"é".repeat(MAX_LINE + 1), MAX_LINE).unwrap_err();
        assert_eq!(
            err,
            ValidationError::invalid("name", "must be at most 1024 characters")
        );
    }

    #[test]
    fn records_refuse_long_single_lines_and_bodies() {
        use crate::{
            ids::{ActivityId, ContactId},
            registry::{EnumValue, Registry},
            time::Timestamp,
            Activity, ActivityDraft, Contact, ContactDraft, ContactPatch, Patch,
        };
        let t = Timestamp::from_millis(0);
        let long = "x".repeat(MAX_LINE + 1);
        let registry = Registry::default();
        let field = |e: ValidationError| match e {
            ValidationError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        };
        let draft = ContactDraft {
            first_name: Some(long.clone()),
            ..Default::default()
        };
        let id = ContactId::from_uuid(uuid::Uuid::nil());
        let err = Contact::create(id.clone(), t, draft, &registry).unwrap_err();
        assert_eq!(field(err), "first_name");
        let draft = ContactDraft {
            phone: Some("1".into()),
            ..Default::default()
        };
        let (mut contact, _) = Contact::create(id, t, draft, &registry).unwrap();
        let patch = ContactPatch {
            phone: Patch::Value(long.clone()),
            ..Default::default()
        };
        assert_eq!(
            field(contact.apply(patch, t, &registry).unwrap_err()),
            "phone"
        );

        let mut registry = Registry::default();
        registry.enums.insert(
            crate::registry::ACTIVITY_TYPE_GROUP.into(),
            vec![EnumValue::new("note", None).unwrap()],
        );
        let draft = |body: String| ActivityDraft {
            activity_type: Some("note".into()),
            body: Some(body),
            ..Default::default()
        };
        let id = ActivityId::from_uuid(uuid::Uuid::nil());
        let ok = Activity::create(id.clone(), t, draft("b".repeat(MAX_BODY)), &registry);
        assert!(ok.is_ok());
        let err = Activity::create(id, t, draft("b".repeat(MAX_BODY + 1)), &registry).unwrap_err();
        assert_eq!(field(err), "body");
    }

    #[test]
    fn registries_have_sizes() {
        assert!(check_field_count(MAX_CUSTOM_FIELDS).is_ok());
        assert!(check_field_count(MAX_CUSTOM_FIELDS + 1).is_err());
        assert!(check_enum_value_count(MAX_ENUM_VALUES).is_ok());
        assert!(check_enum_value_count(MAX_ENUM_VALUES + 1).is_err());
    }

    #[test]
    fn only_changed_lines_are_checked() {
        let long = "x".repeat(MAX_LINE + 1);
        let fields = [("first_name", Some(long.as_str())), ("phone", Some("1"))];
        assert!(check_lines(&fields, None).is_err());
        assert!(check_lines(&fields, Some(&["phone"])).is_ok());
        assert!(check_lines(&fields, Some(&["first_name"])).is_err());
    }
}
