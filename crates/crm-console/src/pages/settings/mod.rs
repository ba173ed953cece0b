//! Settings: the workspace's configuration as pages, one module per section, each shown to those
//! whose role may read it. Every section reads and writes through the catalog's operations, as
//! the rest of the console does.

pub mod account;
pub mod automations;
pub mod email;
pub mod fields;
pub mod imports;
pub mod keys;
pub mod pipelines;
pub mod sequences;
pub mod usage;
pub mod users;
pub mod webhooks;

use askama::Template;
use axum::{extract::State as AxumState, response::Response, routing::get, Router};
use crm_app::Scope;

use crate::{chrome::Chrome, reply::page, session::Signed, State};

/// A section of the settings: its path under `/settings/`, title, what it holds, and the scope
/// that shows it (`None`: every signed-in user).
pub struct Section {
    pub path: &'static str,
    pub title: &'static str,
    pub about: &'static str,
    pub scope: Option<Scope>,
}

pub const SECTIONS: &[Section] = &[
    Section {
        path: "account",
        title: "Your account",
        about: "Your name, email, role, and your password.",
        scope: None,
    },
    Section {
        path: "users",
        title: "Users",
        about: "People who sign in, their roles, and sign-in links.",
        scope: Some(Scope::read("users")),
    },
    Section {
        path: "keys",
        title: "API keys",
        about: "Keys for agents and integrations; a new key's secret is shown once.",
        scope: Some(Scope::read("keys")),
    },
    Section {
        path: "webhooks",
        title: "Webhooks",
        about: "Endpoints that receive signed events, with their deliveries.",
        scope: Some(Scope::read("webhooks")),
    },
    Section {
        path: "automations",
        title: "Automations",
        about: "Rules that act on record events, with their runs.",
        scope: Some(Scope::read("automations")),
    },
    Section {
        path: "sequences",
        title: "Sequences",
        about: "Timed email steps, their preview and enrollments.",
        scope: Some(Scope::read("sequences")),
    },
    Section {
        path: "email",
        title: "Email connection",
        about: "The provider live email is sent through.",
        scope: Some(Scope::read("connections")),
    },
    Section {
        path: "pipelines",
        title: "Pipelines and stages",
        about: "Deal pipelines and their stages.",
        scope: Some(Scope::read("pipelines")),
    },
    Section {
        path: "fields",
        title: "Fields and values",
        about: "Custom fields of contacts, companies and deals, and enum values.",
        scope: Some(Scope::read("registry")),
    },
    Section {
        path: "imports",
        title: "Imports",
        about: "CSV imports and their progress.",
        scope: Some(Scope::read("imports")),
    },
    Section {
        path: "usage",
        title: "Usage and spend cap",
        about: "This month's requests and the cap on overage spending.",
        scope: Some(Scope::read("usage")),
    },
];

/// Whether the signed-in user may see `section`.
pub fn visible(signed: &Signed, section: &Section) -> bool {
    section.scope.is_none_or(|s| signed.caller.scopes.allows(s))
}

#[derive(Template)]
#[template(path = "settings/index.html")]
struct IndexPage<'a> {
    chrome: Chrome,
    sections: Vec<&'a Section>,
}

/// `GET /settings`.
async fn index(AxumState(_state): AxumState<State>, signed: Signed) -> Response {
    let body = IndexPage {
        chrome: Chrome::new(&signed, "settings"),
        sections: SECTIONS.iter().filter(|s| visible(&signed, s)).collect(),
    };
    page(200, &body)
}

/// The settings' routes.
pub fn routes(router: Router<State>) -> Router<State> {
    let router = router.route("/settings", get(index));
    let router = account::routes(router);
    let router = users::routes(router);
    let router = keys::routes(router);
    let router = usage::routes(router);
    let router = webhooks::routes(router);
    let router = automations::routes(router);
    let router = sequences::routes(router);
    let router = email::routes(router);
    let router = imports::routes(router);
    let router = pipelines::routes(router);
    fields::routes(router)
}
