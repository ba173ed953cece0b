//! The four kinds of record and the names of their built-in fields: what a client may write,
//! what merge tags may name, which enum group a `type` belongs to. A leaf module: the records, the
//! registry and the merge tags all refer to it, so none of them needs another for these names.

use crate::{
    error::ValidationError,
    ids::{ActivityId, CompanyId, ContactId, DealId},
};

/// The enum group a contact's `type` must belong to.
pub const CONTACT_TYPE_GROUP: &str = "contact.type";

/// Built-in fields a client may write on a contact.
pub const CONTACT_WRITABLE_FIELDS: [&str; 9] = [
    "first_name",
    "last_name",
    "email",
    "phone",
    "linkedin_url",
    "company_id",
    "type",
    "owner_id",
    "custom_fields",
];

/// Built-in fields a client may write on a company.
pub const COMPANY_WRITABLE_FIELDS: [&str; 4] = ["name", "domain", "owner_id", "custom_fields"];

/// Built-in fields a client may write on a deal (`pipeline_id` is an alias of `pipeline`).
pub const DEAL_WRITABLE_FIELDS: [&str; 11] = [
    "title",
    "pipeline",
    "stage",
    "primary_contact_id",
    "company_id",
    "value_cents",
    "currency",
    "close_date",
    "owner_id",
    "custom_fields",
    "pipeline_id",
];

/// Built-in fields a client may write on an activity.
pub const ACTIVITY_WRITABLE_FIELDS: [&str; 6] = [
    "type",
    "contact_id",
    "deal_id",
    "body",
    "occurred_at",
    "custom_fields",
];

/// Built-in fields of a contact snapshot that tags may name.
pub const CONTACT_TAG_FIELDS: &[&str] = &[
    "id",
    "first_name",
    "last_name",
    "email",
    "phone",
    "linkedin_url",
    "company_id",
    "type",
    "owner_id",
    "created_at",
    "updated_at",
];
/// Built-in fields of a deal snapshot that tags may name.
pub const DEAL_TAG_FIELDS: &[&str] = &[
    "id",
    "title",
    "pipeline",
    "pipeline_id",
    "stage",
    "stage_type",
    "primary_contact_id",
    "company_id",
    "value_cents",
    "currency",
    "close_date",
    "owner_id",
    "created_at",
    "updated_at",
];
/// Built-in fields of a company snapshot (`{{company.<field>}}`).
pub const COMPANY_TAG_FIELDS: &[&str] = &[
    "id",
    "name",
    "domain",
    "owner_id",
    "created_at",
    "updated_at",
];

/// The enum group an activity's `type` must belong to (seeded with note, call, email, task).
pub const ACTIVITY_TYPE_GROUP: &str = "activity.type";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Contact,
    Company,
    Deal,
    Activity,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Contact,
        ObjectKind::Company,
        ObjectKind::Deal,
        ObjectKind::Activity,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Contact => "contact",
            ObjectKind::Company => "company",
            ObjectKind::Deal => "deal",
            ObjectKind::Activity => "activity",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Parses an `object` named in a request; anything else is `unknown_value` listing the four.
    pub fn parse_input(field: &str, s: &str) -> Result<Self, ValidationError> {
        Self::parse(s).ok_or_else(|| ValidationError::UnknownValue {
            field: field.to_owned(),
            value: s.to_owned(),
            valid_options: Self::ALL.iter().map(|o| o.as_str().to_owned()).collect(),
        })
    }

    /// The prefix of this object's ids, from its typed id.
    pub fn id_prefix(self) -> &'static str {
        match self {
            ObjectKind::Contact => ContactId::PREFIX,
            ObjectKind::Company => CompanyId::PREFIX,
            ObjectKind::Deal => DealId::PREFIX,
            ObjectKind::Activity => ActivityId::PREFIX,
        }
    }

    /// Built-in fields a create must carry. A wire schema may show them as optional, so that a
    /// missing one is refused with `validation_failed` naming it rather than a parse error.
    pub fn required_on_create(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Company => &["name"],
            ObjectKind::Deal => &["title"],
            ObjectKind::Contact | ObjectKind::Activity => &[],
        }
    }

    /// The names a custom field of this object may not take: the object's built-in fields (those a
    /// client writes, from the record, and those its snapshot adds, from the merge-tag lists), the
    /// fields every record carries, and the names conditions and merge tags give a meaning of their
    /// own on this object (`previous_stage` on `deal.stage_changed`, `company` for
    /// `{{company.<field>}}`). A bare name in a condition, a tag or a `set_field` means the
    /// built-in first, so a custom field by the same name could never be read that way, and
    /// `GET /schema` would list the name twice.
    pub fn reserved_field_names(self) -> impl Iterator<Item = &'static str> {
        let (writable, snapshot, special): (&[&str], &[&str], &[&str]) = match self {
            ObjectKind::Contact => (&CONTACT_WRITABLE_FIELDS, CONTACT_TAG_FIELDS, &["company"]),
            ObjectKind::Company => (&COMPANY_WRITABLE_FIELDS, COMPANY_TAG_FIELDS, &[]),
            ObjectKind::Deal => (
                &DEAL_WRITABLE_FIELDS,
                DEAL_TAG_FIELDS,
                &["company", "previous_stage"],
            ),
            ObjectKind::Activity => (&ACTIVITY_WRITABLE_FIELDS, &[], &[]),
        };
        RECORD_FIELDS
            .iter()
            .chain(writable)
            .chain(snapshot)
            .chain(special)
            .copied()
    }

    /// Built-in fields whose value must be in an enum group: (field, group).
    pub fn enum_fields(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ObjectKind::Contact => &[("type", CONTACT_TYPE_GROUP)],
            ObjectKind::Activity => &[("type", ACTIVITY_TYPE_GROUP)],
            ObjectKind::Company | ObjectKind::Deal => &[],
        }
    }
}

/// Fields of every record's snapshot that the service sets (`deleted_at` on the objects that are
/// soft-deleted).
const RECORD_FIELDS: [&str; 6] = [
    "id",
    "object",
    "created_at",
    "updated_at",
    "version",
    "deleted_at",
];
