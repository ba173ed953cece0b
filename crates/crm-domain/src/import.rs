//! Bulk imports (decisions §20, §23, §24): what an import is, how a CSV header names the fields
//! its columns fill, and how one CSV record becomes a record's draft. Reading the file and
//! writing the records are crm-app's; this module only turns text into drafts, deterministically.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{
    company::normalise_domain,
    email::Email,
    error::ValidationError,
    history::Author,
    ids::ImportId,
    registry::{DataType, FieldDef, ObjectKind, Registry},
    suggest,
    time::Timestamp,
    CompanyDraft, CompanyPatch, ContactDraft, ContactPatch, DealDraft, JsonMap, Patch,
};

/// Where an import is in its life. `Receiving` is internal: the file is still arriving and the
/// import is not shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportStatus {
    Receiving,
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// A dry run's end: every row checked, nothing written.
    Validated,
}

impl ImportStatus {
    pub const ALL: [ImportStatus; 7] = [
        ImportStatus::Receiving,
        ImportStatus::Queued,
        ImportStatus::Running,
        ImportStatus::Completed,
        ImportStatus::Failed,
        ImportStatus::Cancelled,
        ImportStatus::Validated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ImportStatus::Receiving => "receiving",
            ImportStatus::Queued => "queued",
            ImportStatus::Running => "running",
            ImportStatus::Completed => "completed",
            ImportStatus::Failed => "failed",
            ImportStatus::Cancelled => "cancelled",
            ImportStatus::Validated => "validated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the import has ended (nothing more will be written).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            ImportStatus::Completed
                | ImportStatus::Failed
                | ImportStatus::Cancelled
                | ImportStatus::Validated
        )
    }
}

/// What a row whose key (a contact's email, a company's domain) is already taken does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDuplicate {
    Skip,
    Update,
    /// The row fails with `conflict` (the default, decisions §23).
    #[default]
    Error,
}

impl OnDuplicate {
    pub const ALL: [OnDuplicate; 3] = [OnDuplicate::Skip, OnDuplicate::Update, OnDuplicate::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            OnDuplicate::Skip => "skip",
            OnDuplicate::Update => "update",
            OnDuplicate::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn parse_input(field: &str, s: &str) -> Result<Self, ValidationError> {
        Self::parse(s).ok_or_else(|| ValidationError::UnknownValue {
            field: field.to_owned(),
            value: s.to_owned(),
            valid_options: Self::ALL.iter().map(|v| v.as_str().to_owned()).collect(),
        })
    }
}

/// The objects an import may fill.
pub const IMPORT_OBJECTS: [ObjectKind; 3] =
    [ObjectKind::Contact, ObjectKind::Company, ObjectKind::Deal];

/// What a CSV column fills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A built-in field, by its name.
    Field(&'static str),
    /// A registered custom field, by its key.
    Custom(String),
    /// `company.domain`: the company with this domain (contacts and deals).
    CompanyDomain,
    /// `primary_contact.email`: the contact with this email (deals).
    PrimaryContactEmail,
}

impl Target {
    pub fn name(&self) -> String {
        match self {
            Target::Field(f) => (*f).to_owned(),
            Target::Custom(k) => format!("custom_fields.{k}"),
            Target::CompanyDomain => COMPANY_DOMAIN.to_owned(),
            Target::PrimaryContactEmail => PRIMARY_CONTACT_EMAIL.to_owned(),
        }
    }

    /// Reads a stored target name back; `None` for a name no object has.
    pub fn parse(object: ObjectKind, name: &str) -> Option<Target> {
        if let Some(key) = name.strip_prefix("custom_fields.") {
            return Some(Target::Custom(key.to_owned()));
        }
        if name == COMPANY_DOMAIN && object != ObjectKind::Company {
            return Some(Target::CompanyDomain);
        }
        if name == PRIMARY_CONTACT_EMAIL && object == ObjectKind::Deal {
            return Some(Target::PrimaryContactEmail);
        }
        builtins(object)
            .iter()
            .find(|f| **f == name)
            .map(|f| Target::Field(f))
    }
}

const COMPANY_DOMAIN: &str = "company.domain";
const PRIMARY_CONTACT_EMAIL: &str = "primary_contact.email";

/// The built-in fields a column may fill, per object (`custom_fields` is one column per key).
fn builtins(object: ObjectKind) -> &'static [&'static str] {
    match object {
        ObjectKind::Contact => &[
            "first_name",
            "last_name",
            "email",
            "phone",
            "linkedin_url",
            "company_id",
            "type",
            "owner_id",
        ],
        ObjectKind::Company => &["name", "domain", "owner_id"],
        ObjectKind::Deal => &[
            "title",
            "pipeline",
            "stage",
            "primary_contact_id",
            "company_id",
            "value_cents",
            "currency",
            "close_date",
            "owner_id",
        ],
        ObjectKind::Activity => &[],
    }
}

/// Every target name a column of `object` may have, for `valid_options`.
pub fn target_names(object: ObjectKind, registry: &Registry) -> Vec<String> {
    let mut names: Vec<String> = builtins(object).iter().map(|f| (*f).to_owned()).collect();
    match object {
        ObjectKind::Contact => names.push(COMPANY_DOMAIN.to_owned()),
        ObjectKind::Deal => {
            names.push(COMPANY_DOMAIN.to_owned());
            names.push(PRIMARY_CONTACT_EMAIL.to_owned());
        }
        _ => {}
    }
    names.extend(
        registry
            .fields
            .iter()
            .filter(|f| f.object == object)
            .map(|f| format!("custom_fields.{}", f.key)),
    );
    names
}

/// The targets of the header's columns, in order: each column's name, or what `mapping` renames
/// it to. An unknown target is `unknown_field` (with `valid_options` and a `suggestion`); a
/// mapping naming no column, or two columns filling one target, `validation_failed`.
pub fn resolve_targets(
    object: ObjectKind,
    header: &[String],
    mapping: &BTreeMap<String, String>,
    registry: &Registry,
) -> Result<Vec<Target>, ValidationError> {
    if let Some(missing) = mapping.keys().find(|k| !header.contains(k)) {
        return Err(ValidationError::invalid(
            format!("mapping.{missing}"),
            "names no column of the CSV header",
        ));
    }
    let valid = target_names(object, registry);
    let mut targets: Vec<Target> = Vec::with_capacity(header.len());
    for column in header {
        let name = mapping.get(column).unwrap_or(column).trim();
        let target = Target::parse(object, name).filter(|t| match t {
            Target::Custom(key) => registry
                .field(key)
                .is_some_and(|f: &FieldDef| f.object == object),
            _ => true,
        });
        let Some(target) = target else {
            let suggestion = suggest::closest(name, valid.iter().map(String::as_str))
                .map(|s| format!("did you mean `{s}`? (or rename the column with `mapping`)"));
            return Err(ValidationError::UnknownField {
                field: name.to_owned(),
                valid_options: valid,
                suggestion,
            });
        };
        if targets.contains(&target) {
            return Err(ValidationError::invalid(
                name,
                "two columns fill this field; rename or drop one",
            ));
        }
        targets.push(target);
    }
    Ok(targets)
}

/// One CSV record read against the targets: the built-in fields set (an empty cell sets
/// nothing), the custom fields converted by their type, and the references by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportRow {
    pub fields: Vec<(&'static str, String)>,
    pub custom_fields: JsonMap,
    /// The normalised domain of `company.domain`.
    pub company_domain: Option<String>,
    /// The normalised email of `primary_contact.email`.
    pub contact_email: Option<Email>,
}

impl ImportRow {
    /// Reads `cells` (one CSV record) as `targets` say. A record with more cells than the
    /// header is `validation_failed`; missing trailing cells are empty.
    pub fn read(
        targets: &[Target],
        cells: &[&str],
        registry: &Registry,
    ) -> Result<ImportRow, ValidationError> {
        if cells.len() > targets.len() {
            return Err(ValidationError::invalid(
                "row",
                format!(
                    "has {} cells; the header has {} columns",
                    cells.len(),
                    targets.len()
                ),
            ));
        }
        let mut row = ImportRow::default();
        for (target, cell) in targets.iter().zip(cells) {
            if cell.trim().is_empty() {
                continue;
            }
            match target {
                Target::Field(name) => row.fields.push((name, (*cell).to_owned())),
                Target::Custom(key) => {
                    let def = registry.field(key).ok_or_else(|| {
                        ValidationError::invalid(
                            format!("custom_fields.{key}"),
                            "is no longer registered",
                        )
                    })?;
                    row.custom_fields
                        .insert(key.clone(), cell_value(def, cell)?);
                }
                Target::CompanyDomain => {
                    row.company_domain =
                        Some(normalise_domain((*cell).to_owned()).map_err(|_| {
                            ValidationError::invalid(COMPANY_DOMAIN, "is not a domain")
                        })?);
                }
                Target::PrimaryContactEmail => {
                    row.contact_email = Some(Email::parse(cell).ok_or_else(|| {
                        ValidationError::invalid(
                            PRIMARY_CONTACT_EMAIL,
                            "is not a valid e-mail address",
                        )
                    })?);
                }
            }
        }
        Ok(row)
    }

    fn take(&self, name: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|(f, _)| *f == name)
            .map(|(_, v)| v.clone())
    }

    /// The key a contact row is deduplicated on: its email, normalised; `None` when it has none
    /// (or one that is not an address, which the create then refuses).
    pub fn email_key(&self) -> Option<Email> {
        self.take("email").and_then(|e| Email::parse(&e))
    }

    /// The key a company row is deduplicated on: its domain, normalised.
    pub fn domain_key(&self) -> Option<String> {
        self.take("domain").and_then(|d| normalise_domain(d).ok())
    }

    pub fn contact_draft(&self) -> ContactDraft {
        ContactDraft {
            first_name: self.take("first_name"),
            last_name: self.take("last_name"),
            email: self.take("email"),
            phone: self.take("phone"),
            linkedin_url: self.take("linkedin_url"),
            company_id: self.take("company_id"),
            contact_type: self.take("type"),
            owner_id: self.take("owner_id"),
            custom_fields: self.custom_fields.clone(),
        }
    }

    /// The row as a PATCH of a matched contact: the cells set are set, empty ones untouched.
    pub fn contact_patch(&self) -> ContactPatch {
        let set = |name: &str| self.take(name).map_or(Patch::Absent, Patch::Value);
        ContactPatch {
            first_name: set("first_name"),
            last_name: set("last_name"),
            email: set("email"),
            phone: set("phone"),
            linkedin_url: set("linkedin_url"),
            company_id: set("company_id"),
            contact_type: set("type"),
            owner_id: set("owner_id"),
            custom_fields: (!self.custom_fields.is_empty()).then(|| self.custom_fields.clone()),
        }
    }

    pub fn company_draft(&self) -> CompanyDraft {
        CompanyDraft {
            name: self.take("name"),
            domain: self.take("domain"),
            owner_id: self.take("owner_id"),
            custom_fields: self.custom_fields.clone(),
        }
    }

    pub fn company_patch(&self) -> CompanyPatch {
        let set = |name: &str| self.take(name).map_or(Patch::Absent, Patch::Value);
        CompanyPatch {
            name: set("name"),
            domain: set("domain"),
            owner_id: set("owner_id"),
            custom_fields: (!self.custom_fields.is_empty()).then(|| self.custom_fields.clone()),
        }
    }

    /// The row as a deal's draft, and the pipeline it names (the default when `None`).
    pub fn deal_draft(&self) -> Result<(DealDraft, Option<String>), ValidationError> {
        let value_cents = match self.take("value_cents") {
            None => None,
            Some(raw) => Some(raw.trim().parse::<i64>().map_err(|_| {
                ValidationError::invalid("value_cents", "expected an integer amount in cents")
            })?),
        };
        let draft = DealDraft {
            title: self.take("title"),
            stage: self.take("stage"),
            primary_contact_id: self.take("primary_contact_id"),
            company_id: self.take("company_id"),
            value_cents,
            currency: self.take("currency"),
            close_date: self.take("close_date"),
            owner_id: self.take("owner_id"),
            custom_fields: self.custom_fields.clone(),
        };
        Ok((draft, self.take("pipeline")))
    }
}

/// A cell as the JSON value of a custom field of `def`'s type (decisions §23): numbers in JSON
/// syntax, booleans `true/false/1/0/yes/no`, multiselect values separated by `;`, other types
/// as text (the field's own check then validates it: dates `YYYY-MM-DD`, emails, URLs, enums).
pub fn cell_value(def: &FieldDef, cell: &str) -> Result<Value, ValidationError> {
    let field = format!("custom_fields.{}", def.key);
    let cell = cell.trim();
    Ok(match def.data_type {
        DataType::Number | DataType::Currency => {
            match serde_json::from_str::<serde_json::Number>(cell) {
                Ok(n) => Value::Number(n),
                Err(_) => {
                    return Err(ValidationError::invalid(
                        field,
                        format!("expected a number, got `{cell}`"),
                    ))
                }
            }
        }
        DataType::Boolean => match cell.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Value::Bool(true),
            "false" | "0" | "no" => Value::Bool(false),
            _ => {
                return Err(ValidationError::invalid(
                    field,
                    "expected true, false, 1, 0, yes or no",
                ))
            }
        },
        DataType::Multiselect => Value::Array(
            cell.split(';')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| Value::String(v.to_owned()))
                .collect(),
        ),
        _ => Value::String(cell.to_owned()),
    })
}

/// Counts of an import's rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportCounts {
    pub rows_total: i64,
    pub rows_done: i64,
    pub created: i64,
    pub updated: i64,
    pub skipped: i64,
    pub failed: i64,
}

impl ImportCounts {
    /// Adds the counts of one chunk.
    pub fn add(&mut self, other: &ImportCounts) {
        self.rows_done += other.rows_done;
        self.created += other.created;
        self.updated += other.updated;
        self.skipped += other.skipped;
        self.failed += other.failed;
    }
}

/// An import: its settings, progress and outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub id: ImportId,
    pub object: ObjectKind,
    pub status: ImportStatus,
    pub on_duplicate: OnDuplicate,
    pub dry_run: bool,
    /// The target of each CSV column, in order.
    pub targets: Vec<Target>,
    pub counts: ImportCounts,
    /// Stored chunks of the file (each whole CSV records), and how many were processed.
    pub chunks_total: i64,
    pub chunks_done: i64,
    /// Who created it, through which transport and request: its history entries' author.
    pub author: Author,
    /// Why it failed (the problem document, as stored), when it did.
    pub error: Option<Value>,
    /// The CSV record at which the file stops being readable (invalid UTF-8, an unclosed quote),
    /// with the reason: the import fails there once the rows before it are written.
    pub malformed: Option<(i64, String)>,
    pub idempotency_key: Option<String>,
    /// SHA-256 of the file's bytes (hex) with the request's query: what a replay must match.
    pub fingerprint: Option<String>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

impl Import {
    /// A new import, receiving its file.
    pub fn new(
        id: ImportId,
        object: ObjectKind,
        on_duplicate: OnDuplicate,
        dry_run: bool,
        targets: Vec<Target>,
        author: Author,
        now: Timestamp,
    ) -> Import {
        Import {
            id,
            object,
            status: ImportStatus::Receiving,
            on_duplicate,
            dry_run,
            targets,
            counts: ImportCounts::default(),
            chunks_total: 0,
            chunks_done: 0,
            author,
            error: None,
            malformed: None,
            idempotency_key: None,
            fingerprint: None,
            created_at: now,
            finished_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::EnumValue;

    fn registry() -> Registry {
        let mut r = Registry::default();
        for (key, t) in [
            ("score", DataType::Number),
            ("vip", DataType::Boolean),
            ("tags", DataType::Multiselect),
        ] {
            r.fields
                .push(FieldDef::new(ObjectKind::Contact, key, None, t, None, false).unwrap());
        }
        r.enums.insert(
            "contact.tags".into(),
            vec![EnumValue::new("a", None).unwrap()],
        );
        r
    }

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn header_names_and_mapping_resolve_to_targets() {
        let mapping = BTreeMap::from([("E-mail".to_owned(), "email".to_owned())]);
        let t = resolve_targets(
            ObjectKind::Contact,
            &header(&[
                "first_name",
                "E-mail",
                "custom_fields.score",
                "company.domain",
            ]),
            &mapping,
            &registry(),
        )
        .unwrap();
        assert_eq!(
            t,
            vec![
                Target::Field("first_name"),
                Target::Field("email"),
                Target::Custom("score".into()),
                Target::CompanyDomain
            ]
        );
    }

    #[test]
    fn an_unknown_target_names_the_options_and_a_suggestion() {
        let err = resolve_targets(
            ObjectKind::Contact,
            &header(&["emial"]),
            &BTreeMap::new(),
            &registry(),
        )
        .unwrap_err();
        let ValidationError::UnknownField {
            field,
            valid_options,
            suggestion,
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(field, "emial");
        assert!(valid_options.contains(&"custom_fields.vip".to_owned()));
        assert!(suggestion.unwrap().contains("`email`"));
        // primary_contact.email is a deal's, not a contact's.
        assert!(resolve_targets(
            ObjectKind::Contact,
            &header(&["primary_contact.email"]),
            &BTreeMap::new(),
            &registry()
        )
        .is_err());
        assert!(resolve_targets(
            ObjectKind::Contact,
            &header(&["email", "email"]),
            &BTreeMap::new(),
            &registry()
        )
        .is_err());
    }

    #[test]
    fn cells_convert_by_the_field_type() {
        let r = registry();
        let t = resolve_targets(
            ObjectKind::Contact,
            &header(&[
                "email",
                "custom_fields.score",
                "custom_fields.vip",
                "custom_fields.tags",
                "phone",
            ]),
            &BTreeMap::new(),
            &r,
        )
        .unwrap();
        let row = ImportRow::read(&t, &["A@x.io", "2.5", "yes", "a; b", ""], &r).unwrap();
        assert_eq!(row.custom_fields["score"], serde_json::json!(2.5));
        assert_eq!(row.custom_fields["vip"], Value::Bool(true));
        assert_eq!(row.custom_fields["tags"], serde_json::json!(["a", "b"]));
        assert_eq!(row.email_key().unwrap().as_str(), "a@x.io");
        assert_eq!(
            row.contact_draft().phone,
            None,
            "an empty cell sets nothing"
        );
        assert!(ImportRow::read(&t, &["a@x.io", "many"], &r).is_err());
        assert!(ImportRow::read(&t, &["a", "1", "1", "a", "1", "extra"], &r).is_err());
    }
}
