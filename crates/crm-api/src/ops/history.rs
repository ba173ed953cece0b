//! Field history: `GET /contacts/{id}/history`, `/companies/{id}/history`, `/deals/{id}/history`.

use crm_app::Scope;
use crm_domain::ObjectKind;

use super::handler;
use crate::{
    bodies::{ChangeBody, ListBody},
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
};

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

async fn list(
    api: &crate::Api,
    caller: &crm_app::Caller,
    input: &crate::operation::Input,
    object: ObjectKind,
) -> Result<Reply, crate::Problem> {
    let page = api
        .app
        .list_history(caller, object, input.path_param("id"), input.page()?)
        .await?;
    Ok(Reply::serialized(&ListBody::<ChangeBody>::of(page)))
}

handler!(contact(api, caller, input) { list(api, caller, &input, ObjectKind::Contact).await });
handler!(company(api, caller, input) { list(api, caller, &input, ObjectKind::Company).await });
handler!(deal(api, caller, input) { list(api, caller, &input, ObjectKind::Deal).await });

/// The description of each history list, after the object's name.
macro_rules! described {
    ($object:literal) => {
        concat!(
            "Lists the changes of one ",
            $object,
            " newest first (soft-deleted ones too): who, through what, and each \
            field's from/to. Errors: not_found, invalid_cursor."
        )
    };
}

fn operation(
    name: &'static str,
    path: &'static str,
    summary: &'static str,
    description: &'static str,
    resource: &'static str,
    handler: crate::operation::Handler,
) -> Operation {
    Operation {
        name,
        method: Method::Get,
        path,
        summary,
        description,
        scope: Scope::read(resource),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: LIST_QUERY,
        body: None,
        output: Output::of::<ListBody<ChangeBody>>(),
        hints: Hints::READ,
        handler,
    }
}

pub fn operations() -> Vec<Operation> {
    vec![
        operation(
            "svc_list_contact_history",
            "/contacts/{id}/history",
            "List a contact's history",
            described!("contact"),
            "contacts",
            contact,
        ),
        operation(
            "svc_list_company_history",
            "/companies/{id}/history",
            "List a company's history",
            described!("company"),
            "companies",
            company,
        ),
        operation(
            "svc_list_deal_history",
            "/deals/{id}/history",
            "List a deal's history",
            described!("deal"),
            "deals",
            deal,
        ),
    ]
}
