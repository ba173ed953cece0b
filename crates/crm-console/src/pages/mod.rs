//! The console's pages, one module each, and what they share: the record kinds a page may show
//! and the error page.

pub mod board;
pub mod fields;
pub mod lists;
pub mod login;
pub mod records;
pub mod search;
pub mod settings;
pub mod timeline;

use askama::Template;
use axum::response::Response;

use crate::reply::page;

/// The records with list and record pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Contacts,
    Companies,
    Deals,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Contacts, Kind::Companies, Kind::Deals];

    /// The path segment and scope resource: `contacts`.
    pub fn path(self) -> &'static str {
        match self {
            Kind::Contacts => "contacts",
            Kind::Companies => "companies",
            Kind::Deals => "deals",
        }
    }

    /// The object name the schema uses: `contact`.
    pub fn object(self) -> &'static str {
        match self {
            Kind::Contacts => "contact",
            Kind::Companies => "company",
            Kind::Deals => "deal",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::Contacts => "Contacts",
            Kind::Companies => "Companies",
            Kind::Deals => "Deals",
        }
    }

    /// The catalog operation `svc_<verb>_<object>`.
    pub fn op(self, verb: &str) -> &'static str {
        let name = match (self, verb) {
            (Kind::Contacts, "list") => "svc_list_contacts",
            (Kind::Contacts, "get") => "svc_get_contact",
            (Kind::Contacts, "create") => "svc_create_contact",
            (Kind::Contacts, "update") => "svc_update_contact",
            (Kind::Contacts, "delete") => "svc_delete_contact",
            (Kind::Contacts, "restore") => "svc_restore_contact",
            (Kind::Contacts, "history") => "svc_list_contact_history",
            (Kind::Companies, "list") => "svc_list_companies",
            (Kind::Companies, "get") => "svc_get_company",
            (Kind::Companies, "create") => "svc_create_company",
            (Kind::Companies, "update") => "svc_update_company",
            (Kind::Companies, "delete") => "svc_delete_company",
            (Kind::Companies, "restore") => "svc_restore_company",
            (Kind::Companies, "history") => "svc_list_company_history",
            (Kind::Deals, "list") => "svc_list_deals",
            (Kind::Deals, "get") => "svc_get_deal",
            (Kind::Deals, "create") => "svc_create_deal",
            (Kind::Deals, "update") => "svc_update_deal",
            (Kind::Deals, "delete") => "svc_delete_deal",
            (Kind::Deals, "restore") => "svc_restore_deal",
            (Kind::Deals, "history") => "svc_list_deal_history",
            _ => "",
        };
        debug_assert!(!name.is_empty(), "no {verb} operation for {self:?}");
        name
    }

    /// What a record of this kind is called on its page: a contact's name or email, a company's
    /// name, a deal's title.
    pub fn display_name(self, record: &serde_json::Value) -> String {
        let text = |k: &str| record[k].as_str().unwrap_or_default().trim().to_owned();
        let name = match self {
            Kind::Contacts => {
                let full = format!("{} {}", text("first_name"), text("last_name"));
                let full = full.trim().to_owned();
                if full.is_empty() {
                    text("email")
                } else {
                    full
                }
            }
            Kind::Companies => text("name"),
            Kind::Deals => text("title"),
        };
        if name.is_empty() {
            record["id"].as_str().unwrap_or_default().to_owned()
        } else {
            name
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    detail: &'a str,
}

/// A page that says what went wrong, with `status`.
pub fn error_page(status: u16, title: &str, detail: &str) -> Response {
    page(
        status,
        &ErrorPage {
            status,
            title,
            detail,
        },
    )
}
