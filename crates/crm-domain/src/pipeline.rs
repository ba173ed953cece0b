//! Pipelines and their ordered stages. The lowest ordinal is the entry stage; `won` and `lost`
//! stages are terminal. Stage keys are unique within a pipeline, not across pipelines.

use crate::{
    error::ValidationError,
    ids::{PipelineId, StageId},
    time::Timestamp,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageType {
    Open,
    Won,
    Lost,
}

impl StageType {
    pub const ALL: [StageType; 3] = [StageType::Open, StageType::Won, StageType::Lost];

    pub fn as_str(self) -> &'static str {
        match self {
            StageType::Open => "open",
            StageType::Won => "won",
            StageType::Lost => "lost",
        }
    }

    pub fn parse(s: &str) -> Option<StageType> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        self != StageType::Open
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub id: StageId,
    pub key: String,
    pub label: String,
    pub stage_type: StageType,
    /// Position in the pipeline, 0-based and contiguous.
    pub ordinal: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub id: PipelineId,
    pub key: String,
    pub name: String,
    pub is_default: bool,
    pub stages: Vec<Stage>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

/// A stage as a client sends it: a plain key, or `{key, label?, type?}`.
#[derive(Debug, Clone, Default)]
pub struct StageDraft {
    pub key: String,
    pub label: Option<String>,
    pub stage_type: Option<String>,
}

/// What `Pipeline::update_stage` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StageUpdate {
    /// Anything: label, type or position.
    pub changed: bool,
    /// The type, which the stage's deals carry too.
    pub type_changed: bool,
}

/// Why `Pipeline::add_stage` refused a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddStageError {
    Invalid(ValidationError),
    /// The pipeline already has a stage with this key: a uniqueness conflict with what is stored
    /// (like a taken pipeline key), not a malformed request; carries the existing stage.
    KeyTaken(Stage),
}

impl From<ValidationError> for AddStageError {
    fn from(e: ValidationError) -> Self {
        AddStageError::Invalid(e)
    }
}

#[derive(Debug, Clone, Default)]
pub struct PipelineDraft {
    pub key: Option<String>,
    pub name: Option<String>,
    pub is_default: bool,
    pub stages: Vec<StageDraft>,
}

/// The stages of the default pipeline of a new workspace (decisions §6).
pub const DEFAULT_STAGES: [(&str, StageType); 5] = [
    ("lead", StageType::Open),
    ("qualified", StageType::Open),
    ("proposal", StageType::Open),
    ("won", StageType::Won),
    ("lost", StageType::Lost),
];
pub const DEFAULT_PIPELINE_KEY: &str = "default";

/// [`check_key`]'s format as a regular expression, for JSON Schemas (a stage key may start with
/// `pl_` as well; the schema is stricter there rather than have two patterns).
pub const KEY_PATTERN: &str = "^(?!pl_)[a-z0-9][a-z0-9_-]{0,63}$";

/// Keys of pipelines and stages: 1-64 of `[a-z0-9_-]`, starting with a letter or digit. A pipeline
/// key may not look like a pipeline id, since both address a pipeline.
fn check_key(field: &str, key: &str) -> Result<(), ValidationError> {
    let ok = !key.is_empty()
        && key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        return Err(ValidationError::invalid(
            field,
            "must be 1-64 characters of lowercase letters, digits, `_` and `-`",
        ));
    }
    if key.starts_with(PipelineId::PREFIX) {
        return Err(ValidationError::invalid(
            field,
            "must not start with `pl_`, which is the prefix of pipeline ids",
        ));
    }
    Ok(())
}

fn parse_stage_type(field: &str, raw: Option<&str>) -> Result<StageType, ValidationError> {
    match raw {
        None => Ok(StageType::Open),
        Some(t) => StageType::parse(t).ok_or_else(|| ValidationError::UnknownValue {
            field: field.to_owned(),
            value: t.to_owned(),
            valid_options: StageType::ALL
                .iter()
                .map(|t| t.as_str().to_owned())
                .collect(),
        }),
    }
}

/// The name of a member of a stage in errors: `stages[1].key` inside a pipeline's `stages`, plain
/// `key` when the stage's members are the body's own (a stage added by `svc_manage_stage`).
fn member(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

impl Stage {
    /// `prefix` is where the stage sits in the request body (`""` when it is the body).
    fn from_draft(prefix: &str, draft: StageDraft, id: StageId) -> Result<Stage, ValidationError> {
        let key = draft.key.trim().to_owned();
        check_key(&member(prefix, "key"), &key)?;
        let stage_type = parse_stage_type(&member(prefix, "type"), draft.stage_type.as_deref())?;
        let label = draft
            .label
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| key.clone());
        crate::text::check_len(&member(prefix, "label"), &label, crate::text::MAX_LINE)?;
        Ok(Stage {
            id,
            key,
            label,
            stage_type,
            ordinal: 0,
        })
    }
}

impl Pipeline {
    /// Validates a new pipeline. `new_stage_id` mints an id per stage.
    pub fn create(
        id: PipelineId,
        now: Timestamp,
        draft: PipelineDraft,
        mut new_stage_id: impl FnMut() -> StageId,
    ) -> Result<Pipeline, ValidationError> {
        let key = draft
            .key
            .map(|k| k.trim().to_owned())
            .ok_or_else(|| ValidationError::invalid("key", "is required"))?;
        check_key("key", &key)?;
        let name = draft
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| key.clone());
        crate::text::check_len("name", &name, crate::text::MAX_LINE)?;
        if draft.stages.is_empty() {
            return Err(ValidationError::invalid(
                "stages",
                "a pipeline needs at least one stage",
            ));
        }
        let mut stages = Vec::with_capacity(draft.stages.len());
        for (i, s) in draft.stages.into_iter().enumerate() {
            let stage = Stage::from_draft(&format!("stages[{i}]"), s, new_stage_id())?;
            if stages
                .iter()
                .any(|existing: &Stage| existing.key == stage.key)
            {
                return Err(ValidationError::invalid(
                    format!("stages[{i}].key"),
                    format!("stage key `{}` appears twice", stage.key),
                ));
            }
            stages.push(stage);
        }
        let mut pipeline = Pipeline {
            id,
            key,
            name,
            is_default: draft.is_default,
            stages,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        pipeline.renumber();
        Ok(pipeline)
    }

    /// The default pipeline every new workspace gets in each mode.
    pub fn default_for_workspace(
        id: PipelineId,
        now: Timestamp,
        new_stage_id: impl FnMut() -> StageId,
    ) -> Pipeline {
        let draft = PipelineDraft {
            key: Some(DEFAULT_PIPELINE_KEY.into()),
            name: Some("Default".into()),
            is_default: true,
            stages: DEFAULT_STAGES
                .iter()
                .map(|(k, t)| StageDraft {
                    key: (*k).into(),
                    label: None,
                    stage_type: Some(t.as_str().into()),
                })
                .collect(),
        };
        match Pipeline::create(id, now, draft, new_stage_id) {
            Ok(p) => p,
            Err(e) => unreachable!("the built-in default pipeline is valid: {e}"),
        }
    }

    fn renumber(&mut self) {
        for (i, s) in self.stages.iter_mut().enumerate() {
            s.ordinal = i as u32;
        }
    }

    /// Records one change (however many edits made it): new `updated_at`, version + 1. The
    /// editing methods leave this to their caller, so a request that edits twice bumps once.
    pub fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
        self.version += 1;
    }

    /// The entry stage: the lowest ordinal.
    pub fn entry_stage(&self) -> &Stage {
        // A pipeline always has at least one stage: `create` and `remove_stage` keep it so.
        &self.stages[0]
    }

    pub fn stage(&self, key: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.key == key)
    }

    pub fn stage_keys(&self) -> Vec<String> {
        self.stages.iter().map(|s| s.key.clone()).collect()
    }

    /// The stage with `key`, or 422 `unknown_value` listing this pipeline's keys.
    pub fn check_stage(&self, field: &str, key: &str) -> Result<&Stage, ValidationError> {
        self.stage(key)
            .ok_or_else(|| ValidationError::UnknownValue {
                field: field.to_owned(),
                value: key.to_owned(),
                valid_options: self.stage_keys(),
            })
    }

    fn position(
        &self,
        field: &str,
        position: Option<i64>,
        len: usize,
    ) -> Result<usize, ValidationError> {
        match position {
            None => Ok(len),
            Some(p) if p >= 0 && (p as usize) <= len => Ok(p as usize),
            Some(_) => Err(ValidationError::invalid(
                field,
                format!("must be from 0 to {len}"),
            )),
        }
    }

    /// Inserts a stage at `position` (default: last). The stage's members are the request body's
    /// own, so errors name `key`, `type` and `position`.
    pub fn add_stage(
        &mut self,
        draft: StageDraft,
        position: Option<i64>,
        id: StageId,
    ) -> Result<(), AddStageError> {
        let stage = Stage::from_draft("", draft, id)?;
        if let Some(existing) = self.stage(&stage.key) {
            return Err(AddStageError::KeyTaken(existing.clone()));
        }
        let at = self.position("position", position, self.stages.len())?;
        self.stages.insert(at, stage);
        self.renumber();
        Ok(())
    }

    /// Changes a stage's label, type or position. A label, type or position equal to the current
    /// one is no change: when nothing changed the caller keeps the version (decisions: a PATCH
    /// that changes nothing keeps the version).
    pub fn update_stage(
        &mut self,
        key: &str,
        label: Option<String>,
        stage_type: Option<String>,
        position: Option<i64>,
    ) -> Result<StageUpdate, ValidationError> {
        let from = self
            .stages
            .iter()
            .position(|s| s.key == key)
            .ok_or_else(|| ValidationError::UnknownValue {
                field: "key".into(),
                value: key.to_owned(),
                valid_options: self.stage_keys(),
            })?;
        let new_type = stage_type
            .map(|t| parse_stage_type("type", Some(&t)))
            .transpose()?;
        let to = match position {
            Some(_) => self.position("position", position, self.stages.len() - 1)?,
            None => from,
        };
        let mut stage = self.stages.remove(from);
        let mut changed = to != from;
        if let Some(label) = label.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()) {
            crate::text::check_len("label", &label, crate::text::MAX_LINE)?;
            changed |= label != stage.label;
            stage.label = label;
        }
        let type_changed = new_type.is_some_and(|t| t != stage.stage_type);
        if let Some(t) = new_type {
            stage.stage_type = t;
        }
        self.stages.insert(to, stage);
        self.renumber();
        Ok(StageUpdate {
            changed: changed || type_changed,
            type_changed,
        })
    }

    /// Removes a stage; the last stage of a pipeline cannot be removed.
    pub fn remove_stage(&mut self, key: &str) -> Result<Stage, ValidationError> {
        let at = self
            .stages
            .iter()
            .position(|s| s.key == key)
            .ok_or_else(|| ValidationError::UnknownValue {
                field: "key".into(),
                value: key.to_owned(),
                valid_options: self.stage_keys(),
            })?;
        if self.stages.len() == 1 {
            return Err(ValidationError::invalid(
                "key",
                "a pipeline keeps at least one stage",
            ));
        }
        let removed = self.stages.remove(at);
        self.renumber();
        Ok(removed)
    }

    pub fn rename(&mut self, name: String) -> Result<bool, ValidationError> {
        let name = name.trim().to_owned();
        if name.is_empty() {
            return Err(ValidationError::invalid("name", "cannot be empty"));
        }
        crate::text::check_len("name", &name, crate::text::MAX_LINE)?;
        if name == self.name {
            return Ok(false);
        }
        self.name = name;
        Ok(true)
    }

    /// Returns whether the flag changed.
    pub fn set_default(&mut self, is_default: bool) -> bool {
        let changed = self.is_default != is_default;
        self.is_default = is_default;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn ids() -> impl FnMut() -> StageId {
        let mut n = 0u128;
        move || {
            n += 1;
            StageId::from_uuid(Uuid::from_u128(n))
        }
    }

    fn draft(stages: &[&str]) -> PipelineDraft {
        PipelineDraft {
            key: Some("sales".into()),
            name: None,
            is_default: false,
            stages: stages
                .iter()
                .map(|k| StageDraft {
                    key: (*k).into(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn pipeline(stages: &[&str]) -> Pipeline {
        Pipeline::create(
            PipelineId::from_uuid(Uuid::from_u128(9)),
            Timestamp::from_millis(0),
            draft(stages),
            ids(),
        )
        .unwrap()
    }

    #[test]
    fn the_default_pipeline_has_the_five_stages() {
        let p = Pipeline::default_for_workspace(
            PipelineId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            ids(),
        );
        assert_eq!(
            p.stage_keys(),
            ["lead", "qualified", "proposal", "won", "lost"]
        );
        assert_eq!(p.stage("won").unwrap().stage_type, StageType::Won);
        assert_eq!(p.stage("lost").unwrap().stage_type, StageType::Lost);
        assert_eq!(p.entry_stage().key, "lead");
        assert!(p.is_default);
    }

    #[test]
    fn plain_string_stages_get_their_key_as_label_and_ordinals() {
        let p = pipeline(&["a", "b"]);
        assert_eq!(p.stages[1].label, "b");
        assert_eq!(
            p.stages.iter().map(|s| s.ordinal).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(p.name, "sales");
    }

    #[test]
    fn invalid_pipelines_are_refused() {
        let id = || PipelineId::from_uuid(Uuid::nil());
        assert!(Pipeline::create(id(), Timestamp::from_millis(0), draft(&[]), ids()).is_err());
        assert!(
            Pipeline::create(id(), Timestamp::from_millis(0), draft(&["a", "a"]), ids()).is_err()
        );
        let mut bad_key = draft(&["a"]);
        bad_key.key = Some("pl_sneaky".into());
        assert!(Pipeline::create(id(), Timestamp::from_millis(0), bad_key, ids()).is_err());
        let mut bad_type = draft(&["a"]);
        bad_type.stages[0].stage_type = Some("closed".into());
        let err = Pipeline::create(id(), Timestamp::from_millis(0), bad_type, ids()).unwrap_err();
        assert!(matches!(err, ValidationError::UnknownValue { .. }));
    }

    #[test]
    fn unknown_stage_lists_the_valid_keys() {
        let err = pipeline(&["a", "b"]).check_stage("stage", "c").unwrap_err();
        assert_eq!(
            err,
            ValidationError::UnknownValue {
                field: "stage".into(),
                value: "c".into(),
                valid_options: vec!["a".into(), "b".into()]
            }
        );
    }

    #[test]
    fn stages_are_added_moved_and_removed_with_contiguous_ordinals() {
        let mut p = pipeline(&["a", "b", "c"]);
        p.add_stage(
            StageDraft {
                key: "x".into(),
                ..Default::default()
            },
            Some(1),
            StageId::from_uuid(Uuid::from_u128(99)),
        )
        .unwrap();
        assert_eq!(p.stage_keys(), ["a", "x", "b", "c"]);
        p.update_stage("a", None, Some("won".into()), Some(3))
            .unwrap();
        assert_eq!(p.stage_keys(), ["x", "b", "c", "a"]);
        assert_eq!(p.stage("a").unwrap().stage_type, StageType::Won);
        p.remove_stage("b").unwrap();
        assert_eq!(
            p.stages
                .iter()
                .map(|s| (s.key.as_str(), s.ordinal))
                .collect::<Vec<_>>(),
            [("x", 0), ("c", 1), ("a", 2)]
        );
        assert!(p
            .add_stage(
                StageDraft {
                    key: "c".into(),
                    ..Default::default()
                },
                None,
                StageId::from_uuid(Uuid::nil())
            )
            .is_err());
        assert!(p.update_stage("x", None, None, Some(9)).is_err());
    }

    #[test]
    fn a_stage_update_that_changes_nothing_says_so() {
        let mut p = pipeline(&["a", "b"]);
        let before = p.clone();
        let none = StageUpdate {
            changed: false,
            type_changed: false,
        };
        assert_eq!(p.update_stage("a", None, None, None).unwrap(), none);
        assert_eq!(
            p.update_stage("a", Some(" a ".into()), None, None).unwrap(),
            none,
            "the same label, trimmed"
        );
        assert_eq!(
            p.update_stage("a", Some("  ".into()), Some("open".into()), Some(0))
                .unwrap(),
            none,
            "a blank label is none"
        );
        assert_eq!(p, before);
        assert_eq!(
            p.update_stage("a", Some("A".into()), None, None).unwrap(),
            StageUpdate {
                changed: true,
                type_changed: false
            }
        );
        assert_eq!(
            p.update_stage("a", None, None, Some(1)).unwrap(),
            StageUpdate {
                changed: true,
                type_changed: false
            }
        );
        assert_eq!(
            p.update_stage("a", None, Some("won".into()), None).unwrap(),
            StageUpdate {
                changed: true,
                type_changed: true
            }
        );
    }

    #[test]
    fn stage_errors_name_the_member_of_the_body() {
        let field = |e: AddStageError| match e {
            AddStageError::Invalid(
                ValidationError::Invalid { field, .. }
                | ValidationError::UnknownValue { field, .. },
            ) => field,
            other => panic!("{other:?}"),
        };
        let mut p = pipeline(&["a"]);
        let add = |p: &mut Pipeline, key: &str, t: Option<&str>| {
            let draft = StageDraft {
                key: key.into(),
                label: None,
                stage_type: t.map(String::from),
            };
            p.add_stage(draft, None, StageId::from_uuid(Uuid::nil()))
        };
        assert_eq!(field(add(&mut p, "Bad Key", None).unwrap_err()), "key");
        assert_eq!(field(add(&mut p, "b", Some("closed")).unwrap_err()), "type");
        let far = p.add_stage(
            StageDraft {
                key: "b".into(),
                ..Default::default()
            },
            Some(9),
            StageId::from_uuid(Uuid::nil()),
        );
        assert_eq!(field(far.unwrap_err()), "position");
        let mut bad = draft(&["a", "Bad Key"]);
        let err = Pipeline::create(
            PipelineId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            bad.clone(),
            ids(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::Invalid { ref field, .. } if field == "stages[1].key"),
            "{err:?}"
        );
        bad.stages[1] = StageDraft {
            key: "b".into(),
            label: None,
            stage_type: Some("closed".into()),
        };
        let err = Pipeline::create(
            PipelineId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            bad,
            ids(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref field, .. } if field == "stages[1].type"),
            "{err:?}"
        );
    }

    #[test]
    fn adding_a_taken_stage_key_is_a_conflict_with_the_existing_stage() {
        let mut p = pipeline(&["a", "b"]);
        let err = p
            .add_stage(
                StageDraft {
                    key: " b ".into(),
                    ..Default::default()
                },
                None,
                StageId::from_uuid(Uuid::nil()),
            )
            .unwrap_err();
        assert_eq!(err, AddStageError::KeyTaken(p.stages[1].clone()));
        assert_eq!(p.stage_keys(), ["a", "b"]);
    }

    #[test]
    fn the_last_stage_stays() {
        let mut p = pipeline(&["only"]);
        assert!(p.remove_stage("only").is_err());
    }
}
