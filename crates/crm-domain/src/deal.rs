//! Deals: an opportunity in a pipeline stage, with money in integer minor units.

use crate::{
    contact::{clean, clean_patch},
    error::ValidationError,
    ids::{CompanyId, ContactId, DealId, PipelineId, UserId},
    owner,
    patch::Patch,
    pipeline::{Pipeline, StageType},
    registry::{ReferenceCheck, Registry},
    time::{Date, Timestamp},
    JsonMap,
};

pub use crate::object::DEAL_WRITABLE_FIELDS as WRITABLE_FIELDS;

#[derive(Debug, Clone, PartialEq)]
pub struct Deal {
    pub id: DealId,
    pub title: String,
    pub pipeline_id: PipelineId,
    /// Kept with the deal (pipeline keys never change) so a read needs no join.
    pub pipeline_key: String,
    pub stage: String,
    /// The type of the current stage, kept in step when a stage's type changes.
    pub stage_type: StageType,
    pub primary_contact_id: Option<ContactId>,
    pub company_id: Option<CompanyId>,
    pub value_cents: Option<i64>,
    pub currency: Option<String>,
    pub close_date: Option<Date>,
    /// The user of the workspace who owns the deal.
    pub owner_id: Option<UserId>,
    pub custom_fields: JsonMap,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
    pub deleted_at: Option<Timestamp>,
}

/// A create request; the pipeline is resolved by the caller (default when not given).
#[derive(Debug, Clone, Default)]
pub struct DealDraft {
    pub title: Option<String>,
    pub stage: Option<String>,
    pub primary_contact_id: Option<String>,
    pub company_id: Option<String>,
    pub value_cents: Option<i64>,
    pub currency: Option<String>,
    pub close_date: Option<String>,
    pub owner_id: Option<String>,
    pub custom_fields: JsonMap,
}

#[derive(Debug, Clone, Default)]
pub struct DealPatch {
    pub title: Patch<String>,
    pub stage: Patch<String>,
    pub primary_contact_id: Patch<String>,
    pub company_id: Patch<String>,
    pub value_cents: Patch<i64>,
    pub currency: Patch<String>,
    pub close_date: Patch<String>,
    pub owner_id: Patch<String>,
    pub custom_fields: Option<JsonMap>,
}

/// What an update did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DealChange {
    pub changed: Vec<&'static str>,
    pub references: Vec<ReferenceCheck>,
    /// `Some(previous stage key)` when the deal moved to another stage (or pipeline).
    pub previous_stage: Option<String>,
}

fn parse_currency(raw: String) -> Result<String, ValidationError> {
    let code = raw.trim().to_uppercase();
    if code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()) {
        Ok(code)
    } else {
        Err(ValidationError::invalid(
            "currency",
            "must be a three-letter currency code such as USD",
        ))
    }
}

fn parse_date(raw: String) -> Result<Date, ValidationError> {
    Date::parse(raw.trim())
        .ok_or_else(|| ValidationError::invalid("close_date", "must be a date (YYYY-MM-DD)"))
}

fn check_value(v: i64) -> Result<i64, ValidationError> {
    if v < 0 {
        return Err(ValidationError::invalid(
            "value_cents",
            "must not be negative",
        ));
    }
    Ok(v)
}

fn parse_contact(raw: String) -> Result<ContactId, ValidationError> {
    ContactId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: "primary_contact_id".into(),
        value: raw,
    })
}

fn parse_company(raw: String) -> Result<CompanyId, ValidationError> {
    CompanyId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
        field: "company_id".into(),
        value: raw,
    })
}

impl Deal {
    /// Validates a new deal in `pipeline`. Returns it, the references to check, and whether the
    /// client named the stage (which makes the create emit `deal.stage_changed` too).
    pub fn create(
        id: DealId,
        now: Timestamp,
        draft: DealDraft,
        pipeline: &Pipeline,
        registry: &Registry,
    ) -> Result<(Deal, Vec<ReferenceCheck>, bool), ValidationError> {
        let title =
            clean(draft.title).ok_or_else(|| ValidationError::invalid("title", "is required"))?;
        crate::text::check_len("title", &title, crate::text::MAX_LINE)?;
        let stage_given = clean(draft.stage);
        let stage = match &stage_given {
            Some(key) => pipeline.check_stage("stage", key)?,
            None => pipeline.entry_stage(),
        };
        let primary_contact_id = clean(draft.primary_contact_id)
            .map(parse_contact)
            .transpose()?;
        let company_id = clean(draft.company_id).map(parse_company).transpose()?;
        let (custom_fields, mut refs) = registry.validate_new(draft.custom_fields)?;
        if let Some(c) = &primary_contact_id {
            refs.push(ReferenceCheck::new("primary_contact_id", c.as_str()));
        }
        if let Some(c) = &company_id {
            refs.push(ReferenceCheck::new("company_id", c.as_str()));
        }
        let owner_id = owner::from_draft(draft.owner_id, &mut refs)?;
        let deal = Deal {
            id,
            title,
            pipeline_id: pipeline.id.clone(),
            pipeline_key: pipeline.key.clone(),
            stage: stage.key.clone(),
            stage_type: stage.stage_type,
            primary_contact_id,
            company_id,
            value_cents: draft.value_cents.map(check_value).transpose()?,
            currency: clean(draft.currency).map(parse_currency).transpose()?,
            close_date: clean(draft.close_date).map(parse_date).transpose()?,
            owner_id,
            custom_fields,
            created_at: now,
            updated_at: now,
            version: 1,
            deleted_at: None,
        };
        Ok((deal, refs, stage_given.is_some()))
    }

    /// Applies a partial update. `pipeline` is the pipeline the deal ends up in: its current one,
    /// or the one the update moves it to (then, without a stage, it lands in the entry stage).
    pub fn apply(
        &mut self,
        patch: DealPatch,
        pipeline: &Pipeline,
        now: Timestamp,
        registry: &Registry,
    ) -> Result<DealChange, ValidationError> {
        let mut change = DealChange::default();
        match clean_patch(patch.title) {
            Patch::Absent => {}
            Patch::Null => return Err(ValidationError::invalid("title", "cannot be empty")),
            Patch::Value(t) if t != self.title => {
                self.title = t;
                change.changed.push("title");
            }
            Patch::Value(_) => {}
        }
        let moves_pipeline = pipeline.id != self.pipeline_id;
        let target_stage = match clean_patch(patch.stage) {
            Patch::Null => {
                return Err(ValidationError::invalid(
                    "stage",
                    "cannot be empty; a deal is always in a stage",
                ))
            }
            Patch::Value(key) => Some(pipeline.check_stage("stage", &key)?),
            Patch::Absent if moves_pipeline => Some(pipeline.entry_stage()),
            Patch::Absent => None,
        };
        if moves_pipeline {
            self.pipeline_id = pipeline.id.clone();
            self.pipeline_key = pipeline.key.clone();
            change.changed.push("pipeline");
        }
        if let Some(stage) = target_stage {
            if moves_pipeline || stage.key != self.stage {
                change.previous_stage = Some(std::mem::replace(&mut self.stage, stage.key.clone()));
                self.stage_type = stage.stage_type;
                change.changed.push("stage");
            }
        }
        let contact = clean_patch(patch.primary_contact_id).try_map(parse_contact)?;
        if let Patch::Value(c) = &contact {
            change
                .references
                .push(ReferenceCheck::new("primary_contact_id", c.as_str()));
        }
        if contact.apply_to(&mut self.primary_contact_id) {
            change.changed.push("primary_contact_id");
        }
        let company = clean_patch(patch.company_id).try_map(parse_company)?;
        if let Patch::Value(c) = &company {
            change
                .references
                .push(ReferenceCheck::new("company_id", c.as_str()));
        }
        if company.apply_to(&mut self.company_id) {
            change.changed.push("company_id");
        }
        if patch
            .value_cents
            .try_map(check_value)?
            .apply_to(&mut self.value_cents)
        {
            change.changed.push("value_cents");
        }
        if clean_patch(patch.currency)
            .try_map(parse_currency)?
            .apply_to(&mut self.currency)
        {
            change.changed.push("currency");
        }
        if clean_patch(patch.close_date)
            .try_map(parse_date)?
            .apply_to(&mut self.close_date)
        {
            change.changed.push("close_date");
        }
        if owner::apply(patch.owner_id, &mut self.owner_id, &mut change.references)? {
            change.changed.push(owner::FIELD);
        }
        if let Some(cf) = patch.custom_fields {
            let (cf_changed, refs) = registry.merge(&mut self.custom_fields, cf)?;
            change.references.extend(refs);
            if cf_changed {
                change.changed.push("custom_fields");
            }
        }
        if change.changed.contains(&"title") {
            crate::text::check_len("title", &self.title, crate::text::MAX_LINE)?;
        }
        if !change.changed.is_empty() {
            self.updated_at = now;
            self.version += 1;
        }
        Ok(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ids::StageId,
        pipeline::{PipelineDraft, StageDraft},
    };
    use uuid::Uuid;

    fn pipeline(key: &str, stages: &[&str]) -> Pipeline {
        let mut n = 0;
        let pipeline_id = PipelineId::from_uuid(Uuid::from_u128(key.bytes().map(u128::from).sum()));
        let draft = PipelineDraft {
            key: Some(key.into()),
            stages: stages
                .iter()
                .map(|k| StageDraft {
                    key: (*k).into(),
                    label: None,
                    stage_type: (*k == "won").then(|| "won".into()),
                })
                .collect(),
            ..Default::default()
        };
        Pipeline::create(pipeline_id, Timestamp::from_millis(0), draft, || {
            n += 1;
            StageId::from_uuid(Uuid::from_u128(n))
        })
        .unwrap()
    }

    fn create(
        draft: DealDraft,
        p: &Pipeline,
    ) -> Result<(Deal, Vec<ReferenceCheck>, bool), ValidationError> {
        Deal::create(
            DealId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            draft,
            p,
            &Registry::default(),
        )
    }

    #[test]
    fn without_a_stage_a_deal_enters_the_first_stage() {
        let p = pipeline("sales", &["new", "won"]);
        let (d, _, stage_given) = create(
            DealDraft {
                title: Some("Big".into()),
                ..Default::default()
            },
            &p,
        )
        .unwrap();
        assert_eq!(
            (d.stage.as_str(), d.stage_type, stage_given),
            ("new", StageType::Open, false)
        );
        let (d, _, stage_given) = create(
            DealDraft {
                title: Some("Big".into()),
                stage: Some("won".into()),
                ..Default::default()
            },
            &p,
        )
        .unwrap();
        assert_eq!(
            (d.stage.as_str(), d.stage_type, stage_given),
            ("won", StageType::Won, true)
        );
    }

    #[test]
    fn create_rules() {
        let p = pipeline("sales", &["new"]);
        assert_eq!(
            create(DealDraft::default(), &p).unwrap_err(),
            ValidationError::invalid("title", "is required")
        );
        let bad_stage = DealDraft {
            title: Some("x".into()),
            stage: Some("nope".into()),
            ..Default::default()
        };
        assert!(
            matches!(create(bad_stage, &p).unwrap_err(), ValidationError::UnknownValue { valid_options, .. } if valid_options == ["new"])
        );
        let bad_currency = DealDraft {
            title: Some("x".into()),
            currency: Some("dollars".into()),
            ..Default::default()
        };
        assert!(create(bad_currency, &p).is_err());
        let usd = DealDraft {
            title: Some("x".into()),
            currency: Some("usd".into()),
            close_date: Some("2026-12-31".into()),
            value_cents: Some(100),
            ..Default::default()
        };
        let (d, _, _) = create(usd, &p).unwrap();
        assert_eq!(
            (d.currency.as_deref(), d.close_date.unwrap().to_string()),
            (Some("USD"), "2026-12-31".to_owned())
        );
        let negative = DealDraft {
            title: Some("x".into()),
            value_cents: Some(-1),
            ..Default::default()
        };
        assert!(create(negative, &p).is_err());
    }

    #[test]
    fn moving_stage_reports_the_previous_one() {
        let p = pipeline("sales", &["new", "won"]);
        let (mut d, _, _) = create(
            DealDraft {
                title: Some("x".into()),
                ..Default::default()
            },
            &p,
        )
        .unwrap();
        let change = d
            .apply(
                DealPatch {
                    stage: Patch::Value("won".into()),
                    ..Default::default()
                },
                &p,
                Timestamp::from_millis(5),
                &Registry::default(),
            )
            .unwrap();
        assert_eq!(change.previous_stage.as_deref(), Some("new"));
        assert_eq!(change.changed, ["stage"]);
        assert_eq!((d.stage_type, d.version), (StageType::Won, 2));
        let same = d
            .apply(
                DealPatch {
                    stage: Patch::Value("won".into()),
                    ..Default::default()
                },
                &p,
                Timestamp::from_millis(6),
                &Registry::default(),
            )
            .unwrap();
        assert_eq!(same, DealChange::default());
    }

    #[test]
    fn changing_pipeline_without_a_stage_lands_in_its_entry_stage() {
        let a = pipeline("a", &["new", "won"]);
        let b = pipeline("b", &["won", "intake"]);
        let (mut d, _, _) = create(
            DealDraft {
                title: Some("x".into()),
                stage: Some("won".into()),
                ..Default::default()
            },
            &a,
        )
        .unwrap();
        let change = d
            .apply(
                DealPatch::default(),
                &b,
                Timestamp::from_millis(5),
                &Registry::default(),
            )
            .unwrap();
        assert_eq!((d.pipeline_key.as_str(), d.stage.as_str()), ("b", "won"));
        assert_eq!(
            change.previous_stage.as_deref(),
            Some("won"),
            "same key, another pipeline: still a move"
        );
        assert_eq!(change.changed, ["pipeline", "stage"]);
        assert!(d
            .apply(
                DealPatch {
                    stage: Patch::Value("new".into()),
                    ..Default::default()
                },
                &b,
                Timestamp::from_millis(6),
                &Registry::default()
            )
            .is_err());
    }
}
