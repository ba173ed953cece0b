//! Contacts: `/contacts`.

use crm_app::{ports::ContactFilter, Scope};
use crm_domain::{ContactDraft, ContactPatch, Email, JsonMap};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{filter_value, handler, if_match, match_key, owner_filter, MATCH, OWNER_FILTER};
use crate::view::{self, Shape};
use crate::{
    bodies::{ContactBody, DeletedBody, ListBody},
    body,
    operation::{
        Hints, Method, Operation, Output, ParamKind, QueryParam, Reply, CURSOR, INCLUDE_DELETED,
        LIMIT, MAX_FIELD_FILTERS,
    },
    schema::PatchField,
    Problem,
};

const REGISTER_HINT: &str =
    "custom fields go under `custom_fields`; register the key first with POST /fields";

/// A contact to create. At least one of a name, `email`, `phone`, `linkedin_url`, `company_id`
/// or a custom field is required.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ContactCreate {
    #[schemars(length(max = 1024))]
    pub first_name: Option<String>,
    #[schemars(length(max = 1024))]
    pub last_name: Option<String>,
    /// Unique per workspace and mode, compared case-insensitively.
    #[schemars(length(max = crate::schema::EMAIL_MAX), pattern(crate::schema::EMAIL_OR_BLANK))]
    pub email: Option<String>,
    #[schemars(length(max = 1024))]
    pub phone: Option<String>,
    /// An http(s) URL.
    #[schemars(length(max = 1024), pattern(crate::schema::HTTP_URL_OR_BLANK))]
    pub linkedin_url: Option<String>,
    /// The `cmp_` id of an existing company.
    #[schemars(pattern(crate::schema::COMPANY_ID_OR_BLANK))]
    pub company_id: Option<String>,
    /// A registered `contact.type` enum value (see GET /enums).
    #[serde(rename = "type")]
    pub contact_type: Option<String>,
    /// A user's `usr_` id.
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: Option<String>,
    /// Registered custom field keys only (see POST /fields).
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// A contact to upsert: a create's fields, `email` required (the key it is matched on).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ContactUpsert {
    #[schemars(length(max = 1024))]
    pub first_name: Option<String>,
    #[schemars(length(max = 1024))]
    pub last_name: Option<String>,
    /// Matched normalised; required without `match`.
    #[schemars(length(max = crate::schema::EMAIL_MAX), pattern(crate::schema::EMAIL))]
    pub email: Option<String>,
    #[schemars(length(max = 1024))]
    pub phone: Option<String>,
    /// An http(s) URL.
    #[schemars(length(max = 1024), pattern(crate::schema::HTTP_URL_OR_BLANK))]
    pub linkedin_url: Option<String>,
    /// The `cmp_` id of an existing company.
    #[schemars(pattern(crate::schema::COMPANY_ID_OR_BLANK))]
    pub company_id: Option<String>,
    /// A registered `contact.type` enum value (see GET /enums).
    #[serde(rename = "type")]
    pub contact_type: Option<String>,
    /// A user's `usr_` id.
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: Option<String>,
    /// Registered custom field keys only (see POST /fields).
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// An upsert's body read twice: as the create it may be (with `email` required), and as the
/// PATCH it may be (fields sent are set, `null` clears them).
pub(crate) fn upsert_body(
    body: Option<&impl body::Document>,
    hint: Option<&str>,
) -> Result<(ContactDraft, ContactPatch), Problem> {
    let c: ContactUpsert = body::parse(body, hint)?;
    let patch: ContactUpdate = body::parse(body, hint)?;
    let draft = ContactDraft {
        first_name: c.first_name,
        last_name: c.last_name,
        email: c.email,
        phone: c.phone,
        linkedin_url: c.linkedin_url,
        company_id: c.company_id,
        contact_type: c.contact_type,
        owner_id: c.owner_id,
        custom_fields: c.custom_fields.unwrap_or_default(),
    };
    Ok((draft, patch.into()))
}

/// A partial update: fields sent are set, `null` clears them; `custom_fields` merges key by key
/// (`null` removes a key).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ContactUpdate {
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub first_name: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub last_name: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = crate::schema::EMAIL_MAX), pattern(crate::schema::EMAIL_OR_BLANK))]
    pub email: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub phone: PatchField<String>,
    #[serde(default)]
    #[schemars(length(max = 1024), pattern(crate::schema::HTTP_URL_OR_BLANK))]
    pub linkedin_url: PatchField<String>,
    #[serde(default)]
    #[schemars(pattern(crate::schema::COMPANY_ID_OR_BLANK))]
    pub company_id: PatchField<String>,
    #[serde(default, rename = "type")]
    pub contact_type: PatchField<String>,
    /// A user's `usr_` id.
    #[serde(default)]
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: PatchField<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

impl From<ContactCreate> for ContactDraft {
    fn from(c: ContactCreate) -> Self {
        ContactDraft {
            first_name: c.first_name,
            last_name: c.last_name,
            email: c.email,
            phone: c.phone,
            linkedin_url: c.linkedin_url,
            company_id: c.company_id,
            contact_type: c.contact_type,
            owner_id: c.owner_id,
            custom_fields: c.custom_fields.unwrap_or_default(),
        }
    }
}

impl From<ContactUpdate> for ContactPatch {
    fn from(u: ContactUpdate) -> Self {
        ContactPatch {
            first_name: u.first_name.into_patch(),
            last_name: u.last_name.into_patch(),
            email: u.email.into_patch(),
            phone: u.phone.into_patch(),
            linkedin_url: u.linkedin_url.into_patch(),
            company_id: u.company_id.into_patch(),
            contact_type: u.contact_type.into_patch(),
            owner_id: u.owner_id.into_patch(),
            custom_fields: u.custom_fields,
        }
    }
}

/// `custom_fields.<key>=<value>`: equality on a registered custom field (decisions: lists).
pub(crate) const CUSTOM_FIELDS: QueryParam = QueryParam {
    name: "custom_fields",
    kind: ParamKind::FieldMap,
    required: false,
    description: "Equality on registered custom fields, all must match (at most 5): `custom_fields.<key>=<value>` in a URL, \
        `{\"<key>\": value}` for agents. A multiselect field matches records holding the value.",
};

/// What a get of one record takes: its shape (decisions §19).
const GET_QUERY: &[QueryParam] = &[view::CONTACT_FIELDS, view::CONTACT_EXPAND];

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::string(
        "q",
        "Case-insensitive substring of first or last name, email, phone or LinkedIn URL.",
    ),
    QueryParam::pattern(
        "email",
        crate::schema::EMAIL_OR_BLANK,
        "Exact email (case-insensitive); blank is no filter.",
    ),
    QueryParam::id_filter(
        "company_id",
        crm_domain::CompanyId::PATTERN,
        "Contacts of this company (`cmp_` id).",
    ),
    QueryParam::string("type", "A registered `contact.type` value."),
    OWNER_FILTER,
    CUSTOM_FIELDS,
    LIMIT,
    CURSOR,
    INCLUDE_DELETED,
    view::CONTACT_FIELDS,
    view::CONTACT_EXPAND,
];

/// The contact list's filters as `input` sends them, registry-bound ones checked (the list and
/// exports read them alike).
pub(crate) async fn filter(
    api: &crate::Api,
    caller: &crm_app::Caller,
    input: &crate::operation::Input,
) -> Result<ContactFilter, Problem> {
    let contact_type = filter_value(input, "type");
    let custom = input.field_filters(&CUSTOM_FIELDS);
    if custom.len() > MAX_FIELD_FILTERS {
        return Err(Problem::validation(
            CUSTOM_FIELDS.name,
            format!("at most {MAX_FIELD_FILTERS} custom_fields filters per request"),
        ));
    }
    let custom_fields = api
        .app
        .check_contact_filters(caller, contact_type.as_deref(), custom)
        .await?;
    let email = match filter_value(input, "email") {
        Some(raw) => Some(
            Email::parse(&raw)
                .ok_or_else(|| Problem::validation("email", "email must be an e-mail address"))?,
        ),
        None => None,
    };
    let company_id = match filter_value(input, "company_id") {
        Some(raw) => Some(
            crm_domain::CompanyId::parse(&raw)
                .map_err(|e| Problem::validation("company_id", e.to_string()))?,
        ),
        None => None,
    };
    Ok(ContactFilter {
        q: filter_value(input, "q"),
        email,
        company_id,
        contact_type,
        owner_id: owner_filter(input)?,
        custom_fields,
        include_deleted: input.query_bool("include_deleted")?,
    })
}

handler!(list(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::CONTACT).await?;
    let filter = filter(api, caller, &input).await?;
    let page = api.app.list_contacts(caller, filter, input.page()?).await?;
    let list = ListBody::<ContactBody>::of(page);
    match shape {
        None => Ok(Reply::serialized(&list)),
        Some(shape) => shape.page(api, caller, list).await,
    }
});

handler!(create(api, caller, input) {
    let draft: ContactCreate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let contact = api.app.create_contact(caller, draft.into(), input.idem.as_ref()).await?;
    Ok(Reply::versioned(&ContactBody::from(&contact)))
});

handler!(upsert(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let (draft, patch) = upsert_body(input.body.as_ref(), Some(REGISTER_HINT))?;
    let key = match_key(&input)?;
    let (contact, outcome) = api.app.upsert_contact(caller, key.as_deref(), draft, patch, expected, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&ContactBody::from(&contact))
        .with_status(outcome.status())
        .with_upsert_outcome(outcome.as_str()))
});

handler!(get(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::CONTACT).await?;
    let contact = api.app.get_contact(caller, input.path_param("id")).await?;
    let body = ContactBody::from(&contact);
    match shape {
        None => Ok(Reply::versioned(&body)),
        Some(shape) => shape.one(api, caller, &body).await,
    }
});

handler!(update(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let patch: ContactUpdate = body::parse(input.body.as_ref(), Some(REGISTER_HINT))?;
    let contact = api.app.update_contact(caller, input.path_param("id"), patch.into(), expected).await?;
    Ok(Reply::versioned(&ContactBody::from(&contact)))
});

handler!(delete(api, caller, input) {
    let contact = api.app.delete_contact(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(contact.id.as_str(), "contact")))
});

handler!(restore(api, caller, input) {
    let contact = api.app.restore_contact(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&ContactBody::from(&contact)))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("contacts");
    let write = Scope::write("contacts");
    vec![
        Operation {
            name: "svc_list_contacts",
            method: Method::Get,
            path: "/contacts",
            summary: "List contacts",
            description: "Contacts newest first. Custom-field filters take registered keys: `custom_fields: {\"<key>\": value}`.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<ContactBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_contact",
            method: Method::Post,
            path: "/contacts",
            summary: "Create a contact",
            description: "Creates a contact (emits contact.created). Needs a name, email, phone, LinkedIn URL, company or custom field. A taken email answers 409 with the contact under `existing`.",
            scope: write,
            idempotency_key: true,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<ContactCreate>()),
            output: Output::of::<ContactBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_upsert_contact",
            method: Method::Post,
            path: "/contacts/upsert",
            summary: "Create or update a contact by email",
            description: "Matches `email` or the `match` field: none → creates the contact (201); one → applies the fields as a PATCH \
                (200; a deleted match is restored). Header Upsert-Outcome: created, updated or unchanged. Safe to run concurrently.",
            scope: write,
            idempotency_key: true,
            if_match: true,
            success_status: 200,
            query: &[MATCH],
            body: Some(Output::of::<ContactUpsert>()),
            output: Output::of::<ContactBody>(),
            hints: Hints::UPDATE,
            handler: upsert,
        },
        Operation {
            name: "svc_get_contact",
            method: Method::Get,
            path: "/contacts/{id}",
            summary: "Get a contact",
            description: "One contact, soft-deleted ones included.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: GET_QUERY,
            body: None,
            output: Output::of::<ContactBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_contact",
            method: Method::Patch,
            path: "/contacts/{id}",
            summary: "Update a contact",
            description: "Sets the fields sent; null clears one; `custom_fields` merges by key (null removes). Emits contact.updated. A deleted contact must be restored first.",
            scope: write,
            idempotency_key: false,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<ContactUpdate>()),
            output: Output::of::<ContactBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_contact",
            method: Method::Delete,
            path: "/contacts/{id}",
            summary: "Delete a contact",
            description: "Soft-deletes a contact; it keeps its email and can be restored.",
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
            name: "svc_restore_contact",
            method: Method::Post,
            path: "/contacts/{id}/restore",
            summary: "Restore a contact",
            description: "Brings a soft-deleted contact back.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<ContactBody>(),
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
    fn create_and_update_accept_the_same_fields() {
        assert_eq!(
            property_names(&schema_of::<ContactCreate>()),
            property_names(&schema_of::<ContactUpdate>())
        );
        assert_eq!(
            property_names(&schema_of::<ContactCreate>()),
            crm_domain::contact::WRITABLE_FIELDS
        );
    }
}
