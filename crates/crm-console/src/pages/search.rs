//! Global search (`/` or Ctrl+K from any page): contacts, companies and deals whose names,
//! emails, phones, domains or titles hold the text, by `svc_search_records`.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::Response,
};

use crate::{
    args,
    chrome::Chrome,
    form::Form,
    ops::call,
    pages::{fields::value_text, lists::Row, Kind},
    reply::{page, problem_page},
    session::Signed,
    State,
};

pub struct Section {
    pub title: &'static str,
    pub path: &'static str,
    pub rows: Vec<Row>,
    pub has_more: bool,
}

#[derive(Template)]
#[template(path = "search.html")]
struct SearchPage {
    chrome: Chrome,
    q: String,
    sections: Vec<Section>,
}

/// `GET /search?q=`.
pub async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let q = query.text("q").unwrap_or_default().to_owned();
    let mut sections = Vec::new();
    if !q.is_empty() {
        let found = match call(
            &state,
            &signed,
            "svc_search_records",
            args! {"q" => q.clone(), "limit" => "20"},
        )
        .await
        {
            Ok(found) => found,
            Err(problem) => return problem_page(&signed, &problem),
        };
        for kind in Kind::ALL {
            let section = &found[kind.path()];
            if !section.is_object() {
                // The user may not read this kind: the search leaves it out.
                continue;
            }
            let rows = section["data"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .map(|r| Row {
                            id: value_text(&r["id"]),
                            name: kind.display_name(r),
                            cells: Vec::new(),
                            deleted: false,
                        })
                        .collect()
                })
                .unwrap_or_default();
            sections.push(Section {
                title: kind.title(),
                path: kind.path(),
                rows,
                has_more: section["has_more"] == true,
            });
        }
    }
    let body = SearchPage {
        chrome: Chrome::new(&signed, "search"),
        q,
        sections,
    };
    page(200, &body)
}
