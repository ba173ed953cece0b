//! Erasure: `POST /contacts/{id}/erase`, `/companies/{id}/erase`, `/deals/{id}/erase`
//! (decisions §25).

use crm_app::{ports::Erasure, Scope};
use crm_domain::ObjectKind;
use serde_json::{json, Value};

use super::handler;
use crate::operation::{Hints, Method, Operation, Output, Reply};

fn counts(e: &Erasure) -> Value {
    json!({
        "history_entries": e.history_entries,
        "activities_deleted": e.activities_deleted,
        "activities_unlinked": e.activities_unlinked,
        "emails_scrubbed": e.emails_scrubbed,
        "events_scrubbed": e.events_scrubbed,
        "idempotency_replays": e.idempotency_replays,
        "enrollments_ended": e.enrollments_ended,
        "automation_runs": e.automation_runs,
        "import_errors": e.import_errors,
        "references_cleared": e.references.len(),
    })
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
    let erasure = api.app.erase_record(caller, object, id, false).await?;
    Ok(Reply::new(
        json!({"id": id, "object": object.as_str(), "erased": true, "counts": counts(&erasure)}),
    ))
}

handler!(contact(api, caller, input) { erase(api, caller, &input, ObjectKind::Contact).await });
handler!(company(api, caller, input) { erase(api, caller, &input, ObjectKind::Company).await });
handler!(deal(api, caller, input) { erase(api, caller, &input, ObjectKind::Deal).await });

fn output() -> Value {
    let n = json!({"type": "integer"});
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "erased": {"type": "boolean"},
            "counts": {
                "type": "object",
                "properties": {
                    "history_entries": n, "activities_deleted": n, "activities_unlinked": n,
                    "emails_scrubbed": n, "events_scrubbed": n, "idempotency_replays": n,
                    "enrollments_ended": n, "automation_runs": n, "import_errors": n,
                    "references_cleared": n,
                },
            },
        },
        "required": ["id", "object", "erased", "counts"],
    })
}

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
        output: Output::written(output),
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
