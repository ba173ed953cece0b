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

use serde_json::Value;

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
    /// The contact was merged into one already enrolled in the sequence (decisions §24).
    Merged,
    /// The contact or the source record was erased (decisions §25).
    Erased,
}

impl ExitReason {
    pub const ALL: [ExitReason; 7] = [
        ExitReason::ExitCondition,
        ExitReason::SourceDeleted,
        ExitReason::SequenceDisabled,
        ExitReason::SequenceDeleted,
        ExitReason::Unenrolled,
        ExitReason::Merged,
        ExitReason::Erased,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::ExitCondition => "exit_condition",
            ExitReason::SourceDeleted => "source_deleted",
            ExitReason::SequenceDisabled => "sequence_disabled",
            ExitReason::SequenceDeleted => "sequence_deleted",
            ExitReason::Unenrolled => "unenrolled",
            ExitReason::Merged => "merged",
            ExitReason::Erased => "erased",
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
mod tests;
