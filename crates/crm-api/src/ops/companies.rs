//! Companies: `/companies`. Company changes emit no events.

use crm_app::{ports::CompanyFilter, Scope};
use crm_domain::{CompanyDraft, CompanyPatch, JsonMap};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{filter_value, handler, if_match, owner_filter, OWNER_FILTER};
use crate::view::{self, Shape};
use crate::{
    bodies::{CompanyBody, DeletedBody, ListBody},
    body,
    operation::{
        Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, INCLUDE_DELETED, LIMIT,
    },
    schema::PatchField,
    Problem,
};

const REGISTER_HINT: &str =
    "custom fields go under `custom_fields`; register the key first with POST /fields";

/// A company to create; `name` is required.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompanyCreate {
    #[schemars(required, length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// A bare domain such as `example.com`; not unique.
    #[schemars(length(max = 1024), pattern(crate::schema::DOMAIN_OR_BLANK))]
    pub domain: Option<String>,
    /// A user's `usr_` id.
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: Option<String>,
    /// Registered custom field keys only (see POST /fields).
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// A partial update: fields sent are set, `null` clears them (`name` cannot be cleared);
/// `custom_fields` merges key by key.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompanyUpdate {
    #[serde(default)]
    #[schemars(with = "String", length(max = 1024), pattern(crate::schema::NON_BLANK))]
    // null is refused: a company keeps a name
    pub name: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = 1024), pattern(crate::schema::DOMAIN_OR_BLANK))]
    pub domain: PatchField<String>,
    /// A user's `usr_` id.
    #[serde(default)]
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: PatchField<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// What a get of one record takes: its shape (decisions §19).
const GET_QUERY: &[QueryParam] = &[view::COMPANY_FIELDS];

/// A company to upsert: matched on `domain` (required), created with `name` when none matches.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompanyUpsert {
    /// Required when no company has the domain (the upsert creates one).
    #[schemars(length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// Normalised (lower-cased; scheme, path, port and a leading `www.` dropped) and matched
    /// against the active companies; required without `match`.
    #[schemars(length(max = 1024), pattern(crate::schema::DOMAIN))]
    pub domain: Option<String>,
    /// A user's `usr_` id.
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: Option<String>,
    /// Registered custom field keys only (see POST /fields).
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::string("q", "Case-insensitive substring of name or domain."),
    QueryParam::string("domain", "Exact domain (case-insensitive)."),
    OWNER_FILTER,
    LIMIT,
    CURSOR,
    INCLUDE_DELETED,
    view::COMPANY_FIELDS,
];

/// The company list's filters as `input` sends them (the list and exports read them alike).
pub(crate) fn filter(input: &crate::operation::Input) -> Result<CompanyFilter, Problem> {
    Ok(CompanyFilter {
        q: filter_value(input, "q"),
        domain: filter_value(input, "domain").map(|d| {
            crm_domain::company::normalise_domain(d.clone()).unwrap_or_else(|_| d.to_lowercase())
        }),
        owner_id: owner_filter(input)?,
        include_deleted: input.query_bool("include_deleted")?,
    })
}

handler!(list(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::COMPANY).await?;
    let filter = filter(&input)?;
    let page = api.app.list_companies(caller, filter, input.page()?).await?;
    let list = ListBody::<CompanyBody>::of(page);
    match shape {
        None => Ok(Reply::serialized(&list)),
        Some(shape) => shape.page(api, caller, list).await,
    }
});

handler!(create(api, caller, input) {
    let c: CompanyCreate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let draft = CompanyDraft { name: c.name, domain: c.domain, owner_id: c.owner_id, custom_fields: c.custom_fields.unwrap_or_default() };
    let company = api.app.create_company(caller, draft, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&CompanyBody::from(&company)))
});

/// An upsert's body read twice: as the create it may be (with `domain` required), and as the
/// PATCH it may be.
pub(crate) fn upsert_body(
    body: Option<&impl body::Document>,
    hint: Option<&str>,
) -> Result<(CompanyDraft, CompanyPatch), Problem> {
    let c: CompanyUpsert = body::parse(body, hint)?;
    let u: CompanyUpdate = body::parse(body, hint)?;
    let draft = CompanyDraft {
        name: c.name,
        domain: c.domain,
        owner_id: c.owner_id,
        custom_fields: c.custom_fields.unwrap_or_default(),
    };
    let patch = CompanyPatch {
        name: u.name.into_patch(),
        domain: u.domain.into_patch(),
        owner_id: u.owner_id.into_patch(),
        custom_fields: u.custom_fields,
    };
    Ok((draft, patch))
}

handler!(upsert(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let (draft, patch) = upsert_body(input.body.as_ref(), Some(REGISTER_HINT))?;
    let key = super::match_key(&input)?;
    let (company, outcome) = api.app.upsert_company(caller, key.as_deref(), draft, patch, expected, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&CompanyBody::from(&company))
        .with_status(outcome.status())
        .with_upsert_outcome(outcome.as_str()))
});

handler!(get(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::COMPANY).await?;
    let company = api.app.get_company(caller, input.path_param("id")).await?;
    let body = CompanyBody::from(&company);
    match shape {
        None => Ok(Reply::versioned(&body)),
        Some(shape) => shape.one(api, caller, &body).await,
    }
});

handler!(update(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let u: CompanyUpdate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let patch = CompanyPatch { name: u.name.into_patch(), domain: u.domain.into_patch(), owner_id: u.owner_id.into_patch(), custom_fields: u.custom_fields };
    let company = api.app.update_company(caller, input.path_param("id"), patch, expected).await?;
    Ok(Reply::versioned(&CompanyBody::from(&company)))
});

handler!(delete(api, caller, input) {
    let company = api.app.delete_company(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(company.id.as_str(), "company")))
});

handler!(restore(api, caller, input) {
    let company = api.app.restore_company(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&CompanyBody::from(&company)))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("companies");
    let write = Scope::write("companies");
    vec![
        Operation {
            name: "svc_list_companies",
            method: Method::Get,
            path: "/companies",
            summary: "List companies",
            description: "Companies newest first.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<CompanyBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_company",
            method: Method::Post,
            path: "/companies",
            summary: "Create a company",
            description: "Creates a company. Domains need not be unique. Companies emit no events.",
            scope: write,
            idempotency_key: true,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<CompanyCreate>()),
            output: Output::of::<CompanyBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_upsert_company",
            method: Method::Post,
            path: "/companies/upsert",
            summary: "Create or update a company by domain",
            description: "Matches `domain` or the `match` field: none → creates the company (201, `name` required; a deleted one is restored); \
                one → applies the fields as a PATCH (200); several → 409 with `candidates`. Header Upsert-Outcome: created, \
                updated or unchanged.",
            scope: write,
            idempotency_key: true,
            if_match: true,
            success_status: 200,
            query: &[super::MATCH],
            body: Some(Output::of::<CompanyUpsert>()),
            output: Output::of::<CompanyBody>(),
            hints: Hints::UPDATE,
            handler: upsert,
        },
        Operation {
            name: "svc_get_company",
            method: Method::Get,
            path: "/companies/{id}",
            summary: "Get a company",
            description: "One company, soft-deleted ones included.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: GET_QUERY,
            body: None,
            output: Output::of::<CompanyBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_company",
            method: Method::Patch,
            path: "/companies/{id}",
            summary: "Update a company",
            description: "Sets the fields sent; `custom_fields` merges by key. A deleted company must be restored first.",
            scope: write,
            idempotency_key: false,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<CompanyUpdate>()),
            output: Output::of::<CompanyBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_company",
            method: Method::Delete,
            path: "/companies/{id}",
            summary: "Delete a company",
            description: "Soft-deletes a company; it can be restored.",
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
            name: "svc_restore_company",
            method: Method::Post,
            path: "/companies/{id}/restore",
            summary: "Restore a company",
            description: "Brings a soft-deleted company back.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<CompanyBody>(),
            hints: Hints::UPDATE,
            handler: restore,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{property_names, schema_of};

    #[test]
    fn create_takes_the_writable_fields() {
        assert_eq!(
            property_names(&schema_of::<CompanyCreate>()),
            crm_domain::company::WRITABLE_FIELDS
        );
    }
}
