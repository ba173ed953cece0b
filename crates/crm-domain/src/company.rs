//! Companies: a name, an optional domain (not unique), custom fields.

use crate::{
    contact::{clean, clean_patch},
    error::ValidationError,
    ids::{CompanyId, UserId},
    owner,
    patch::Patch,
    registry::{ReferenceCheck, Registry},
    time::Timestamp,
    JsonMap,
};

pub use crate::object::COMPANY_WRITABLE_FIELDS as WRITABLE_FIELDS;

#[derive(Debug, Clone, PartialEq)]
pub struct Company {
    pub id: CompanyId,
    pub name: String,
    pub domain: Option<String>,
    /// The user of the workspace who owns the company.
    pub owner_id: Option<UserId>,
    pub custom_fields: JsonMap,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
    pub deleted_at: Option<Timestamp>,
    /// Set when the company was merged into another (decisions §18): a tombstone.
    pub merged_into: Option<CompanyId>,
}

#[derive(Debug, Clone, Default)]
pub struct CompanyDraft {
    pub name: Option<String>,
    pub domain: Option<String>,
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
}

#[derive(Debug, Clone, Default)]
pub struct CompanyPatch {
    pub name: Patch<String>,
    pub domain: Patch<String>,
    pub owner_id: Patch<String>,
    pub custom_fields: Option<JsonMap>,
}

/// A company's domain as it is stored, compared and upserted on (decisions §24, "Upsert,
/// corrected"): lower-cased; a scheme, path, query, port and trailing dot stripped; a leading
/// `www.` dropped; internationalised names in ASCII (IDNA). `https://WWW.Acme.io:443/about` is
/// `acme.io`.
pub fn normalise_domain(raw: String) -> Result<String, ValidationError> {
    let invalid = || ValidationError::invalid("domain", "must be a domain such as example.com");
    let trimmed = raw.trim();
    let rest = match trimmed.split_once("://") {
        Some((_, rest)) => rest,
        None => trimmed,
    };
    let host = rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .rsplit('@')
        .next()
        .unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    let host = host.trim_end_matches('.');
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == ':') {
        return Err(invalid());
    }
    let ascii = idna::domain_to_ascii(host).map_err(|_| invalid())?;
    let ascii = ascii.strip_prefix("www.").unwrap_or(&ascii).to_owned();
    if ascii.is_empty() {
        return Err(invalid());
    }
    Ok(ascii)
}

impl Company {
    pub fn create(
        id: CompanyId,
        now: Timestamp,
        draft: CompanyDraft,
        registry: &Registry,
    ) -> Result<(Company, Vec<ReferenceCheck>), ValidationError> {
        let name =
            clean(draft.name).ok_or_else(|| ValidationError::invalid("name", "is required"))?;
        let domain = clean(draft.domain).map(normalise_domain).transpose()?;
        let (custom_fields, mut refs) = registry.validate_new(draft.custom_fields)?;
        let owner_id = owner::from_draft(draft.owner_id, &mut refs)?;
        let company = Company {
            id,
            name,
            domain,
            owner_id,
            custom_fields,
            created_at: now,
            updated_at: now,
            version: 1,
            deleted_at: None,
            merged_into: None,
        };
        company.check_lines(None)?;
        Ok((company, refs))
    }

    pub fn apply(
        &mut self,
        patch: CompanyPatch,
        now: Timestamp,
        registry: &Registry,
    ) -> Result<(Vec<&'static str>, Vec<ReferenceCheck>), ValidationError> {
        let mut changed = Vec::new();
        let mut refs = Vec::new();
        match clean_patch(patch.name) {
            Patch::Absent => {}
            Patch::Null => return Err(ValidationError::invalid("name", "cannot be empty")),
            Patch::Value(name) => {
                if name != self.name {
                    self.name = name;
                    changed.push("name");
                }
            }
        }
        if clean_patch(patch.domain)
            .try_map(normalise_domain)?
            .apply_to(&mut self.domain)
        {
            changed.push("domain");
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
        if !changed.is_empty() {
            self.updated_at = now;
            self.version += 1;
        }
        Ok((changed, refs))
    }

    /// Single-line text at most [`crate::text::MAX_LINE`] characters, all or only the `changed`.
    fn check_lines(&self, changed: Option<&[&'static str]>) -> Result<(), ValidationError> {
        crate::text::check_lines(
            &[
                ("name", Some(&self.name)),
                ("domain", self.domain.as_deref()),
            ],
            changed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn domains_are_normalised_once() {
        let n = |s: &str| normalise_domain(s.into());
        assert_eq!(n("ACME.io").unwrap(), "acme.io");
        assert_eq!(n("https://WWW.Acme.io:443/about?x#y").unwrap(), "acme.io");
        assert_eq!(n("www.acme.io.").unwrap(), "acme.io");
        assert_eq!(n("bücher.de").unwrap(), "xn--bcher-kva.de");
        assert!(n("not a domain").is_err());
        assert!(n("https://").is_err());
    }

    #[test]
    fn name_is_required_and_domain_lowercased() {
        let id = CompanyId::from_uuid(Uuid::from_u128(1));
        let err = Company::create(
            id.clone(),
            Timestamp::from_millis(0),
            CompanyDraft::default(),
            &Registry::default(),
        )
        .unwrap_err();
        assert_eq!(err, ValidationError::invalid("name", "is required"));
        let draft = CompanyDraft {
            name: Some("Acme".into()),
            domain: Some("ACME.io".into()),
            ..Default::default()
        };
        let (c, _) =
            Company::create(id, Timestamp::from_millis(0), draft, &Registry::default()).unwrap();
        assert_eq!(c.domain.as_deref(), Some("acme.io"));
    }

    #[test]
    fn name_cannot_be_cleared() {
        let id = CompanyId::from_uuid(Uuid::from_u128(1));
        let draft = CompanyDraft {
            name: Some("Acme".into()),
            ..Default::default()
        };
        let (mut c, _) =
            Company::create(id, Timestamp::from_millis(0), draft, &Registry::default()).unwrap();
        let patch = CompanyPatch {
            name: Patch::Null,
            ..Default::default()
        };
        assert!(c
            .apply(patch, Timestamp::from_millis(1), &Registry::default())
            .is_err());
    }
}
