//! Activities: notes, calls, emails and tasks on a contact or deal, listed newest first by when
//! they happened (`occurred_at`, which may be backdated).

use crate::{
    contact::{clean, clean_patch},
    error::ValidationError,
    ids::{ActivityId, ContactId, DealId},
    patch::Patch,
    registry::{ReferenceCheck, Registry},
    time::Timestamp,
    JsonMap,
};

pub use crate::object::{ACTIVITY_TYPE_GROUP, ACTIVITY_WRITABLE_FIELDS as WRITABLE_FIELDS};

#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    pub id: ActivityId,
    pub activity_type: String,
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
    pub body: Option<String>,
    pub occurred_at: Timestamp,
    pub custom_fields: JsonMap,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

#[derive(Debug, Clone, Default)]
pub struct ActivityDraft {
    pub activity_type: Option<String>,
    pub contact_id: Option<String>,
    pub deal_id: Option<String>,
    pub body: Option<String>,
    pub occurred_at: Option<String>,
    pub custom_fields: JsonMap,
}

#[derive(Debug, Clone, Default)]
pub struct ActivityPatch {
    pub activity_type: Patch<String>,
    pub contact_id: Patch<String>,
    pub deal_id: Patch<String>,
    pub body: Patch<String>,
    pub occurred_at: Patch<String>,
    pub custom_fields: Option<JsonMap>,
}

fn parse_contact(raw: String) -> Result<ContactId, ValidationError> {
    ContactId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: "contact_id".into(),
        value: raw,
    })
}

fn parse_deal(raw: String) -> Result<DealId, ValidationError> {
    DealId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: "deal_id".into(),
        value: raw,
    })
}

fn parse_time(raw: String) -> Result<Timestamp, ValidationError> {
    Timestamp::parse_rfc3339(raw.trim()).ok_or_else(|| {
        ValidationError::invalid(
            "occurred_at",
            "must be an ISO 8601 timestamp such as 2026-01-02T03:04:05Z",
        )
    })
}

impl Activity {
    pub fn create(
        id: ActivityId,
        now: Timestamp,
        draft: ActivityDraft,
        registry: &Registry,
    ) -> Result<(Activity, Vec<ReferenceCheck>), ValidationError> {
        let activity_type = clean(draft.activity_type)
            .ok_or_else(|| ValidationError::invalid("type", "is required"))?;
        registry.check_enum("type", ACTIVITY_TYPE_GROUP, &activity_type)?;
        let contact_id = clean(draft.contact_id).map(parse_contact).transpose()?;
        let deal_id = clean(draft.deal_id).map(parse_deal).transpose()?;
        let (custom_fields, mut refs) = registry.validate_new(draft.custom_fields)?;
        if let Some(c) = &contact_id {
            refs.push(ReferenceCheck::new("contact_id", c.as_str()));
        }
        if let Some(d) = &deal_id {
            refs.push(ReferenceCheck::new("deal_id", d.as_str()));
        }
        let activity = Activity {
            id,
            activity_type,
            contact_id,
            deal_id,
            // Free text: kept as sent, not trimmed.
            body: draft.body,
            occurred_at: clean(draft.occurred_at)
                .map(parse_time)
                .transpose()?
                .unwrap_or(now),
            custom_fields,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        activity.check_body()?;
        Ok((activity, refs))
    }

    pub fn apply(
        &mut self,
        patch: ActivityPatch,
        now: Timestamp,
        registry: &Registry,
    ) -> Result<(Vec<&'static str>, Vec<ReferenceCheck>), ValidationError> {
        let mut changed = Vec::new();
        let mut refs = Vec::new();
        match clean_patch(patch.activity_type) {
            Patch::Absent => {}
            Patch::Null => return Err(ValidationError::invalid("type", "cannot be empty")),
            Patch::Value(t) => {
                registry.check_enum("type", ACTIVITY_TYPE_GROUP, &t)?;
                if t != self.activity_type {
                    self.activity_type = t;
                    changed.push("type");
                }
            }
        }
        let contact = clean_patch(patch.contact_id).try_map(parse_contact)?;
        if let Patch::Value(c) = &contact {
            refs.push(ReferenceCheck::new("contact_id", c.as_str()));
        }
        if contact.apply_to(&mut self.contact_id) {
            changed.push("contact_id");
        }
        let deal = clean_patch(patch.deal_id).try_map(parse_deal)?;
        if let Patch::Value(d) = &deal {
            refs.push(ReferenceCheck::new("deal_id", d.as_str()));
        }
        if deal.apply_to(&mut self.deal_id) {
            changed.push("deal_id");
        }
        if patch.body.apply_to(&mut self.body) {
            self.check_body()?;
            changed.push("body");
        }
        match clean_patch(patch.occurred_at) {
            Patch::Absent => {}
            Patch::Null => return Err(ValidationError::invalid("occurred_at", "cannot be empty")),
            Patch::Value(raw) => {
                let t = parse_time(raw)?;
                if t != self.occurred_at {
                    self.occurred_at = t;
                    changed.push("occurred_at");
                }
            }
        }
        if let Some(cf) = patch.custom_fields {
            let (cf_changed, custom) = registry.merge(&mut self.custom_fields, cf)?;
            refs.extend(custom);
            if cf_changed {
                changed.push("custom_fields");
            }
        }
        if !changed.is_empty() {
            self.updated_at = now;
            self.version += 1;
        }
        Ok((changed, refs))
    }

    /// Free text, kept as sent, up to [`crate::text::MAX_BODY`] characters.
    fn check_body(&self) -> Result<(), ValidationError> {
        match &self.body {
            Some(body) => crate::text::check_len("body", body, crate::text::MAX_BODY),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::EnumValue;
    use uuid::Uuid;

    fn registry() -> Registry {
        let mut r = Registry::default();
        r.enums.insert(
            ACTIVITY_TYPE_GROUP.into(),
            ["note", "call"]
                .iter()
                .map(|v| EnumValue {
                    value: (*v).into(),
                    label: None,
                })
                .collect(),
        );
        r
    }

    #[test]
    fn type_is_required_and_registered_and_time_defaults_to_now() {
        let id = || ActivityId::from_uuid(Uuid::nil());
        let now = Timestamp::from_millis(1_000);
        assert!(Activity::create(id(), now, ActivityDraft::default(), &registry()).is_err());
        let meeting = ActivityDraft {
            activity_type: Some("meeting".into()),
            ..Default::default()
        };
        assert!(matches!(
            Activity::create(id(), now, meeting, &registry()).unwrap_err(),
            ValidationError::UnknownValue { .. }
        ));
        let (a, _) = Activity::create(
            id(),
            now,
            ActivityDraft {
                activity_type: Some("note".into()),
                ..Default::default()
            },
            &registry(),
        )
        .unwrap();
        assert_eq!(a.occurred_at, now);
    }

    #[test]
    fn occurred_at_can_be_backdated() {
        let draft = ActivityDraft {
            activity_type: Some("call".into()),
            occurred_at: Some("2020-01-02T03:04:05Z".into()),
            ..Default::default()
        };
        let (a, _) = Activity::create(
            ActivityId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(2_000_000_000_000),
            draft,
            &registry(),
        )
        .unwrap();
        assert_eq!(a.occurred_at.to_string(), "2020-01-02T03:04:05.000Z");
    }
}
