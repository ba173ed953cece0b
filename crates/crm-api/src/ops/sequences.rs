//! Sequences: `/sequences`, their preview, direct enrollment and enrollments (spec, "Sequence";
//! decisions §13, §17).

use crm_app::{sequences::SequencePatch, Scope};
use crm_domain::sequence::SequenceDraft;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::handler;
use crate::{
    bodies::{
        ConditionBody, DeletedBody, EnrollmentBody, ListBody, PreviewBody, SequenceBody, StepBody,
        TriggerBody, UnenrolledBody,
    },
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
};

/// A sequence to create.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SequenceCreate {
    #[schemars(required, length(max = 200), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// `email` (the default and only channel).
    pub channel: Option<String>,
    /// `{event, filter}`; without a trigger, contacts are enrolled only with POST /sequences/{id}/enroll.
    #[schemars(with = "Option<TriggerBody>")]
    pub trigger: Option<Value>,
    /// Conditions on the source record, combined with AND (use `op: in` for OR on one field):
    /// an enrollment ends when they all hold.
    #[schemars(with = "Option<Vec<ConditionBody>>", length(max = crm_domain::sequence::MAX_CONDITIONS))]
    pub exit_when: Option<Value>,
    /// One or more steps.
    #[schemars(with = "Option<Vec<StepBody>>", required, length(min = 1, max = crm_domain::sequence::MAX_STEPS))]
    pub steps: Option<Value>,
    /// Default true.
    pub enabled: Option<bool>,
    /// When true, existing records matching the trigger are enrolled at creation (the first 500).
    pub enroll_existing: Option<bool>,
}

/// Fields to change; the sequence that results is validated like a new one.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SequenceUpdate {
    #[schemars(length(max = 200), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    pub channel: Option<String>,
    /// `null` removes the trigger.
    #[schemars(with = "Option<TriggerBody>")]
    pub trigger: Option<Value>,
    #[schemars(with = "Option<Vec<ConditionBody>>", length(max = crm_domain::sequence::MAX_CONDITIONS))]
    pub exit_when: Option<Value>,
    #[schemars(with = "Option<Vec<StepBody>>", length(min = 1, max = crm_domain::sequence::MAX_STEPS))]
    pub steps: Option<Value>,
    /// `false` ends every active enrollment (`sequence_disabled`).
    pub enabled: Option<bool>,
}

/// A direct enrollment.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnrollIn {
    /// The `con_` id of a contact with an email address.
    #[schemars(required, pattern(crm_domain::ContactId::PATTERN))]
    pub contact_id: Option<String>,
}

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

handler!(list(api, caller, input) {
    let page = api.app.list_sequences(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<SequenceBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: SequenceCreate = body::parse(input.body.as_ref(), None)?;
    let draft = SequenceDraft { name: c.name, channel: c.channel, trigger: c.trigger, exit_when: c.exit_when, steps: c.steps };
    let seq = api.app.create_sequence(caller, draft, c.enabled.unwrap_or(true), c.enroll_existing.unwrap_or(false)).await?;
    Ok(Reply::versioned(&SequenceBody::from(&seq)))
});

handler!(get(api, caller, input) {
    let seq = api.app.get_sequence(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&SequenceBody::from(&seq)))
});

handler!(update(api, caller, input) {
    let raw = input.body.as_ref();
    let u: SequenceUpdate = body::parse(raw, None)?;
    // `trigger: null` removes the trigger; an absent `trigger` keeps it.
    let trigger = match raw.and_then(|b| b.get("trigger")) {
        Some(Value::Null) => Some(Value::Null),
        _ => u.trigger,
    };
    let patch = SequencePatch { name: u.name, channel: u.channel, trigger, exit_when: u.exit_when, steps: u.steps, enabled: u.enabled };
    let seq = api.app.update_sequence(caller, input.path_param("id"), patch).await?;
    Ok(Reply::versioned(&SequenceBody::from(&seq)))
});

handler!(delete(api, caller, input) {
    let id = api.app.delete_sequence(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(id.as_str(), "sequence")))
});

handler!(preview(api, caller, input) {
    let preview = api.app.preview_sequence(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&PreviewBody::from(&preview)))
});

handler!(enroll(api, caller, input) {
    let b: EnrollIn = body::parse(input.body.as_ref(), None)?;
    let done = api.app.enroll_contact(caller, input.path_param("id"), b.contact_id).await?;
    let reply = Reply::serialized(&EnrollmentBody::from(&done.enrollment));
    Ok(if done.created { reply } else { reply.with_status(200) })
});

handler!(enrollments(api, caller, input) {
    let page = api.app.list_sequence_enrollments(caller, input.path_param("id"), input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<EnrollmentBody>::of(page)))
});

handler!(unenroll(api, caller, input) {
    let e = api.app.unenroll_contact(caller, input.path_param("id"), input.path_param("enrollment_id")).await?;
    Ok(Reply::serialized(&UnenrolledBody { enrollment: EnrollmentBody::from(&e), deleted: true }))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("sequences");
    let write = Scope::write("sequences");
    vec![
        Operation {
            name: "svc_list_sequences",
            method: Method::Get,
            path: "/sequences",
            summary: "List sequences",
            description: "Email sequences of this mode.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<SequenceBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_sequence",
            method: Method::Post,
            path: "/sequences",
            summary: "Create a sequence",
            description: "Creates a timed email drip: each step waits, then mails the enrolled contact. `trigger` enrolls an event's contact once per sequence; `exit_when` ends enrollments. Check with svc_preview_sequence.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<SequenceCreate>()),
            output: Output::of::<SequenceBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_get_sequence",
            method: Method::Get,
            path: "/sequences/{id}",
            summary: "Get a sequence",
            description: "One sequence.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<SequenceBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_sequence",
            method: Method::Patch,
            path: "/sequences/{id}",
            summary: "Update a sequence",
            description: "Sets the fields sent, checked as on create. Disabling ends active enrollments; changed steps apply from the next send.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<SequenceUpdate>()),
            output: Output::of::<SequenceBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_sequence",
            method: Method::Delete,
            path: "/sequences/{id}",
            summary: "Delete a sequence",
            description: "Deletes a sequence for good, ending its enrollments.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<DeletedBody>(),
            hints: Hints::DELETE,
            handler: delete,
        },
        Operation {
            name: "svc_preview_sequence",
            method: Method::Get,
            path: "/sequences/{id}/preview",
            summary: "Preview a sequence",
            description: "A dry run: each step's send offset, how many records would enroll now, and merge tags no field fills.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<PreviewBody>(),
            hints: Hints::READ,
            handler: preview,
        },
        Operation {
            name: "svc_enroll_contact",
            method: Method::Post,
            path: "/sequences/{id}/enroll",
            summary: "Enroll a contact in a sequence",
            description: "Enrolls one contact directly: 201 with the enrollment, or 200 with the existing one (once per sequence).",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<EnrollIn>()),
            output: Output::of::<EnrollmentBody>(),
            hints: Hints {
                read_only: false,
                destructive: false,
                idempotent: true,
                dry_run: true,
            },
            handler: enroll,
        },
        Operation {
            name: "svc_list_sequence_enrollments",
            method: Method::Get,
            path: "/sequences/{id}/enrollments",
            summary: "List a sequence's enrollments",
            description: "The sequence's enrollments with state, exit reason and next send.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<EnrollmentBody>>(),
            hints: Hints::READ,
            handler: enrollments,
        },
        Operation {
            name: "svc_unenroll_contact",
            method: Method::Delete,
            path: "/sequences/{id}/enrollments/{enrollment_id}",
            summary: "Unenroll a contact",
            description: "Ends an enrollment; the contact cannot be enrolled in this sequence again.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<UnenrolledBody>(),
            hints: Hints::DELETE,
            handler: unenroll,
        },
    ]
}
