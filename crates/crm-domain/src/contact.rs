//! Contacts: people, identified by a name, an e-mail, a phone, a LinkedIn URL, a company or a
//! custom field.

use crate::{
    email::Email,
    error::ValidationError,
    ids::{CompanyId, ContactId, UserId},
    owner,
    patch::Patch,
    registry::{ReferenceCheck, Registry},
    time::Timestamp,
    JsonMap,
};

pub use crate::object::{CONTACT_TYPE_GROUP, CONTACT_WRITABLE_FIELDS as WRITABLE_FIELDS};

#[derive(Debug, Clone, PartialEq)]
pub struct Contact {
    pub id: ContactId,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<Email>,
    pub phone: Option<String>,
    pub linkedin_url: Option<String>,
    pub company_id: Option<CompanyId>,
    pub contact_type: Option<String>,
    /// The user of the workspace who owns the contact.
    pub owner_id: Option<UserId>,
    pub custom_fields: JsonMap,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
    pub deleted_at: Option<Timestamp>,
    /// Set when the contact was merged into another (decisions §18): a tombstone, never listed
    /// and never written again.
    pub merged_into: Option<ContactId>,
}

/// A create request as the client sent it, before validation.
#[derive(Debug, Clone, Default)]
pub struct ContactDraft {
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub linkedin_url: Option<String>,
    pub company_id: Option<String>,
    pub contact_type: Option<String>,
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
}

/// A partial update as the client sent it.
#[derive(Debug, Clone, Default)]
pub struct ContactPatch {
    pub first_name: Patch<String>,
    pub last_name: Patch<String>,
    pub email: Patch<String>,
    pub phone: Patch<String>,
    pub linkedin_url: Patch<String>,
    pub company_id: Patch<String>,
    pub contact_type: Patch<String>,
    pub owner_id: Patch<String>,
    /// Keys set; `null` values remove the key.
    pub custom_fields: Option<JsonMap>,
}

/// Trims text; blank text counts as absent.
pub(crate) fn clean(text: Option<String>) -> Option<String> {
    text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

pub(crate) fn clean_patch(p: Patch<String>) -> Patch<String> {
    match p {
        Patch::Value(v) => match clean(Some(v)) {
            Some(v) => Patch::Value(v),
            None => Patch::Null,
        },
        other => other,
    }
}

fn parse_email(raw: String) -> Result<Email, ValidationError> {
    Email::parse(&raw)
        .ok_or_else(|| ValidationError::invalid("email", "is not a valid e-mail address"))
}

fn parse_company(raw: String) -> Result<CompanyId, ValidationError> {
    CompanyId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: "company_id".into(),
        value: raw,
    })
}

fn parse_linkedin(raw: String) -> Result<String, ValidationError> {
    if crate::registry::is_http_url(&raw) {
        Ok(raw)
    } else {
        Err(ValidationError::invalid(
            "linkedin_url",
            "must be an http or https URL",
        ))
    }
}

impl Contact {
    /// Validates a draft into a new contact (version 1).
    pub fn create(
        id: ContactId,
        now: Timestamp,
        draft: ContactDraft,
        registry: &Registry,
    ) -> Result<(Contact, Vec<ReferenceCheck>), ValidationError> {
        let email = clean(draft.email).map(parse_email).transpose()?;
        let company_id = clean(draft.company_id).map(parse_company).transpose()?;
        let linkedin_url = clean(draft.linkedin_url).map(parse_linkedin).transpose()?;
        let contact_type = clean(draft.contact_type);
        if let Some(t) = &contact_type {
            registry.check_enum("type", CONTACT_TYPE_GROUP, t)?;
        }
        let (custom_fields, mut refs) = registry.validate_new(draft.custom_fields)?;
        if let Some(c) = &company_id {
            refs.push(ReferenceCheck::new("company_id", c.as_str()));
        }
        let owner_id = owner::from_draft(draft.owner_id, &mut refs)?;
        let contact = Contact {
            id,
            first_name: clean(draft.first_name),
            last_name: clean(draft.last_name),
            email,
            phone: clean(draft.phone),
            linkedin_url,
            company_id: company_id.clone(),
            contact_type,
            owner_id,
            custom_fields,
            created_at: now,
            updated_at: now,
            version: 1,
            deleted_at: None,
            merged_into: None,
        };
        contact.check_lines(None)?;
        contact.check_identified()?;
        Ok((contact, refs))
    }

    /// Applies a partial update. Returns the names of the fields that changed (empty: no change,
    /// and the version stays) and the references to check.
    pub fn apply(
        &mut self,
        patch: ContactPatch,
        now: Timestamp,
        registry: &Registry,
    ) -> Result<(Vec<&'static str>, Vec<ReferenceCheck>), ValidationError> {
        let mut changed = Vec::new();
        let mut refs = Vec::new();
        if clean_patch(patch.first_name).apply_to(&mut self.first_name) {
            changed.push("first_name");
        }
        if clean_patch(patch.last_name).apply_to(&mut self.last_name) {
            changed.push("last_name");
        }
        if clean_patch(patch.email)
            .try_map(parse_email)?
            .apply_to(&mut self.email)
        {
            changed.push("email");
        }
        if clean_patch(patch.phone).apply_to(&mut self.phone) {
            changed.push("phone");
        }
        if clean_patch(patch.linkedin_url)
            .try_map(parse_linkedin)?
            .apply_to(&mut self.linkedin_url)
        {
            changed.push("linkedin_url");
        }
        let company = clean_patch(patch.company_id).try_map(parse_company)?;
        if let Patch::Value(id) = &company {
            refs.push(ReferenceCheck::new("company_id", id.as_str()));
        }
        if company.apply_to(&mut self.company_id) {
            changed.push("company_id");
        }
        let contact_type = clean_patch(patch.contact_type);
        if let Patch::Value(t) = &contact_type {
            registry.check_enum("type", CONTACT_TYPE_GROUP, t)?;
        }
        if contact_type.apply_to(&mut self.contact_type) {
            changed.push("type");
        }
        if owner::apply(patch.owner_id, &mut self.owner_id, &mut refs)? {
            changed.push(owner::FIELD);
        }
        if let Some(cf) = patch.custom_fields {
            let (cf_changed, custom) = registry.merge(&mut self.custom_fields, cf)?;
            refs.extend(custom);
            if cf_changed {
                changed.push("custom_fields");
            }
        }
        self.check_lines(Some(&changed))?;
        self.check_identified()?;
        if !changed.is_empty() {
            self.updated_at = now;
            self.version += 1;
        }
        Ok((changed, refs))
    }

    /// Single-line text at most [`crate::text::MAX_LINE`] characters (the email has its own,
    /// shorter, limit; `type` is an enum value), all or only the `changed` fields.
    fn check_lines(&self, changed: Option<&[&'static str]>) -> Result<(), ValidationError> {
        crate::text::check_lines(
            &[
                ("first_name", self.first_name.as_deref()),
                ("last_name", self.last_name.as_deref()),
                ("phone", self.phone.as_deref()),
                ("linkedin_url", self.linkedin_url.as_deref()),
            ],
            changed,
        )
    }

    /// The create rule: a name, an identifier, a company or a custom field.
    fn check_identified(&self) -> Result<(), ValidationError> {
        let identified = self.first_name.is_some()
            || self.last_name.is_some()
            || self.email.is_some()
            || self.phone.is_some()
            || self.linkedin_url.is_some()
            || self.company_id.is_some()
            || !self.custom_fields.is_empty();
        if identified {
            Ok(())
        } else {
            Err(ValidationError::IdentifierRequired)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::EnumValue;
    use uuid::Uuid;

    fn id() -> ContactId {
        ContactId::from_uuid(Uuid::from_u128(7))
    }

    fn registry_with_types() -> Registry {
        let mut r = Registry::default();
        r.enums.insert(
            CONTACT_TYPE_GROUP.into(),
            vec![EnumValue {
                value: "customer".into(),
                label: None,
            }],
        );
        r
    }

    #[test]
    fn a_contact_needs_some_identifier() {
        let err = Contact::create(
            id(),
            Timestamp::from_millis(0),
            ContactDraft::default(),
            &Registry::default(),
        )
        .unwrap_err();
        assert_eq!(err, ValidationError::IdentifierRequired);
        let blank = ContactDraft {
            first_name: Some("   ".into()),
            ..Default::default()
        };
        assert!(
            Contact::create(id(), Timestamp::from_millis(0), blank, &Registry::default()).is_err()
        );
        let named = ContactDraft {
            last_name: Some("Hopper".into()),
            ..Default::default()
        };
        assert!(
            Contact::create(id(), Timestamp::from_millis(0), named, &Registry::default()).is_ok()
        );
    }

    #[test]
    fn email_is_normalised_and_validated() {
        let draft = ContactDraft {
            email: Some(" Grace@Navy.MIL ".into()),
            ..Default::default()
        };
        let (c, _) =
            Contact::create(id(), Timestamp::from_millis(0), draft, &Registry::default()).unwrap();
        assert_eq!(c.email.unwrap().as_str(), "grace@navy.mil");
        let bad = ContactDraft {
            email: Some("grace".into()),
            ..Default::default()
        };
        let err = Contact::create(id(), Timestamp::from_millis(0), bad, &Registry::default())
            .unwrap_err();
        assert!(matches!(err, ValidationError::Invalid { field, .. } if field == "email"));
    }

    #[test]
    fn type_must_be_registered() {
        let draft = ContactDraft {
            first_name: Some("A".into()),
            contact_type: Some("lead".into()),
            ..Default::default()
        };
        let err = Contact::create(
            id(),
            Timestamp::from_millis(0),
            draft,
            &registry_with_types(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref valid_options, .. } if valid_options == &["customer"])
        );
    }

    #[test]
    fn malformed_company_id_is_an_invalid_reference() {
        let draft = ContactDraft {
            company_id: Some("cmp_nope".into()),
            ..Default::default()
        };
        let err = Contact::create(id(), Timestamp::from_millis(0), draft, &Registry::default())
            .unwrap_err();
        assert!(matches!(err, ValidationError::InvalidReference { .. }));
    }

    #[test]
    fn patch_bumps_version_only_on_change_and_keeps_the_identifier_rule() {
        let draft = ContactDraft {
            email: Some("a@b.co".into()),
            ..Default::default()
        };
        let (mut c, _) =
            Contact::create(id(), Timestamp::from_millis(0), draft, &Registry::default()).unwrap();
        let same = ContactPatch {
            email: Patch::Value("A@B.co".into()),
            ..Default::default()
        };
        let (changed, _) = c
            .apply(same, Timestamp::from_millis(5), &Registry::default())
            .unwrap();
        assert!(changed.is_empty());
        assert_eq!(c.version, 1);
        let rename = ContactPatch {
            first_name: Patch::Value("Ada".into()),
            ..Default::default()
        };
        let (changed, _) = c
            .apply(rename, Timestamp::from_millis(9), &Registry::default())
            .unwrap();
        assert_eq!(changed, vec!["first_name"]);
        assert_eq!((c.version, c.updated_at.millis()), (2, 9));
        let clear = ContactPatch {
            first_name: Patch::Null,
            email: Patch::Null,
            ..Default::default()
        };
        assert_eq!(
            c.clone()
                .apply(clear, Timestamp::from_millis(10), &Registry::default())
                .unwrap_err(),
            ValidationError::IdentifierRequired
        );
    }
}
