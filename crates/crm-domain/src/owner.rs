//! Owners (decisions §24): a contact, company or deal may name the user of its workspace who
//! owns it, in `owner_id`. The id's form is checked here; that the user exists is checked with
//! the write, through the reference this returns.

use crate::{error::ValidationError, ids::UserId, patch::Patch, registry::ReferenceCheck};

/// The field that holds a record's owner.
pub const FIELD: &str = "owner_id";

fn parse(raw: String) -> Result<UserId, ValidationError> {
    UserId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: FIELD.into(),
        value: raw,
    })
}

fn clean(raw: String) -> Option<String> {
    Some(raw.trim().to_owned()).filter(|t| !t.is_empty())
}

/// A new record's owner (blank is none), with the reference the write checks.
pub(crate) fn from_draft(
    raw: Option<String>,
    refs: &mut Vec<ReferenceCheck>,
) -> Result<Option<UserId>, ValidationError> {
    let owner = raw.and_then(clean).map(parse).transpose()?;
    if let Some(id) = &owner {
        refs.push(ReferenceCheck::new(FIELD, id.as_str()));
    }
    Ok(owner)
}

/// Applies an update's owner (blank clears it); `true` when it changed. A named owner is
/// checked even when it is the current one, as the other references are.
pub(crate) fn apply(
    patch: Patch<String>,
    owner: &mut Option<UserId>,
    refs: &mut Vec<ReferenceCheck>,
) -> Result<bool, ValidationError> {
    let patch = match patch {
        Patch::Value(v) => match clean(v) {
            Some(v) => Patch::Value(parse(v)?),
            None => Patch::Null,
        },
        Patch::Null => Patch::Null,
        Patch::Absent => Patch::Absent,
    };
    if let Patch::Value(id) = &patch {
        refs.push(ReferenceCheck::new(FIELD, id.as_str()));
    }
    Ok(patch.apply_to(owner))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn user() -> UserId {
        UserId::from_uuid(Uuid::from_u128(3))
    }

    #[test]
    fn an_owner_must_be_a_user_id() {
        let mut refs = Vec::new();
        for bad in ["con_1", "usr_nope", "someone@example.com"] {
            let err = from_draft(Some(bad.into()), &mut refs).unwrap_err();
            assert_eq!(
                err,
                ValidationError::InvalidReference {
                    field: "owner_id".into(),
                    value: bad.into()
                }
            );
        }
        assert!(refs.is_empty());
    }

    #[test]
    fn a_named_owner_is_a_reference_to_check_and_blank_is_none() {
        let mut refs = Vec::new();
        let id = user();
        let owner = from_draft(Some(format!(" {} ", id.as_str())), &mut refs).unwrap();
        assert_eq!(owner, Some(id.clone()));
        assert_eq!(refs, vec![ReferenceCheck::new("owner_id", id.as_str())]);
        assert!(refs[0].names_user());
        assert_eq!(
            from_draft(Some("  ".into()), &mut Vec::new()).unwrap(),
            None
        );
    }

    #[test]
    fn an_update_changes_clears_or_keeps_the_owner() {
        let id = user();
        let mut owner = None;
        let mut refs = Vec::new();
        assert!(apply(Patch::Value(id.as_str().into()), &mut owner, &mut refs).unwrap());
        assert!(!apply(Patch::Value(id.as_str().into()), &mut owner, &mut refs).unwrap());
        assert_eq!(refs.len(), 2);
        assert!(!apply(Patch::Absent, &mut owner, &mut refs).unwrap());
        assert_eq!(owner, Some(id));
        assert!(apply(Patch::Value(" ".into()), &mut owner, &mut refs).unwrap());
        assert_eq!(owner, None);
        assert!(apply(Patch::Value("usr_x".into()), &mut owner, &mut refs).is_err());
    }
}
