//! Merges: `POST /contacts/{id}/merge` and `POST /companies/{id}/merge` (decisions §18, §24).

use crm_app::Scope;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{handler, if_match};
use crate::{
    bodies::{CompanyBody, ContactBody},
    body,
    operation::{Hints, Method, Operation, Output, Reply},
};

/// The contacts to merge into the one named in the path.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ContactMerge {
    /// 1 to 10 ids of active contacts, each once, in order of precedence.
    #[schemars(
        length(min = 1, max = 10),
        inner(pattern(crm_domain::ContactId::PATTERN))
    )]
    #[schemars(extend("uniqueItems" = true))]
    pub merge_ids: Vec<String>,
}

/// The companies to merge into the one named in the path.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompanyMerge {
    /// 1 to 10 ids of active companies, each once, in order of precedence.
    #[schemars(
        length(min = 1, max = 10),
        inner(pattern(crm_domain::CompanyId::PATTERN))
    )]
    #[schemars(extend("uniqueItems" = true))]
    pub merge_ids: Vec<String>,
}

handler!(contacts(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let body: ContactMerge = body::parse(input.body.as_ref(), None)?;
    let contact = api.app.merge_contacts(caller, input.path_param("id"), body.merge_ids, expected, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&ContactBody::from(&contact)))
});

handler!(companies(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let body: CompanyMerge = body::parse(input.body.as_ref(), None)?;
    let company = api.app.merge_companies(caller, input.path_param("id"), body.merge_ids, expected, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&CompanyBody::from(&company)))
});

/// A merge changes the survivor and retires the merged records: destructive, not idempotent.
const MERGE: Hints = Hints {
    read_only: false,
    destructive: true,
    idempotent: false,
    dry_run: true,
};

pub fn operations() -> Vec<Operation> {
    vec![
        Operation {
            name: "svc_merge_contacts",
            method: Method::Post,
            path: "/contacts/{id}/merge",
            summary: "Merge contacts into one",
            description: "Merges `merge_ids` into contact {id}: empty fields take the first merged value, references and \
                enrollments move to it, and the merged contacts become tombstones.",
            scope: Scope::write("contacts"),
            idempotency_key: true,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<ContactMerge>()),
            output: Output::of::<ContactBody>(),
            hints: MERGE,
            handler: contacts,
        },
        Operation {
            name: "svc_merge_companies",
            method: Method::Post,
            path: "/companies/{id}/merge",
            summary: "Merge companies into one",
            description: "Merges `merge_ids` into company {id}: empty fields take the first merged value, references move to \
                it, and the merged companies become tombstones.",
            scope: Scope::write("companies"),
            idempotency_key: true,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<CompanyMerge>()),
            output: Output::of::<CompanyBody>(),
            hints: MERGE,
            handler: companies,
        },
    ]
}
