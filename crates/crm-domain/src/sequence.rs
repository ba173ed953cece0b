//! Sequences: timed email drips (spec, "Sequence"; decisions §13). A definition
//! `{name, channel, trigger: {event, filter}, exit_when, steps}` is checked here against the
//! registries (conditions reuse the automation condition engine, [`crate::condition`]); the send
//! schedule, the preview document, the recipient rule and the enrollment state machine are pure
//! functions of it. The use cases store enrollments and send; nothing here does I/O.
//!
//! - A step's wait is relative to the previous step; the first step's wait runs before the first
//!   send. Waits 0/3/4/7 days send on days 0, 3, 7 and 14.
//! - An enrollment is `active` until its last step is sent (`completed`) or it ends early
//!   (`exited`, with an [`ExitReason`]). Nothing leaves `completed` or `exited`.

use serde_json::{json, Value};

use crate::{
    condition::{all_match, Condition, Subject},
    error::ValidationError,
    event::EventType,
    ids::{ContactId, EnrollmentId, SequenceId},
    merge,
    registry::{whole_number, Registry},
    rule::{parse_condition, RuleContext},
    time::Timestamp,
};

/// Most steps one sequence may carry, and most conditions in its filter or exit list.
pub const MAX_STEPS: usize = 50;
pub const MAX_CONDITIONS: usize = 50;
/// Longest single wait: one year.
pub const MAX_WAIT_SECONDS: i64 = 366 * 86_400;
/// How many existing records `enroll_existing` enrolls and the preview counts at most.
pub const ENROLL_EXISTING_LIMIT: usize = 500;

/// The unit a step's wait was given in (kept, so the sequence reads back as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitUnit {
    Days,
    Hours,
    Seconds,
}

impl WaitUnit {
    pub const ALL: [WaitUnit; 3] = [WaitUnit::Days, WaitUnit::Hours, WaitUnit::Seconds];

    pub fn key(self) -> &'static str {
        match self {
            WaitUnit::Days => "wait_days",
            WaitUnit::Hours => "wait_hours",
            WaitUnit::Seconds => "wait_seconds",
        }
    }

    pub fn seconds(self) -> i64 {
        match self {
            WaitUnit::Days => 86_400,
            WaitUnit::Hours => 3_600,
            WaitUnit::Seconds => 1,
        }
    }
}

/// One step: wait, then send.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub wait_unit: WaitUnit,
    pub wait: i64,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub text: Option<String>,
    pub template_id: Option<String>,
}

impl Step {
    pub fn wait_seconds(&self) -> i64 {
        self.wait * self.wait_unit.seconds()
    }

    pub fn snapshot(&self) -> Value {
        let mut v = json!({ self.wait_unit.key(): self.wait });
        for (k, val) in [
            ("subject", &self.subject),
            ("body", &self.body),
            ("text", &self.text),
            ("template_id", &self.template_id),
        ] {
            if let Some(val) = val {
                v[k] = json!(val);
            }
        }
        v
    }

    /// The texts whose merge tags are filled at send time.
    pub fn texts(&self) -> Vec<&str> {
        [&self.subject, &self.body, &self.text]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// What enrolls records by itself: an event, and conditions the event's record must meet.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    pub event: EventType,
    pub filter: Vec<Condition>,
}

/// A sequence's definition, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceDef {
    pub name: String,
    /// `None`: contacts are enrolled only directly (`POST /sequences/{id}/enroll`).
    pub trigger: Option<Trigger>,
    pub exit_when: Vec<Condition>,
    pub steps: Vec<Step>,
}

/// A definition as a client sent it, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SequenceDraft {
    pub name: Option<String>,
    pub channel: Option<String>,
    pub trigger: Option<Value>,
    pub exit_when: Option<Value>,
    pub steps: Option<Value>,
}

/// Which records a sequence's enrollments come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceObject {
    Contact,
    Deal,
}

impl SourceObject {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceObject::Contact => "contact",
            SourceObject::Deal => "deal",
        }
    }

    pub fn parse(s: &str) -> Option<SourceObject> {
        match s {
            "contact" => Some(SourceObject::Contact),
            "deal" => Some(SourceObject::Deal),
            _ => None,
        }
    }
}

fn relabel(e: ValidationError, from: &str, to: &str) -> ValidationError {
    let fix = |f: String| match f.strip_prefix(from) {
        Some(rest) => format!("{to}{rest}"),
        None => f,
    };
    match e {
        ValidationError::Invalid { field, detail } => ValidationError::Invalid {
            field: fix(field),
            detail,
        },
        ValidationError::UnknownField {
            field,
            valid_options,
            suggestion,
        } => ValidationError::UnknownField {
            field: fix(field),
            valid_options,
            suggestion,
        },
        ValidationError::UnknownValue {
            field,
            value,
            valid_options,
        } => ValidationError::UnknownValue {
            field: fix(field),
            value,
            valid_options,
        },
        ValidationError::InvalidReference { field, value } => ValidationError::InvalidReference {
            field: fix(field),
            value,
        },
        other => other,
    }
}

fn parse_conditions(
    raw: Option<&Value>,
    label: &str,
    event: EventType,
    ctx: &RuleContext<'_>,
) -> Result<Vec<Condition>, ValidationError> {
    match raw {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= MAX_CONDITIONS => items
            .iter()
            .enumerate()
            .map(|(i, c)| {
                parse_condition(i, c, event, ctx)
                    .map_err(|e| relabel(e, "conditions[", &format!("{label}[")))
            })
            .collect(),
        Some(Value::Array(_)) => Err(ValidationError::invalid(
            label,
            format!("at most {MAX_CONDITIONS} conditions"),
        )),
        Some(_) => Err(ValidationError::invalid(
            label,
            "must be an array of {field, op, value?}",
        )),
    }
}

fn parse_trigger(raw: &Value, ctx: &RuleContext<'_>) -> Result<Option<Trigger>, ValidationError> {
    let obj = match raw {
        Value::Null => return Ok(None),
        Value::Object(obj) => obj,
        _ => {
            return Err(ValidationError::invalid(
                "trigger",
                "must be an object {event, filter?}",
            ))
        }
    };
    if let Some(extra) = obj
        .keys()
        .find(|k| !["event", "filter"].contains(&k.as_str()))
    {
        return Err(ValidationError::UnknownField {
            field: format!("trigger.{extra}"),
            valid_options: vec!["event".into(), "filter".into()],
            suggestion: Some("a trigger is {event, filter}".into()),
        });
    }
    let raw_event = obj
        .get("event")
        .and_then(Value::as_str)
        .ok_or_else(|| ValidationError::invalid("trigger.event", "is required (a string)"))?;
    let event = EventType::parse(raw_event).ok_or_else(|| ValidationError::UnknownValue {
        field: "trigger.event".into(),
        value: raw_event.to_owned(),
        valid_options: EventType::ALL
            .iter()
            .map(|e| e.as_str().to_owned())
            .collect(),
    })?;
    let filter = parse_conditions(obj.get("filter"), "trigger.filter", event, ctx)?;
    Ok(Some(Trigger { event, filter }))
}

fn parse_step(i: usize, raw: &Value) -> Result<Step, ValidationError> {
    let at = |k: &str| format!("steps[{i}].{k}");
    let Value::Object(obj) = raw else {
        return Err(ValidationError::invalid(
            format!("steps[{i}]"),
            "must be an object {wait_days|wait_hours|wait_seconds, subject, body}",
        ));
    };
    const KEYS: [&str; 7] = [
        "wait_days",
        "wait_hours",
        "wait_seconds",
        "subject",
        "body",
        "text",
        "template_id",
    ];
    if let Some(extra) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        let options: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
        let suggestion = crate::suggest::closest(extra, options.iter().map(String::as_str))
            .map(|s| format!("did you mean `{s}`?"));
        return Err(ValidationError::UnknownField {
            field: at(extra),
            valid_options: options,
            suggestion,
        });
    }
    let waits: Vec<WaitUnit> = WaitUnit::ALL
        .into_iter()
        .filter(|u| !matches!(obj.get(u.key()), None | Some(Value::Null)))
        .collect();
    let unit = match waits.as_slice() {
        [unit] => *unit,
        [] => {
            return Err(ValidationError::invalid(
                format!("steps[{i}]"),
                "needs one of wait_days, wait_hours or wait_seconds",
            ))
        }
        _ => {
            return Err(ValidationError::invalid(
                format!("steps[{i}]"),
                "give only one of wait_days, wait_hours or wait_seconds",
            ))
        }
    };
    let wait = whole_number(&obj[unit.key()])
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            ValidationError::invalid(at(unit.key()), "must be a whole number, 0 or more")
        })?;
    if wait.saturating_mul(unit.seconds()) > MAX_WAIT_SECONDS {
        return Err(ValidationError::invalid(
            at(unit.key()),
            "must be at most 366 days",
        ));
    }
    let text = |k: &str| -> Result<Option<String>, ValidationError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => {
                let max = match k {
                    "body" | "text" => crate::text::MAX_BODY,
                    _ => crate::text::MAX_LINE,
                };
                crate::text::check_len(&at(k), s, max)?;
                Ok(Some(s.clone()))
            }
            Some(_) => Err(ValidationError::invalid(at(k), "must be a string")),
        }
    };
    let (subject, body, plain, template_id) = (
        text("subject")?,
        text("body")?,
        text("text")?,
        text("template_id")?,
    );
    if template_id.is_none() {
        if subject.as_deref().is_none_or(|s| s.trim().is_empty()) {
            return Err(ValidationError::invalid(
                at("subject"),
                "is required unless `template_id` is given",
            ));
        }
        if body.as_deref().is_none_or(|s| s.trim().is_empty()) {
            return Err(ValidationError::invalid(
                at("body"),
                "is required unless `template_id` is given",
            ));
        }
    }
    Ok(Step {
        wait_unit: unit,
        wait,
        subject,
        body,
        text: plain,
        template_id,
    })
}

impl SequenceDef {
    /// The event whose records' fields exit conditions read: the trigger's, or a contact's when
    /// the sequence has no trigger.
    pub fn source_event(&self) -> EventType {
        self.trigger
            .as_ref()
            .map_or(EventType::ContactUpdated, |t| t.event)
    }

    pub fn source_object(&self) -> SourceObject {
        if self.source_event().object() == "deal" {
            SourceObject::Deal
        } else {
            SourceObject::Contact
        }
    }

    /// Validates a draft: a name, channel `email`, an optional trigger (one of the five events and
    /// a filter on its records' fields), exit conditions on the same records, and 1 to
    /// [`MAX_STEPS`] steps, each with one wait and a subject and body (or a `template_id`).
    pub fn parse(
        draft: SequenceDraft,
        ctx: &RuleContext<'_>,
    ) -> Result<SequenceDef, ValidationError> {
        let name = draft
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ValidationError::invalid("name", "is required"))?;
        if name.chars().count() > 200 {
            return Err(ValidationError::invalid(
                "name",
                "must be at most 200 characters",
            ));
        }
        if let Some(channel) = draft.channel.as_deref() {
            if channel != "email" {
                return Err(ValidationError::UnknownValue {
                    field: "channel".into(),
                    value: channel.to_owned(),
                    valid_options: vec!["email".into()],
                });
            }
        }
        let trigger = match &draft.trigger {
            None => None,
            Some(raw) => parse_trigger(raw, ctx)?,
        };
        let source_event = trigger
            .as_ref()
            .map_or(EventType::ContactUpdated, |t| t.event);
        let exit_when = parse_conditions(draft.exit_when.as_ref(), "exit_when", source_event, ctx)?;
        let steps = match &draft.steps {
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_STEPS => {
                items.iter().enumerate().map(|(i, s)| parse_step(i, s)).collect::<Result<Vec<_>, _>>()?
            }
            Some(Value::Array(items)) if !items.is_empty() => return Err(ValidationError::invalid("steps", format!("at most {MAX_STEPS} steps"))),
            _ => {
                return Err(ValidationError::invalid(
                    "steps",
                    "is required: an array of one or more {wait_days|wait_hours|wait_seconds, subject, body}",
                ))
            }
        };
        Ok(SequenceDef {
            name,
            trigger,
            exit_when,
            steps,
        })
    }

    /// Reads back a definition the store holds (validated when written); `None`: a corrupt row.
    pub fn from_stored(
        name: String,
        trigger: &Value,
        exit_when: &Value,
        steps: &Value,
    ) -> Option<SequenceDef> {
        let conditions = |v: &Value| -> Option<Vec<Condition>> {
            v.as_array()?
                .iter()
                .map(|c| {
                    let op = crate::automation::ConditionOp::parse(c.get("op")?.as_str()?)?;
                    Some(Condition {
                        field: c.get("field")?.as_str()?.to_owned(),
                        op,
                        value: c.get("value").cloned(),
                    })
                })
                .collect()
        };
        let trigger = match trigger {
            Value::Null => None,
            t => Some(Trigger {
                event: EventType::parse(t.get("event")?.as_str()?)?,
                filter: conditions(t.get("filter")?)?,
            }),
        };
        let steps = steps
            .as_array()?
            .iter()
            .enumerate()
            .map(|(i, s)| parse_step(i, s).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(SequenceDef {
            name,
            trigger,
            exit_when: conditions(exit_when)?,
            steps,
        })
    }

    pub fn trigger_snapshot(&self) -> Value {
        match &self.trigger {
            None => Value::Null,
            Some(t) => {
                json!({"event": t.event.as_str(), "filter": t.filter.iter().map(Condition::snapshot).collect::<Vec<_>>()})
            }
        }
    }

    pub fn exit_when_snapshot(&self) -> Value {
        Value::Array(self.exit_when.iter().map(Condition::snapshot).collect())
    }

    pub fn steps_snapshot(&self) -> Value {
        Value::Array(self.steps.iter().map(Step::snapshot).collect())
    }

    /// The draft this definition was made from, for a PATCH to overlay.
    pub fn draft(&self) -> SequenceDraft {
        SequenceDraft {
            name: Some(self.name.clone()),
            channel: Some("email".into()),
            trigger: Some(self.trigger_snapshot()),
            exit_when: Some(self.exit_when_snapshot()),
            steps: Some(self.steps_snapshot()),
        }
    }

    /// The templates the steps name.
    pub fn template_ids(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter_map(|s| s.template_id.as_deref())
            .collect()
    }

    /// Whether a record (as it stands) meets the trigger filter.
    pub fn filter_matches(&self, record: &Value) -> bool {
        self.trigger
            .as_ref()
            .is_none_or(|t| all_match(&t.filter, &Subject::record(record)))
    }

    /// Whether a source record meets every exit condition (an empty list never exits).
    pub fn exit_matches(&self, record: &Value) -> bool {
        !self.exit_when.is_empty() && all_match(&self.exit_when, &Subject::record(record))
    }

    /// The cumulative schedule: for each step, its wait and its send offset from enrollment.
    pub fn schedule(&self) -> Vec<ScheduledStep> {
        schedule(
            &self
                .steps
                .iter()
                .map(Step::wait_seconds)
                .collect::<Vec<_>>(),
        )
    }
}

/// One line of the schedule (step numbers from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledStep {
    pub step: usize,
    pub wait_seconds: i64,
    pub send_offset_seconds: i64,
}

/// Send offsets from enrollment: each step waits after the previous one.
pub fn schedule(waits: &[i64]) -> Vec<ScheduledStep> {
    let mut offset = 0;
    waits
        .iter()
        .enumerate()
        .map(|(i, w)| {
            offset += w;
            ScheduledStep {
                step: i + 1,
                wait_seconds: *w,
                send_offset_seconds: offset,
            }
        })
        .collect()
}

/// What a sequence would do (decisions §13): the schedule with each step's subject, how many
/// existing records would enroll now, and the merge tags no field provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub schedule: Vec<PreviewStep>,
    /// Capped at [`ENROLL_EXISTING_LIMIT`].
    pub would_enroll_now: usize,
    pub warnings: Vec<String>,
}

/// One step of a [`Preview`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewStep {
    pub at: ScheduledStep,
    /// A template's subject when the step names one, else the step's own.
    pub subject: Option<String>,
}

/// The preview of `def`, with each step's subject (a template's when the step names one:
/// `subjects[i]`).
pub fn preview(
    def: &SequenceDef,
    subjects: &[Option<String>],
    would_enroll_now: usize,
    warnings: &[String],
) -> Preview {
    let schedule = def
        .schedule()
        .into_iter()
        .zip(&def.steps)
        .enumerate()
        .map(|(i, (at, step))| PreviewStep {
            at,
            subject: subjects
                .get(i)
                .cloned()
                .flatten()
                .or_else(|| step.subject.clone()),
        })
        .collect();
    Preview {
        schedule,
        would_enroll_now: would_enroll_now.min(ENROLL_EXISTING_LIMIT),
        warnings: warnings.to_vec(),
    }
}

/// Merge tags of `texts` that no field of the enrolled contact (built-in or custom) or of its
/// company provides, as preview warnings.
pub fn merge_warnings(
    texts: &[&str],
    contact_fields: &Registry,
    company_fields: &Registry,
) -> Vec<String> {
    merge::unknown_tags(texts, merge::CONTACT_FIELDS, contact_fields, company_fields)
        .into_iter()
        .map(|t| {
            format!(
                "merge tag {{{{{t}}}}} matches no contact or company field; it will render empty"
            )
        })
        .collect()
}

/// Who a source record's enrollment sends to: a contact itself, or a deal's
/// `primary_contact_id` (none: not enrolled).
pub fn recipient(object: SourceObject, record: &Value) -> Option<ContactId> {
    let id = match object {
        SourceObject::Contact => record.get("id"),
        SourceObject::Deal => record.get("primary_contact_id"),
    };
    id.and_then(Value::as_str)
        .and_then(|s| ContactId::parse(s).ok())
}

/// A stored sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub id: SequenceId,
    pub def: SequenceDef,
    pub enabled: bool,
    pub enroll_existing: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

impl Sequence {
    /// Whether an event enrolls its record: the sequence is enabled, triggered by this event,
    /// and the record meets the filter and does not already meet the exit conditions.
    pub fn enrolls(&self, event: EventType, record: &Value) -> bool {
        self.enabled
            && self.def.trigger.as_ref().is_some_and(|t| t.event == event)
            && self.def.filter_matches(record)
            && !self.def.exit_matches(record)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnrollmentState {
    Active,
    Completed,
    Exited,
}

impl EnrollmentState {
    pub fn as_str(self) -> &'static str {
        match self {
            EnrollmentState::Active => "active",
            EnrollmentState::Completed => "completed",
            EnrollmentState::Exited => "exited",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            EnrollmentState::Active,
            EnrollmentState::Completed,
            EnrollmentState::Exited,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    ExitCondition,
    SourceDeleted,
    SequenceDisabled,
    SequenceDeleted,
    Unenrolled,
}

impl ExitReason {
    pub const ALL: [ExitReason; 5] = [
        ExitReason::ExitCondition,
        ExitReason::SourceDeleted,
        ExitReason::SequenceDisabled,
        ExitReason::SequenceDeleted,
        ExitReason::Unenrolled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::ExitCondition => "exit_condition",
            ExitReason::SourceDeleted => "source_deleted",
            ExitReason::SequenceDisabled => "sequence_disabled",
            ExitReason::SequenceDeleted => "sequence_deleted",
            ExitReason::Unenrolled => "unenrolled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        ExitReason::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// One contact's way through one sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Enrollment {
    pub id: EnrollmentId,
    pub sequence_id: SequenceId,
    pub contact_id: ContactId,
    pub source_object: SourceObject,
    /// The record whose changes and deletion end the enrollment (the contact, or the deal).
    pub source_id: String,
    pub state: EnrollmentState,
    pub exit_reason: Option<ExitReason>,
    /// Steps sent so far; the index of the next step.
    pub steps_sent: u32,
    /// When the next step is due (`None` once the enrollment ended).
    pub next_send_at: Option<Timestamp>,
    pub enrolled_at: Timestamp,
    pub updated_at: Timestamp,
    pub ended_at: Option<Timestamp>,
}

impl Enrollment {
    /// A new active enrollment; its first step is due after the first wait.
    pub fn start(
        id: EnrollmentId,
        sequence: &Sequence,
        contact_id: ContactId,
        source_object: SourceObject,
        source_id: String,
        now: Timestamp,
    ) -> Enrollment {
        let first_wait = sequence.def.steps.first().map_or(0, Step::wait_seconds);
        Enrollment {
            id,
            sequence_id: sequence.id.clone(),
            contact_id,
            source_object,
            source_id,
            state: EnrollmentState::Active,
            exit_reason: None,
            steps_sent: 0,
            next_send_at: Some(now.plus_millis(first_wait * 1000)),
            enrolled_at: now,
            updated_at: now,
            ended_at: None,
        }
    }

    pub fn is_active(&self) -> bool {
        self.state == EnrollmentState::Active
    }

    /// Ends an active enrollment early; `false` (and no change) when it already ended.
    pub fn exit(&mut self, reason: ExitReason, now: Timestamp) -> bool {
        if !self.is_active() {
            return false;
        }
        self.state = EnrollmentState::Exited;
        self.exit_reason = Some(reason);
        self.next_send_at = None;
        self.updated_at = now;
        self.ended_at = Some(now);
        true
    }

    /// Records that the due step was sent: the next step is due its wait after this one's
    /// scheduled time (so the calendar does not drift with the scheduler's delay), or the
    /// enrollment is `completed` after the last. `false` (no change) when not active.
    pub fn step_sent(&mut self, steps: &[Step], now: Timestamp) -> bool {
        if !self.is_active() {
            return false;
        }
        let scheduled = self.next_send_at.unwrap_or(now);
        self.steps_sent += 1;
        self.updated_at = now;
        match steps.get(self.steps_sent as usize) {
            Some(next) => {
                self.next_send_at = Some(scheduled.plus_millis(next.wait_seconds() * 1000))
            }
            None => {
                self.state = EnrollmentState::Completed;
                self.next_send_at = None;
                self.ended_at = Some(now);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn ctx_parts() -> (Registry, Registry, Vec<String>) {
        (
            Registry::default(),
            Registry::default(),
            vec!["won".to_owned(), "qualified".to_owned()],
        )
    }

    fn parse(v: Value) -> Result<SequenceDef, ValidationError> {
        let (c, d, s) = ctx_parts();
        let ctx = RuleContext {
            contact_registry: &c,
            deal_registry: &d,
            stage_keys: &s,
        };
        let draft = SequenceDraft {
            name: v.get("name").and_then(Value::as_str).map(str::to_owned),
            channel: v.get("channel").and_then(Value::as_str).map(str::to_owned),
            trigger: v.get("trigger").cloned(),
            exit_when: v.get("exit_when").cloned(),
            steps: v.get("steps").cloned(),
        };
        SequenceDef::parse(draft, &ctx)
    }

    fn field_of(e: ValidationError) -> String {
        match e {
            ValidationError::Invalid { field, .. }
            | ValidationError::UnknownField { field, .. }
            | ValidationError::UnknownValue { field, .. } => field,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn days(waits: &[i64]) -> Value {
        Value::Array(
            waits
                .iter()
                .map(|w| json!({"wait_days": w, "subject": "S{{first_name}}", "body": "<p>Hi</p>"}))
                .collect(),
        )
    }

    fn seq(def: SequenceDef) -> Sequence {
        let t = Timestamp::from_millis(0);
        Sequence {
            id: SequenceId::from_uuid(Uuid::from_u128(1)),
            def,
            enabled: true,
            enroll_existing: false,
            created_at: t,
            updated_at: t,
            version: 1,
        }
    }

    #[test]
    fn parses_a_full_definition_and_reads_it_back() {
        let def = parse(json!({
            "name": " Onboarding ", "channel": "email",
            "trigger": {"event": "contact.created", "filter": [{"field": "type", "op": "eq", "value": "lead"}]},
            "exit_when": [{"field": "type", "op": "in", "value": ["customer", "churned"]}],
            "steps": [{"wait_seconds": 0, "subject": "a", "body": "b"}, {"wait_hours": 2, "template_id": "tpl_x"}],
        }))
        .unwrap();
        assert_eq!(def.name, "Onboarding");
        assert_eq!(def.steps[1].wait_seconds(), 7200);
        assert_eq!(def.source_object(), SourceObject::Contact);
        let back = SequenceDef::from_stored(
            def.name.clone(),
            &def.trigger_snapshot(),
            &def.exit_when_snapshot(),
            &def.steps_snapshot(),
        )
        .unwrap();
        assert_eq!(back, def);
        assert_eq!(def.template_ids(), ["tpl_x"]);
    }

    #[test]
    fn step_texts_have_lengths_named_by_position() {
        let long_body = "b".repeat(crate::text::MAX_BODY + 1);
        let long_subject = "s".repeat(crate::text::MAX_LINE + 1);
        let step =
            |subject: &str, body: &str| json!({"wait_days": 1, "subject": subject, "body": body});
        for (steps, field) in [
            (
                json!([step("a", "b"), step("a", "b"), step("a", &long_body)]),
                "steps[2].body",
            ),
            (json!([step(&long_subject, "b")]), "steps[0].subject"),
        ] {
            match parse(json!({"name": "n", "steps": steps})).unwrap_err() {
                ValidationError::Invalid { field: f, .. } => assert_eq!(f, field),
                other => panic!("{other:?}"),
            }
        }
        let max_body = "b".repeat(crate::text::MAX_BODY);
        assert!(parse(json!({"name": "n", "steps": [step("a", &max_body)]})).is_ok());
    }

    #[test]
    fn refuses_bad_definitions_naming_the_field() {
        let cases = [
            (json!({"steps": days(&[0])}), "name"),
            (
                json!({"name": "x", "channel": "sms", "steps": days(&[0])}),
                "channel",
            ),
            (json!({"name": "x"}), "steps"),
            (json!({"name": "x", "steps": []}), "steps"),
            (
                json!({"name": "x", "trigger": {"event": "company.created"}, "steps": days(&[0])}),
                "trigger.event",
            ),
            (
                json!({"name": "x", "trigger": {"event": "contact.created", "when": 1}, "steps": days(&[0])}),
                "trigger.when",
            ),
            (
                json!({"name": "x", "trigger": {"event": "contact.created", "filter": [{"field": "nope", "op": "eq", "value": 1}]}, "steps": days(&[0])}),
                "trigger.filter[0].field",
            ),
            (
                json!({"name": "x", "exit_when": [{"field": "type", "op": "between", "value": 1}], "steps": days(&[0])}),
                "exit_when[0].op",
            ),
            (
                json!({"name": "x", "exit_when": [{"field": "stage", "op": "eq", "value": "won"}], "steps": days(&[0])}),
                "exit_when[0].field",
            ),
            (
                json!({"name": "x", "steps": [{"subject": "a", "body": "b"}]}),
                "steps[0]",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 1, "wait_hours": 1, "subject": "a", "body": "b"}]}),
                "steps[0]",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": -1, "subject": "a", "body": "b"}]}),
                "steps[0].wait_days",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 1.5, "subject": "a", "body": "b"}]}),
                "steps[0].wait_days",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 400, "subject": "a", "body": "b"}]}),
                "steps[0].wait_days",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 1, "body": "b"}]}),
                "steps[0].subject",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 1, "subject": "a"}]}),
                "steps[0].body",
            ),
            (
                json!({"name": "x", "steps": [{"wait_days": 1, "subject": "a", "body": "b", "delay": 1}]}),
                "steps[0].delay",
            ),
        ];
        for (input, field) in cases {
            let err = parse(input.clone()).expect_err(&input.to_string());
            assert_eq!(field_of(err), field, "{input}");
        }
    }

    #[test]
    fn deal_triggers_read_deal_fields_and_send_to_the_primary_contact() {
        let def = parse(json!({
            "name": "x", "trigger": {"event": "deal.stage_changed", "filter": [{"field": "stage", "op": "eq", "value": "qualified"}]},
            "exit_when": [{"field": "stage", "op": "in", "value": ["won", "lost"]}], "steps": days(&[0]),
        }))
        .unwrap();
        assert_eq!(def.source_object(), SourceObject::Deal);
        let contact = ContactId::from_uuid(Uuid::from_u128(7));
        let deal =
            json!({"id": "deal_1", "stage": "qualified", "primary_contact_id": contact.as_str()});
        assert_eq!(recipient(SourceObject::Deal, &deal), Some(contact));
        assert_eq!(
            recipient(
                SourceObject::Deal,
                &json!({"id": "deal_1", "primary_contact_id": null})
            ),
            None
        );
        let s = seq(def);
        assert!(s.enrolls(EventType::DealStageChanged, &deal));
        assert!(!s.enrolls(EventType::DealUpdated, &deal), "another event");
        assert!(
            !s.enrolls(EventType::DealStageChanged, &json!({"stage": "won"})),
            "filter"
        );
        assert!(s.def.exit_matches(&json!({"stage": "lost"})));
        assert!(!s.def.exit_matches(&json!({"stage": "qualified"})));
    }

    #[test]
    fn an_empty_exit_list_never_exits_and_a_record_already_exiting_does_not_enroll() {
        let def = parse(
            json!({"name": "x", "trigger": {"event": "contact.created"}, "steps": days(&[0])}),
        )
        .unwrap();
        assert!(!def.exit_matches(&json!({})));
        let def = parse(json!({"name": "x", "trigger": {"event": "contact.created"}, "exit_when": [{"field": "type", "op": "eq", "value": "customer"}], "steps": days(&[0])})).unwrap();
        let s = seq(def);
        assert!(s.enrolls(EventType::ContactCreated, &json!({"type": "lead"})));
        assert!(!s.enrolls(EventType::ContactCreated, &json!({"type": "customer"})));
        let mut disabled = s.clone();
        disabled.enabled = false;
        assert!(!disabled.enrolls(EventType::ContactCreated, &json!({"type": "lead"})));
    }

    #[test]
    fn waits_are_relative_so_0_3_4_7_days_send_on_days_0_3_7_14() {
        let def = parse(json!({"name": "x", "steps": days(&[0, 3, 4, 7])})).unwrap();
        let offsets: Vec<i64> = def
            .schedule()
            .iter()
            .map(|s| s.send_offset_seconds / 86_400)
            .collect();
        assert_eq!(offsets, [0, 3, 7, 14]);
        let doc = preview(&def, &[], 900, &[]);
        assert_eq!(
            doc.schedule[2],
            PreviewStep {
                at: ScheduledStep {
                    step: 3,
                    wait_seconds: 4 * 86_400,
                    send_offset_seconds: 7 * 86_400
                },
                subject: Some("S{{first_name}}".into())
            }
        );
        assert_eq!(doc.would_enroll_now, 500, "capped");
        let doc = preview(
            &def,
            &[None, Some("From template".into())],
            3,
            &["w".into()],
        );
        assert_eq!(doc.schedule[1].subject.as_deref(), Some("From template"));
        assert_eq!(doc.warnings, ["w"]);
    }

    #[test]
    fn warnings_name_tags_no_field_provides() {
        let w = merge_warnings(
            &[
                "Hi {{first_name}} of {{company.name}}",
                "{{favourite_color}}",
            ],
            &Registry::default(),
            &Registry::default(),
        );
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("{{favourite_color}}"), "{w:?}");
    }

    #[test]
    fn enrollment_walks_the_schedule_then_completes() {
        let s = seq(parse(json!({"name": "x", "steps": days(&[1, 2])})).unwrap());
        let t0 = Timestamp::from_millis(1_000);
        let mut e = Enrollment::start(
            EnrollmentId::from_uuid(Uuid::from_u128(2)),
            &s,
            ContactId::from_uuid(Uuid::from_u128(3)),
            SourceObject::Contact,
            "con_x".into(),
            t0,
        );
        assert_eq!(e.next_send_at, Some(t0.plus_millis(86_400_000)));
        // Sent late: the next step still counts from the scheduled time.
        assert!(e.step_sent(&s.def.steps, t0.plus_millis(90_000_000)));
        assert_eq!(e.next_send_at, Some(t0.plus_millis(3 * 86_400_000)));
        assert!(e.step_sent(&s.def.steps, t0.plus_millis(3 * 86_400_000)));
        assert_eq!(e.state, EnrollmentState::Completed);
        assert_eq!(e.next_send_at, None);
        assert!(!e.step_sent(&s.def.steps, t0), "nothing after completion");
        assert!(!e.exit(ExitReason::Unenrolled, t0), "completed is final");
    }

    #[test]
    fn exit_is_final_and_records_the_reason() {
        let s = seq(parse(json!({"name": "x", "steps": days(&[0])})).unwrap());
        let t0 = Timestamp::from_millis(5);
        let mut e = Enrollment::start(
            EnrollmentId::from_uuid(Uuid::from_u128(2)),
            &s,
            ContactId::from_uuid(Uuid::from_u128(3)),
            SourceObject::Contact,
            "con_x".into(),
            t0,
        );
        assert!(e.exit(ExitReason::SourceDeleted, t0));
        assert_eq!(
            (e.state, e.exit_reason, e.next_send_at, e.ended_at),
            (
                EnrollmentState::Exited,
                Some(ExitReason::SourceDeleted),
                None,
                Some(t0)
            )
        );
        assert!(!e.exit(ExitReason::Unenrolled, t0));
        assert!(!e.step_sent(&s.def.steps, t0));
        assert_eq!(
            e.exit_reason.map(ExitReason::as_str),
            Some("source_deleted")
        );
        for r in ExitReason::ALL {
            assert_eq!(ExitReason::parse(r.as_str()), Some(r));
        }
    }

    proptest! {
        #[test]
        fn offsets_are_the_running_sum_of_waits(waits in proptest::collection::vec(0i64..1_000_000, 1..20)) {
            let s = schedule(&waits);
            prop_assert_eq!(s.len(), waits.len());
            let mut sum = 0;
            for (i, line) in s.iter().enumerate() {
                sum += waits[i];
                prop_assert_eq!(line.step, i + 1);
                prop_assert_eq!(line.send_offset_seconds, sum);
                if i > 0 { prop_assert!(line.send_offset_seconds >= s[i - 1].send_offset_seconds); }
            }
        }

        #[test]
        fn sending_on_time_hits_every_scheduled_offset(waits in proptest::collection::vec(0i64..100_000, 1..10), start in 0i64..1_000_000_000) {
            let steps = Value::Array(waits.iter().map(|w| json!({"wait_seconds": w, "subject": "s", "body": "b"})).collect());
            let s = seq(parse(json!({"name": "x", "steps": steps})).unwrap());
            let t0 = Timestamp::from_millis(start);
            let mut e = Enrollment::start(EnrollmentId::from_uuid(Uuid::from_u128(2)), &s, ContactId::from_uuid(Uuid::from_u128(3)), SourceObject::Contact, "c".into(), t0);
            for line in s.def.schedule() {
                let due = e.next_send_at.expect("active enrollments have a due step");
                prop_assert_eq!(due, t0.plus_millis(line.send_offset_seconds * 1000));
                prop_assert!(e.step_sent(&s.def.steps, due));
            }
            prop_assert_eq!(e.state, EnrollmentState::Completed);
            prop_assert_eq!(e.steps_sent as usize, waits.len());
        }

        #[test]
        fn an_ended_enrollment_never_changes(reason in 0usize..5, sends in 0usize..3) {
            let s = seq(parse(json!({"name": "x", "steps": days(&[0, 1, 2])})).unwrap());
            let t0 = Timestamp::from_millis(0);
            let mut e = Enrollment::start(EnrollmentId::from_uuid(Uuid::from_u128(2)), &s, ContactId::from_uuid(Uuid::from_u128(3)), SourceObject::Contact, "c".into(), t0);
            for _ in 0..sends { e.step_sent(&s.def.steps, t0); }
            prop_assert!(e.exit(ExitReason::ALL[reason], t0));
            let frozen = e.clone();
            prop_assert!(!e.step_sent(&s.def.steps, t0));
            prop_assert!(!e.exit(ExitReason::Unenrolled, t0));
            prop_assert_eq!(e, frozen);
        }
    }
}
