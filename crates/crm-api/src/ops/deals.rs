//! Deals: `/deals`.

use crm_app::{deals::DealQuery, Scope};
use crm_domain::{CompanyId, ContactId, DealDraft, DealPatch, JsonMap};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{filter_value, handler, if_match, owner_filter, OWNER_FILTER};
use crate::view::{self, Shape};
use crate::{
    bodies::{DealBody, DeletedBody, ListBody},
    body,
    operation::{
        Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, INCLUDE_DELETED, LIMIT,
    },
    schema::{PatchField, WholeNumber},
    Problem,
};

const REGISTER_HINT: &str =
    "custom fields go under `custom_fields`; register the key first with POST /fields";

/// A deal to create; `title` is required.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DealCreate {
    #[schemars(required, length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub title: Option<String>,
    /// Pipeline key or `pl_` id; the default pipeline when omitted.
    pub pipeline: Option<String>,
    /// Alias of `pipeline`.
    pub pipeline_id: Option<String>,
    /// A stage key of the pipeline; its entry (first) stage when omitted.
    pub stage: Option<String>,
    /// The `con_` id of the contact deal-triggered emails go to.
    #[schemars(pattern(crate::schema::CONTACT_ID_OR_BLANK))]
    pub primary_contact_id: Option<String>,
    #[schemars(pattern(crate::schema::COMPANY_ID_OR_BLANK))]
    pub company_id: Option<String>,
    /// Money in integer minor units (cents).
    #[schemars(range(min = 0))]
    pub value_cents: Option<WholeNumber>,
    /// Three-letter currency code (ISO 4217 shape, any case; stored upper-case). Blank is none.
    #[schemars(pattern(crate::schema::CURRENCY_OR_BLANK))]
    pub currency: Option<String>,
    /// YYYY-MM-DD; blank is none.
    #[schemars(extend("anyOf" = [{"format": "date"}, {"pattern": crate::schema::BLANK}]))]
    pub close_date: Option<String>,
    /// A user's `usr_` id.
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: Option<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// A partial update: fields sent are set, `null` clears them; a new `pipeline` without a `stage`
/// puts the deal in that pipeline's entry stage.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DealUpdate {
    #[serde(default)]
    #[schemars(with = "String", length(max = 1024), pattern(crate::schema::NON_BLANK))]
    // null is refused: a deal keeps a title
    pub title: PatchField<String>,
    pub pipeline: Option<String>,
    pub pipeline_id: Option<String>,
    /// A stage key of the pipeline; not null or blank (a deal is always in a stage).
    #[serde(default)]
    #[schemars(with = "String", pattern(crate::schema::NON_BLANK))]
    pub stage: PatchField<String>,
    #[serde(default)]
    #[schemars(pattern(crate::schema::CONTACT_ID_OR_BLANK))]
    pub primary_contact_id: PatchField<String>,
    #[serde(default)]
    #[schemars(pattern(crate::schema::COMPANY_ID_OR_BLANK))]
    pub company_id: PatchField<String>,
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub value_cents: PatchField<WholeNumber>,
    #[serde(default)]
    #[schemars(pattern(crate::schema::CURRENCY_OR_BLANK))]
    pub currency: PatchField<String>,
    #[serde(default)]
    #[schemars(extend("anyOf" = [{"format": "date"}, {"pattern": crate::schema::BLANK}]))]
    pub close_date: PatchField<String>,
    /// A user's `usr_` id.
    #[serde(default)]
    #[schemars(pattern(crate::schema::USER_ID_OR_BLANK))]
    pub owner_id: PatchField<String>,
    #[schemars(transform = crate::schema::custom_field_keys)]
    pub custom_fields: Option<JsonMap>,
}

/// `pipeline` and its alias `pipeline_id` must agree when both are given.
pub(crate) fn pipeline_ref(
    pipeline: Option<String>,
    alias: Option<String>,
) -> Result<Option<String>, Problem> {
    match (pipeline, alias) {
        (Some(a), Some(b)) if a != b => Err(Problem::validation(
            "pipeline_id",
            "pipeline and pipeline_id name different pipelines",
        )),
        (a, b) => Ok(a.or(b).filter(|p| !p.trim().is_empty())),
    }
}

pub(crate) fn draft(c: DealCreate) -> Result<(DealDraft, Option<String>), Problem> {
    let pipeline = pipeline_ref(c.pipeline, c.pipeline_id)?;
    let draft = DealDraft {
        title: c.title,
        stage: c.stage,
        primary_contact_id: c.primary_contact_id,
        company_id: c.company_id,
        value_cents: c.value_cents.map(|v| v.0),
        currency: c.currency,
        close_date: c.close_date,
        owner_id: c.owner_id,
        custom_fields: c.custom_fields.unwrap_or_default(),
    };
    Ok((draft, pipeline))
}

pub(crate) fn patch(u: DealUpdate) -> Result<(DealPatch, Option<String>), Problem> {
    let pipeline = pipeline_ref(u.pipeline, u.pipeline_id)?;
    let patch = DealPatch {
        title: u.title.into_patch(),
        stage: u.stage.into_patch(),
        primary_contact_id: u.primary_contact_id.into_patch(),
        company_id: u.company_id.into_patch(),
        value_cents: u.value_cents.into_patch().map(|v| v.0),
        currency: u.currency.into_patch(),
        close_date: u.close_date.into_patch(),
        owner_id: u.owner_id.into_patch(),
        custom_fields: u.custom_fields,
    };
    Ok((patch, pipeline))
}

pub(crate) const UNKNOWN_FIELD_HINT: &str = REGISTER_HINT;

/// What a get of one record takes: its shape (decisions §19).
const GET_QUERY: &[QueryParam] = &[view::DEAL_FIELDS, view::DEAL_EXPAND];

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::string("q", "Case-insensitive substring of the title."),
    QueryParam::string(
        "pipeline",
        "Pipeline key or `pl_` id. Without it, deals of all pipelines are merged.",
    ),
    QueryParam::string("pipeline_id", "Alias of `pipeline`."),
    QueryParam::string(
        "stage",
        "Stage key. Keys repeat across pipelines: pass `pipeline` for one funnel.",
    ),
    QueryParam::id_filter(
        "company_id",
        crm_domain::CompanyId::PATTERN,
        "Deals of this company.",
    ),
    QueryParam::id_filter(
        "primary_contact_id",
        crm_domain::ContactId::PATTERN,
        "Deals of this primary contact.",
    ),
    OWNER_FILTER,
    LIMIT,
    CURSOR,
    INCLUDE_DELETED,
    view::DEAL_FIELDS,
    view::DEAL_EXPAND,
];

/// The deal list's filters as `input` sends them (the list and exports read them alike).
pub(crate) fn query(input: &crate::operation::Input) -> Result<DealQuery, Problem> {
    let pipeline = pipeline_ref(
        filter_value(input, "pipeline"),
        filter_value(input, "pipeline_id"),
    )?;
    let company_id = match filter_value(input, "company_id") {
        Some(raw) => Some(
            CompanyId::parse(&raw).map_err(|e| Problem::validation("company_id", e.to_string()))?,
        ),
        None => None,
    };
    let primary_contact_id = match filter_value(input, "primary_contact_id") {
        Some(raw) => Some(
            ContactId::parse(&raw)
                .map_err(|e| Problem::validation("primary_contact_id", e.to_string()))?,
        ),
        None => None,
    };
    Ok(DealQuery {
        q: filter_value(input, "q"),
        pipeline,
        stage: filter_value(input, "stage"),
        company_id,
        primary_contact_id,
        owner_id: owner_filter(input)?,
        include_deleted: input.query_bool("include_deleted")?,
    })
}

handler!(list(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::DEAL).await?;
    let query = query(&input)?;
    let page = api.app.list_deals(caller, query, input.page()?).await?;
    let list = ListBody::<DealBody>::of(page);
    match shape {
        None => Ok(Reply::serialized(&list)),
        Some(shape) => shape.page(api, caller, list).await,
    }
});

handler!(create(api, caller, input) {
    let (draft, pipeline) = draft(body::parse(input.body.as_ref(), Some(REGISTER_HINT))?)?;
    let deal = api.app.create_deal(caller, draft, pipeline.as_deref(), input.idem.as_ref()).await?;
    Ok(Reply::versioned(&DealBody::from(&deal)))
});

/// The query of `svc_upsert_deal`: `match` is required.
const UPSERT_QUERY: &[QueryParam] = &[QueryParam {
    required: true,
    ..super::MATCH
}];

handler!(upsert(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let Some(key) = super::match_key(&input)? else {
        return Err(Problem::bad_request("deals upsert only on a unique custom field: send match=custom_fields.<key>")
            .with("field", "match"));
    };
    let (draft, pipeline) = draft(body::parse(input.body.as_ref(), Some(REGISTER_HINT))?)?;
    let (patch, _) = patch(body::parse(input.body.as_ref(), Some(REGISTER_HINT))?)?;
    let (deal, outcome) = api.app.upsert_deal(caller, &key, draft, patch, pipeline.as_deref(), expected, input.idem.as_ref()).await?;
    Ok(Reply::versioned(&DealBody::from(&deal))
        .with_status(outcome.status())
        .with_upsert_outcome(outcome.as_str()))
});

handler!(get(api, caller, input) {
    let shape = Shape::read(api, caller, &input, &view::DEAL).await?;
    let deal = api.app.get_deal(caller, input.path_param("id")).await?;
    let body = DealBody::from(&deal);
    match shape {
        None => Ok(Reply::versioned(&body)),
        Some(shape) => shape.one(api, caller, &body).await,
    }
});

handler!(update(api, caller, input) {
    let expected = if_match(input.if_match.as_deref())?;
    let (patch, pipeline) = patch(body::parse(input.body.as_ref(), Some(REGISTER_HINT))?)?;
    let deal = api.app.update_deal(caller, input.path_param("id"), patch, pipeline.as_deref(), expected).await?;
    Ok(Reply::versioned(&DealBody::from(&deal)))
});

handler!(delete(api, caller, input) {
    let deal = api.app.delete_deal(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(deal.id.as_str(), "deal")))
});

handler!(restore(api, caller, input) {
    let deal = api.app.restore_deal(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&DealBody::from(&deal)))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("deals");
    let write = Scope::write("deals");
    vec![
        Operation {
            name: "svc_list_deals",
            method: Method::Get,
            path: "/deals",
            summary: "List deals",
            description: "Deals newest first. Stage keys repeat across pipelines: pass `pipeline` with `stage`.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<DealBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_deal",
            method: Method::Post,
            path: "/deals",
            summary: "Create a deal",
            description: "Creates a deal (emits deal.created, and deal.stage_changed with a stage). Default pipeline and its entry stage when omitted; see svc_list_pipelines.",
            scope: write,
            idempotency_key: true,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<DealCreate>()),
            output: Output::of::<DealBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_upsert_deal",
            method: Method::Post,
            path: "/deals/upsert",
            summary: "Create or update a deal by a unique field",
            description: "Matches the `match` field among the deals: none → creates it (201); one → applies the fields sent as a PATCH \
                would (200). Header Upsert-Outcome: created, updated or unchanged.",
            scope: write,
            idempotency_key: true,
            if_match: true,
            success_status: 200,
            query: UPSERT_QUERY,
            body: Some(Output::of::<DealCreate>()),
            output: Output::of::<DealBody>(),
            hints: Hints::UPDATE,
            handler: upsert,
        },
        Operation {
            name: "svc_get_deal",
            method: Method::Get,
            path: "/deals/{id}",
            summary: "Get a deal",
            description: "One deal, soft-deleted ones included.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: GET_QUERY,
            body: None,
            output: Output::of::<DealBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_deal",
            method: Method::Patch,
            path: "/deals/{id}",
            summary: "Update a deal",
            description: "Sets the fields sent (emits deal.updated, deal.stage_changed when the stage moves). A new pipeline without a stage lands in its entry stage.",
            scope: write,
            idempotency_key: false,
            if_match: true,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<DealUpdate>()),
            output: Output::of::<DealBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_deal",
            method: Method::Delete,
            path: "/deals/{id}",
            summary: "Delete a deal",
            description: "Soft-deletes a deal; it can be restored.",
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
            name: "svc_restore_deal",
            method: Method::Post,
            path: "/deals/{id}/restore",
            summary: "Restore a deal",
            description: "Brings a soft-deleted deal back.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<DealBody>(),
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
    fn create_accepts_exactly_the_writable_fields() {
        let mut fields = property_names(&schema_of::<DealCreate>());
        fields.sort();
        let mut expected: Vec<String> = crm_domain::deal::WRITABLE_FIELDS
            .iter()
            .map(|f| (*f).to_owned())
            .collect();
        expected.sort();
        assert_eq!(fields, expected);
    }

    #[test]
    fn whole_floats_are_integers() {
        let c: DealCreate = body::parse(
            Some(&serde_json::json!({"title": "x", "value_cents": 1500.0})),
            None,
        )
        .unwrap();
        assert_eq!(c.value_cents, Some(WholeNumber(1500)));
        let err = body::parse::<DealCreate>(
            Some(&serde_json::json!({"title": "x", "value_cents": 15.5})),
            None,
        )
        .unwrap_err();
        assert_eq!(err.extra["field"], "value_cents");
    }
}
