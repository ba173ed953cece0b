//! Users: `/users` (decisions §21, §24). A key manages the users of its workspace with
//! `users:write`, and gives a role only when it holds every scope of it. Their effect is access,
//! so none of them takes `dry_run`.

use crm_app::{users::UserInput, Scope};
use schemars::JsonSchema;
use serde::Deserialize;

use super::handler;
use crate::{
    bodies::{DeletedBody, ListBody, UserBody, UserWithLinkBody},
    body,
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    Problem,
};

/// A user to create: the answer carries a one-time sign-in link to set a password with.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UserCreate {
    /// Unique across the installation.
    #[schemars(
        required,
        length(max = crate::schema::EMAIL_MAX),
        pattern(crate::schema::EMAIL)
    )]
    pub email: Option<String>,
    #[schemars(required, pattern(crate::schema::ONE_LINE), length(max = 1024))]
    pub name: Option<String>,
    /// `admin`, `member` or `viewer`; only a key holding every scope of the role may give it.
    #[schemars(required, extend("enum" = ["admin", "member", "viewer"]))]
    pub role: Option<String>,
}

/// What to change of a user.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UserUpdate {
    #[schemars(length(max = crate::schema::EMAIL_MAX), pattern(crate::schema::EMAIL))]
    pub email: Option<String>,
    #[schemars(pattern(crate::schema::ONE_LINE), length(max = 1024))]
    pub name: Option<String>,
    /// `null`, as absent, leaves it unchanged.
    #[schemars(extend("enum" = ["admin", "member", "viewer", null]))]
    pub role: Option<String>,
}

fn with_link(api: &crate::Api, new: &crm_app::users::WithLink) -> Result<Reply, Problem> {
    let body = UserWithLinkBody::of(new, api.public_url()).ok_or_else(|| {
        crm_app::AppError::Internal("a new sign-in link without its token".into())
    })?;
    Ok(Reply::serialized(&body))
}

handler!(list(api, caller, input) {
    let page = api.app.list_users(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<UserBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: UserCreate = body::parse(input.body.as_ref(), None)?;
    let new = api.app.create_user(caller, UserInput { email: c.email, name: c.name, role: c.role }).await?;
    with_link(api, &new)
});

handler!(get(api, caller, input) {
    let user = api.app.get_user(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&UserBody::from(&user)))
});

handler!(update(api, caller, input) {
    let u: UserUpdate = body::parse(input.body.as_ref(), None)?;
    let patch = UserInput { email: u.email, name: u.name, role: u.role };
    let user = api.app.update_user(caller, input.path_param("id"), patch).await?;
    Ok(Reply::serialized(&UserBody::from(&user)))
});

handler!(delete(api, caller, input) {
    let user = api.app.delete_user(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(user.id.as_str(), "user")))
});

handler!(sign_in_link(api, caller, input) {
    let new = api.app.issue_sign_in_link(caller, input.path_param("id")).await?;
    with_link(api, &new)
});

const LIST_QUERY: &[QueryParam] = &[LIMIT, CURSOR];

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("users");
    let write = Scope::write("users");
    vec![
        Operation {
            name: "svc_list_users",
            method: Method::Get,
            path: "/users",
            summary: "List users",
            description: "The workspace's users.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: LIST_QUERY,
            body: None,
            output: Output::of::<ListBody<UserBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_user",
            method: Method::Post,
            path: "/users",
            summary: "Create a user",
            description: "Creates a user; the answer's one-time `sign_in_link` sets its password.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<UserCreate>()),
            output: Output::of::<UserWithLinkBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: create,
        },
        Operation {
            name: "svc_get_user",
            method: Method::Get,
            path: "/users/{id}",
            summary: "Get a user",
            description: "One user.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<UserBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_user",
            method: Method::Patch,
            path: "/users/{id}",
            summary: "Update a user",
            description: "Changes a user's email, name or role.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<UserUpdate>()),
            output: Output::of::<UserBody>(),
            hints: Hints::UPDATE.no_dry_run(),
            handler: update,
        },
        Operation {
            name: "svc_delete_user",
            method: Method::Delete,
            path: "/users/{id}",
            summary: "Delete a user",
            description: "Deletes a user and ends its sessions.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<DeletedBody>(),
            hints: Hints::DELETE.no_dry_run(),
            handler: delete,
        },
        Operation {
            name: "svc_create_sign_in_link",
            method: Method::Post,
            path: "/users/{id}/sign-in-link",
            summary: "Issue a sign-in link",
            description:
                "A new one-time link to set the user's password; older links stop working.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: None,
            output: Output::of::<UserWithLinkBody>(),
            hints: Hints::CREATE.no_dry_run(),
            handler: sign_in_link,
        },
    ]
}
