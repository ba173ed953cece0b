//! Erasure: `POST /contacts/{id}/erase`, `/companies/{id}/erase`, `/deals/{id}/erase`
//! (decisions §25).

use crm_app::{ports::Erasure, Scope};
use crm_domain::ObjectKind;
use schemars::JsonSchema;
use serde::Serialize;

use super::handler;
use crate::operation::{Hints, Method, Operation, Output, Reply};

/// What an erasure answers (decisions §25): the record's id and object, and what it scrubbed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErasedBody {
    pub id: String,
    pub object: String,
    /// Always true: the record is gone (a dry run answers this inside its envelope).
    pub erased: bool,
    pub counts: ErasureCounts,
}

/// How many rows of each kind the erasure removed or rewrote.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErasureCounts {
    pub history_entries: u64,
    pub activities_deleted: u64,
    pub activities_unlinked: u64,
    pub emails_scrubbed: u64,
    pub events_scrubbed: u64,
    pub idempotency_replays: u64,
    pub enrollments_ended: u64,
    pub automation_runs: u64,
    pub import_errors: u64,
    pub references_cleared: u64,
}

impl From<&Erasure> for ErasureCounts {
    fn from(e: &Erasure) -> ErasureCounts {
        ErasureCounts {
            history_entries: e.history_entries,
            activities_deleted: e.activities_deleted,
            activities_unlinked: e.activities_unlinked,
            emails_scrubbed: e.emails_scrubbed,
            events_scrubbed: e.events_scrubbed,
            idempotency_replays: e.idempotency_replays,
            enrollments_ended: e.enrollments_ended,
            automation_runs: e.automation_runs,
            import_errors: e.import_errors,
            references_cleared: e.references.len() as u64,
        }
    }
}

async fn erase(
    api: &crate::Api,
    caller: &crm_app::Caller,
    input: &crate::operation::Input,
    object: ObjectKind,
) -> Result<Reply, crate::Problem> {
    // `dry_run=true` is the generic dry run (decisions §18): this same erasure in a transaction
    // that rolls back, answered in the dry-run envelope with these counts as its result.
    let id = input.path_param("id");
    let erasure = api.app.erase_record(caller, object, id).await?;
    Ok(Reply::serialized(&ErasedBody {
        id: id.to_owned(),
        object: object.as_str().to_owned(),
        erased: true,
        counts: ErasureCounts::from(&erasure),
    }))
}

handler!(contact(api, caller, input) { erase(api, caller, &input, ObjectKind::Contact).await });
handler!(company(api, caller, input) { erase(api, caller, &input, ObjectKind::Company).await });
handler!(deal(api, caller, input) { erase(api, caller, &input, ObjectKind::Deal).await });

fn operation(
    name: &'static str,
    path: &'static str,
    summary: &'static str,
    resource: &'static str,
    handler: crate::operation::Handler,
) -> Operation {
    Operation {
        name,
        method: Method::Post,
        path,
        summary,
        description: "Deletes the record for good and scrubs its personal data (history, activities, emails, events, replays); needs the erase scope.",
        scope: Scope::write(resource),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: &[],
        body: None,
        output: Output::of::<ErasedBody>(),
        hints: Hints::DELETE,
        handler,
    }
}

pub fn operations() -> Vec<Operation> {
    vec![
        operation(
            "svc_erase_contact",
            "/contacts/{id}/erase",
            "Erase a contact",
            "contacts",
            contact,
        ),
        operation(
            "svc_erase_company",
            "/companies/{id}/erase",
            "Erase a company",
            "companies",
            company,
        ),
        operation(
            "svc_erase_deal",
            "/deals/{id}/erase",
            "Erase a deal",
            "deals",
            deal,
        ),
    ]
}
