//! Sequence bodies: the sequence (trigger, exit conditions, steps) and its enrollments. The
//! trigger and step types are also the schemas of the create and update bodies, which the engine
//! parses.

use crm_domain::sequence::{
    Enrollment, Preview, Sequence, Step, Trigger, WaitUnit, MAX_WAIT_SECONDS,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

use super::{opt_ts, ts, versioned, ConditionBody};

/// What enrolls records by itself.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Trigger")]
#[schemars(deny_unknown_fields)] // crm_domain::sequence refuses other keys
pub struct TriggerBody {
    /// contact.created, contact.updated, deal.created, deal.updated or deal.stage_changed.
    pub event: String,
    /// Conditions `{field, op, value}` on the event's record, combined with AND.
    pub filter: Option<Vec<ConditionBody>>,
}

impl From<&Trigger> for TriggerBody {
    fn from(t: &Trigger) -> Self {
        TriggerBody {
            event: t.event.as_str().to_owned(),
            filter: Some(t.filter.iter().map(ConditionBody::from).collect()),
        }
    }
}

/// What `crm_domain::sequence` asks of a step beyond each field's type: exactly one wait given
/// (not null; null reads as absent), each wait at most 366 days, and a subject and body that
/// are not blank unless a `template_id` is given.
fn step_rules(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for unit in WaitUnit::ALL {
            if let Some(wait) = props.get_mut(unit.key()).and_then(Value::as_object_mut) {
                wait.insert("minimum".into(), 0.into());
                wait.insert("maximum".into(), (MAX_WAIT_SECONDS / unit.seconds()).into());
            }
        }
    }
    let waits: Vec<Value> = WaitUnit::ALL
        .iter()
        .map(|u| json!({"required": [u.key()], "properties": {u.key(): {"type": "integer"}}}))
        .collect();
    schema.insert("oneOf".into(), waits.into());
    let text = json!({"type": "string", "pattern": crate::schema::NON_BLANK});
    schema.insert(
        "anyOf".into(),
        json!([
            {"required": ["template_id"], "properties": {"template_id": {"type": "string"}}},
            {"required": ["subject", "body"], "properties": {"subject": text, "body": text}},
        ]),
    );
}

/// One step: wait (exactly one of the three), then send.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
#[schemars(rename = "Step")]
#[schemars(deny_unknown_fields)] // crm_domain::sequence refuses other keys
#[schemars(transform = step_rules)]
pub struct StepBody {
    /// Days to wait after the previous step (the first step: after enrollment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_days: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_hours: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<i64>,
    /// The subject; `{{field}}` merge tags allowed. Required unless `template_id` is given.
    #[schemars(length(max = 1024))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The HTML body; merge tag values are HTML-escaped. Required unless `template_id` is given.
    #[schemars(length(max = 100000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A plain-text part; derived from `body` when absent.
    #[schemars(length(max = 100000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A `tpl_` template supplying subject, body and text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_id: Option<String>,
}

impl From<&Step> for StepBody {
    fn from(s: &Step) -> Self {
        let mut body = StepBody {
            subject: s.subject.clone(),
            body: s.body.clone(),
            text: s.text.clone(),
            template_id: s.template_id.clone(),
            ..Default::default()
        };
        *match s.wait_unit {
            WaitUnit::Days => &mut body.wait_days,
            WaitUnit::Hours => &mut body.wait_hours,
            WaitUnit::Seconds => &mut body.wait_seconds,
        } = Some(s.wait);
        body
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Sequence")]
pub struct SequenceBody {
    /// `seq_` prefix.
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub channel: &'static str,
    pub trigger: Option<TriggerBody>,
    pub exit_when: Vec<ConditionBody>,
    pub steps: Vec<StepBody>,
    pub enabled: bool,
    pub enroll_existing: bool,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(SequenceBody);

impl From<&Sequence> for SequenceBody {
    fn from(s: &Sequence) -> Self {
        SequenceBody {
            id: s.id.as_str().to_owned(),
            object: "sequence",
            name: s.def.name.clone(),
            channel: "email",
            trigger: s.def.trigger.as_ref().map(TriggerBody::from),
            exit_when: s.def.exit_when.iter().map(ConditionBody::from).collect(),
            steps: s.def.steps.iter().map(StepBody::from).collect(),
            enabled: s.enabled,
            enroll_existing: s.enroll_existing,
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
            version: s.version,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "EnrollmentSource")]
pub struct SourceBody {
    /// `contact` or `deal`.
    pub object: &'static str,
    pub id: String,
}

/// One contact's way through a sequence.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Enrollment")]
pub struct EnrollmentBody {
    /// `enr_` prefix.
    pub id: String,
    pub object: &'static str,
    pub sequence_id: String,
    /// The recipient.
    pub contact_id: String,
    /// The record whose changes and deletion end the enrollment.
    pub source: SourceBody,
    /// `active`, `completed` or `exited`.
    pub state: &'static str,
    /// When exited: exit_condition, source_deleted, sequence_disabled, sequence_deleted, unenrolled, merged or erased.
    pub exit_reason: Option<&'static str>,
    pub steps_sent: u32,
    pub next_send_at: Option<String>,
    pub enrolled_at: String,
    pub updated_at: String,
    pub ended_at: Option<String>,
}

impl From<&Enrollment> for EnrollmentBody {
    fn from(e: &Enrollment) -> Self {
        EnrollmentBody {
            id: e.id.as_str().to_owned(),
            object: "sequence_enrollment",
            sequence_id: e.sequence_id.as_str().to_owned(),
            contact_id: e.contact_id.as_str().to_owned(),
            source: SourceBody {
                object: e.source_object.as_str(),
                id: e.source_id.clone(),
            },
            state: e.state.as_str(),
            exit_reason: e.exit_reason.map(|r| r.as_str()),
            steps_sent: e.steps_sent,
            next_send_at: opt_ts(e.next_send_at),
            enrolled_at: ts(e.enrolled_at),
            updated_at: ts(e.updated_at),
            ended_at: opt_ts(e.ended_at),
        }
    }
}

/// An enrollment ended by `DELETE`: the enrollment, marked deleted.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "UnenrolledEnrollment")]
pub struct UnenrolledBody {
    #[serde(flatten)]
    pub enrollment: EnrollmentBody,
    pub deleted: bool,
}

/// One line of a sequence's preview schedule.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "ScheduleLine")]
pub struct ScheduleLineBody {
    /// From 1.
    pub step: u32,
    pub wait_seconds: i64,
    /// Seconds from enrollment to this step's send.
    pub send_offset_seconds: i64,
    pub subject: Option<String>,
}

/// What a sequence would do: its schedule, who would enroll now, and merge-tag warnings.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "SequencePreview")]
pub struct PreviewBody {
    pub object: &'static str,
    pub schedule: Vec<ScheduleLineBody>,
    /// Existing records that match the trigger filter, not the exit conditions, have a recipient
    /// and are not enrolled yet; capped at 500.
    pub would_enroll_now: u32,
    /// Merge tags that no field provides (they render empty).
    pub warnings: Vec<String>,
}

impl From<&Preview> for PreviewBody {
    fn from(p: &Preview) -> Self {
        PreviewBody {
            object: "sequence_preview",
            schedule: p
                .schedule
                .iter()
                .map(|s| ScheduleLineBody {
                    step: u32::try_from(s.at.step).unwrap_or(u32::MAX),
                    wait_seconds: s.at.wait_seconds,
                    send_offset_seconds: s.at.send_offset_seconds,
                    subject: s.subject.clone(),
                })
                .collect(),
            would_enroll_now: u32::try_from(p.would_enroll_now).unwrap_or(u32::MAX),
            warnings: p.warnings.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{
        automation::ConditionOp,
        condition::Condition,
        sequence::{EnrollmentState, ExitReason, SequenceDef, SourceObject},
        ContactId, EnrollmentId, EventType, SequenceId, Timestamp,
    };
    use serde_json::{json, Value};

    /// The domain's `Sequence::snapshot()`, which this body replaces.
    fn old_sequence(x: &Sequence) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "sequence",
            "name": x.def.name,
            "channel": "email",
            "trigger": x.def.trigger.as_ref().map(|_| json!({
                "event": "contact.created",
                "filter": [{"field": "type", "op": ConditionOp::ALL[0].as_str(), "value": "lead"}],
            })),
            "exit_when": [{"field": "email", "op": ConditionOp::ALL[5].as_str()}],
            "steps": [
                {"wait_days": 2, "subject": "s", "body": "<p>b</p>"},
                {"wait_hours": 2, "template_id": "tpl_x"},
                {"wait_seconds": 2, "subject": "t", "body": "<p>b</p>"},
            ],
            "enabled": x.enabled,
            "enroll_existing": x.enroll_existing,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
        })
    }

    /// The domain's `Enrollment::snapshot()`, which this body replaces.
    fn old_enrollment(x: &Enrollment) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "sequence_enrollment",
            "sequence_id": x.sequence_id.as_str(),
            "contact_id": x.contact_id.as_str(),
            "source": {"object": x.source_object.as_str(), "id": x.source_id},
            "state": x.state.as_str(),
            "exit_reason": x.exit_reason.map(ExitReason::as_str),
            "steps_sent": x.steps_sent,
            "next_send_at": x.next_send_at.map(|t| t.to_string()),
            "enrolled_at": x.enrolled_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "ended_at": x.ended_at.map(|t| t.to_string()),
        })
    }

    #[test]
    fn serializes_as_the_sequence_snapshots_did() {
        let step = |wait_unit, subject: Option<&str>, template_id: Option<&str>| Step {
            wait_unit,
            wait: 2,
            subject: subject.map(Into::into),
            body: subject.map(|_| "<p>b</p>".into()),
            text: None,
            template_id: template_id.map(Into::into),
        };
        let mut s = Sequence {
            id: SequenceId::from_uuid(uuid::Uuid::from_u128(1)),
            def: SequenceDef {
                name: "drip".into(),
                trigger: Some(Trigger {
                    event: EventType::ContactCreated,
                    filter: vec![Condition::new(
                        "type",
                        ConditionOp::ALL[0],
                        Some(json!("lead")),
                    )],
                }),
                exit_when: vec![Condition::new("email", ConditionOp::ALL[5], None)],
                steps: vec![
                    step(WaitUnit::Days, Some("s"), None),
                    step(WaitUnit::Hours, None, Some("tpl_x")),
                    step(WaitUnit::Seconds, Some("t"), None),
                ],
            },
            enabled: true,
            enroll_existing: false,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_000),
            version: 1,
        };
        crate::bodies::assert_same_json(&SequenceBody::from(&s), &old_sequence(&s));
        s.def.trigger = None;
        crate::bodies::assert_same_json(&SequenceBody::from(&s), &old_sequence(&s));
        let mut e = Enrollment {
            id: EnrollmentId::from_uuid(uuid::Uuid::from_u128(2)),
            sequence_id: s.id.clone(),
            contact_id: ContactId::from_uuid(uuid::Uuid::from_u128(3)),
            source_object: SourceObject::Deal,
            source_id: "deal_x".into(),
            state: EnrollmentState::Active,
            exit_reason: None,
            steps_sent: 1,
            next_send_at: Some(Timestamp::from_millis(1_700_000_000_000)),
            enrolled_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_000),
            ended_at: None,
        };
        crate::bodies::assert_same_json(&EnrollmentBody::from(&e), &old_enrollment(&e));
        e.exit(
            ExitReason::ALL[0],
            Timestamp::from_millis(1_700_000_000_001),
        );
        crate::bodies::assert_same_json(&EnrollmentBody::from(&e), &old_enrollment(&e));
    }

    #[test]
    fn the_preview_serializes_as_the_domain_document_did() {
        use crm_domain::sequence::{PreviewStep, ScheduledStep};
        let p = Preview {
            schedule: vec![PreviewStep {
                at: ScheduledStep {
                    step: 1,
                    wait_seconds: 60,
                    send_offset_seconds: 60,
                },
                subject: None,
            }],
            would_enroll_now: 3,
            warnings: vec!["w".into()],
        };
        let old = json!({
            "object": "sequence_preview",
            "schedule": [{"step": 1, "wait_seconds": 60, "send_offset_seconds": 60, "subject": null}],
            "would_enroll_now": 3,
            "warnings": ["w"],
        });
        crate::bodies::assert_same_json(&PreviewBody::from(&p), &old);
    }
}
