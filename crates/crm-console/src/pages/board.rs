//! The board: one column per stage of the chosen pipeline, the first cards of each with "show
//! more" for the rest, each column's count and value from the server, and moving a card: dropped
//! on a column, or by its Move button, which opens the board's one move form (a select of the
//! stages) for that card, so that it works by keyboard; without the script a deal's stage is
//! changed on its page. One form for the board rather than one per card keeps a board of 250
//! cards under 100 KB. A move is an update with `If-Match`: when someone else changed the deal
//! first, the board shows its newer state and says so.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
};
use crm_api::ErrorCode;
use serde_json::Value;

use crate::{
    args,
    chrome::{can_write, Chrome},
    form::{encode, Form},
    ops::call,
    pages::{fields::money, Kind},
    reply::{page, problem_page},
    session::{Posted, Signed},
    State,
};

/// Cards shown per column before "show more".
pub const CARDS_PER_COLUMN: u32 = 50;

pub struct Card {
    pub id: String,
    pub title: String,
    pub value: String,
    pub company: String,
    pub contact: String,
    pub version: i64,
}

pub struct Column {
    pub key: String,
    pub label: String,
    pub stage_type: String,
    pub cards: Vec<Card>,
    /// How many deals the stage holds, and their value, from the server.
    pub count: u64,
    pub total: String,
    /// The link to this column's next cards, when there are more.
    pub more: Option<String>,
}

#[derive(Template)]
#[template(path = "board.html")]
struct BoardPage {
    chrome: Chrome,
    pipelines: Vec<(String, String, bool)>,
    pipeline_id: String,
    pipeline_name: String,
    columns: Vec<Column>,
    stages: Vec<(String, String)>,
    can_move: bool,
    notice: Option<String>,
    /// Only the signed-in user's deals (`mine=true`).
    mine: bool,
}

/// `GET /?pipeline=<id>&mine=true&stage=<key>&cursor=<c>&conflict=<deal id>`.
pub async fn page_handler(state: &State, signed: &Signed, query: &Form) -> Response {
    let mine = query.get("mine").is_some();
    let owner = signed.session.user.id.to_string();
    let pipelines = match call(
        state,
        signed,
        "svc_list_pipelines",
        args! {"limit" => "100"},
    )
    .await
    {
        Ok(list) => list["data"].as_array().cloned().unwrap_or_default(),
        Err(problem) => return problem_page(signed, &problem),
    };
    let chosen = query.text("pipeline");
    let pipeline = pipelines
        .iter()
        .find(|p| chosen.is_some_and(|c| p["id"] == c || p["key"] == c))
        .or_else(|| pipelines.iter().find(|p| p["is_default"] == true))
        .or_else(|| pipelines.first())
        .cloned()
        .unwrap_or(Value::Null);
    let pipeline_id = pipeline["id"].as_str().unwrap_or_default().to_owned();
    let mut stages: Vec<&Value> = pipeline["stages"]
        .as_array()
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    stages.sort_by_key(|s| s["ordinal"].as_u64().unwrap_or(0));
    let totals = if pipeline_id.is_empty() {
        Value::Null
    } else {
        let mut totals_args = args! {"id" => pipeline_id.clone()};
        if mine {
            totals_args.insert("owner_id".into(), owner.clone().into());
        }
        match call(state, signed, "svc_get_pipeline_totals", totals_args).await {
            Ok(t) => t,
            Err(problem) => return problem_page(signed, &problem),
        }
    };
    let mut columns = Vec::new();
    for stage in &stages {
        let key = stage["key"].as_str().unwrap_or_default();
        let cursor = query
            .text("cursor")
            .filter(|_| query.text("stage") == Some(key));
        let mut list_args = args! {
            "pipeline_id" => pipeline_id.clone(),
            "stage" => key,
            "limit" => CARDS_PER_COLUMN.to_string(),
            "expand" => "company,primary_contact",
        };
        if let Some(c) = cursor {
            list_args.insert("cursor".into(), c.into());
        }
        if mine {
            list_args.insert("owner_id".into(), owner.clone().into());
        }
        let list = match call(state, signed, "svc_list_deals", list_args).await {
            Ok(list) => list,
            Err(problem) => return problem_page(signed, &problem),
        };
        let total = totals["stages"]
            .as_array()
            .and_then(|all| all.iter().find(|t| t["stage"] == key))
            .cloned()
            .unwrap_or(Value::Null);
        let more = list["next_cursor"].as_str().map(|next| {
            format!(
                "{}&stage={}&cursor={}",
                board_path(&pipeline_id, mine),
                encode(key),
                encode(next)
            )
        });
        columns.push(Column {
            key: key.to_owned(),
            label: stage["label"].as_str().unwrap_or(key).to_owned(),
            stage_type: stage["type"].as_str().unwrap_or("open").to_owned(),
            cards: list["data"]
                .as_array()
                .map(|d| d.iter().map(card).collect())
                .unwrap_or_default(),
            count: total["deals"].as_u64().unwrap_or(0),
            total: totals_text(&total["values"]),
            more,
        });
    }
    let notice = query.text("conflict").map(|id| {
        let title = columns
            .iter()
            .flat_map(|c| &c.cards)
            .find(|card| card.id == id)
            .map_or_else(|| "This deal".to_owned(), |c| format!("“{}”", c.title));
        format!("{title} was changed by someone else first: the board shows its newer state. Move it again if you still want to.")
    });
    let board = BoardPage {
        chrome: Chrome::new(signed, "board"),
        pipelines: pipelines
            .iter()
            .map(|p| {
                let id = p["id"].as_str().unwrap_or_default().to_owned();
                let chosen = id == pipeline_id;
                (
                    id,
                    p["name"].as_str().unwrap_or_default().to_owned(),
                    chosen,
                )
            })
            .collect(),
        pipeline_name: pipeline["name"].as_str().unwrap_or_default().to_owned(),
        pipeline_id,
        stages: stages
            .iter()
            .map(|s| {
                let key = s["key"].as_str().unwrap_or_default().to_owned();
                let label = s["label"].as_str().unwrap_or(&key).to_owned();
                (key, label)
            })
            .collect(),
        columns,
        can_move: can_write(signed, Kind::Deals),
        notice,
        mine,
    };
    page(200, &board)
}

/// `GET /`: the board.
pub async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    page_handler(&state, &signed, &query).await
}

/// The board of a pipeline, of the signed-in user's deals only when `mine`.
fn board_path(pipeline_id: &str, mine: bool) -> String {
    let mine = if mine { "&mine=true" } else { "" };
    format!("/?pipeline={}{mine}", encode(pipeline_id))
}

fn card(deal: &Value) -> Card {
    let company = deal["company"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let contact = &deal["primary_contact"];
    let contact = if contact.is_object() {
        Kind::Contacts.display_name(contact)
    } else {
        String::new()
    };
    Card {
        id: deal["id"].as_str().unwrap_or_default().to_owned(),
        title: deal["title"].as_str().unwrap_or_default().to_owned(),
        value: money(&deal["value_cents"], &deal["currency"]),
        company,
        contact,
        version: deal["version"].as_i64().unwrap_or(0),
    }
}

/// A column's value: one amount per currency, e.g. `12,000.00 USD · 3,000.00 EUR`.
fn totals_text(values: &Value) -> String {
    values
        .as_array()
        .map(|all| {
            all.iter()
                .map(|v| money(&v["value_cents"], &v["currency"]))
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(" · ")
        })
        .unwrap_or_default()
}

/// `POST /board/move`: the form's deal to the chosen stage, if it is still the version shown.
pub async fn move_deal(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let id = form.text("deal").unwrap_or_default().to_owned();
    let pipeline = form.text("pipeline").unwrap_or_default().to_owned();
    let back = board_path(&pipeline, form.get("mine").is_some());
    let Some(stage) = form.text("stage") else {
        return Redirect::to(&back).into_response();
    };
    let mut update = args! {"id" => id.clone(), "stage" => stage};
    if let Some(version) = form.text("version") {
        update.insert("if_match".into(), version.into());
    }
    match call(&state, &signed, "svc_update_deal", update).await {
        Ok(_) => Redirect::to(&back).into_response(),
        Err(problem) if problem.code == ErrorCode::VersionConflict => {
            let to = format!("{back}&conflict={}", encode(&id));
            Redirect::to(&to).into_response()
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}
