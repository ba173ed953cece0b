//! Settings, usage and spend cap: this month's requests in the session's mode with the plan's
//! included requests, overage and its cost (`svc_get_usage`), and the workspace's settings
//! (`svc_get_settings`: shared by both modes), with a form that sets the cap on overage spending
//! (blank: unlimited) and the retention days (blank: kept forever) through `svc_update_settings`.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Router,
};
use crm_api::Problem;
use crm_app::Scope;
use serde_json::{Map, Number, Value};

use super::users::short_time;
use crate::{
    chrome::Chrome,
    form::Form,
    ops::call,
    pages::fields::value_text,
    reply::{page, problem_page},
    session::{Posted, Signed},
    State,
};

const PATH: &str = "/settings/usage";

/// The settings as the form shows them: each value's text, blank for none.
#[derive(Default)]
pub struct SettingsForm {
    pub overage_cap_usd: String,
    pub history_retention_days: String,
    pub email_retention_days: String,
}

/// The settings' fields, in the form's order.
const SETTINGS: [&str; 3] = [
    "overage_cap_usd",
    "history_retention_days",
    "email_retention_days",
];

#[derive(Template)]
#[template(path = "settings/usage.html")]
struct UsagePage {
    chrome: Chrome,
    mode: String,
    plan: String,
    period_start: String,
    period_end: String,
    used: String,
    /// `None` in test mode, which is not metered.
    included: Option<String>,
    overage: String,
    cost: String,
    cap: String,
    automations: String,
    sequences: String,
    rate_limit: String,
    /// `None` without `settings:read`.
    settings: Option<SettingsForm>,
    can_write: bool,
    notice: Option<&'static str>,
    error: Option<String>,
}

/// The routes of the usage section.
pub fn routes(router: Router<State>) -> Router<State> {
    router.route(PATH, get(show).post(save))
}

/// The notices a redirect back to this page may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "saved" => "Settings saved. The cap applies from the next request on.",
        _ => return None,
    })
}

/// `1234567` → `1,234,567`.
fn grouped(value: &Value) -> String {
    let Some(n) = value.as_u64() else {
        return value_text(value);
    };
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// An amount in USD with two decimals, or up to four for fractions of a cent: `$0.0125`.
fn usd(value: &Value) -> String {
    let Some(amount) = value.as_f64() else {
        return value_text(value);
    };
    let text = format!("{amount:.4}");
    let trimmed = text.trim_end_matches('0');
    let decimals = trimmed.split_once('.').map_or(0, |(_, d)| d.len());
    let text = if decimals < 2 {
        format!("{amount:.2}")
    } else {
        trimmed.to_owned()
    };
    format!("${text}")
}

/// `3 of 5`; a `null` limit is unlimited.
fn of_limit(count: &Value, limit: &Value) -> String {
    let limit = if limit.is_null() {
        "unlimited".to_owned()
    } else {
        grouped(limit)
    };
    format!("{} of {limit}", grouped(count))
}

fn settings_form(settings: &Value) -> SettingsForm {
    SettingsForm {
        overage_cap_usd: value_text(&settings["overage_cap_usd"]),
        history_retention_days: value_text(&settings["history_retention_days"]),
        email_retention_days: value_text(&settings["email_retention_days"]),
    }
}

/// The page; `sent` replaces the stored settings in the form (a refused save).
async fn usage_page(
    state: &State,
    signed: &Signed,
    status: u16,
    sent: Option<SettingsForm>,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Response {
    let usage = match call(state, signed, "svc_get_usage", Map::new()).await {
        Ok(usage) => usage,
        Err(problem) => return problem_page(signed, &problem),
    };
    let scopes = &signed.caller.scopes;
    let settings = if scopes.allows(Scope::read("settings")) {
        match call(state, signed, "svc_get_settings", Map::new()).await {
            Ok(settings) => Some(sent.unwrap_or_else(|| settings_form(&settings))),
            Err(problem) => return problem_page(signed, &problem),
        }
    } else {
        None
    };
    let requests = &usage["requests"];
    let cap = &usage["overage_cap_usd"];
    let body = UsagePage {
        chrome: Chrome::new(signed, "settings"),
        mode: value_text(&usage["mode"]),
        plan: value_text(&usage["plan"]),
        period_start: short_time(&usage["period"]["start"]),
        period_end: short_time(&usage["period"]["end"]),
        used: grouped(&requests["used"]),
        included: (!requests["included"].is_null()).then(|| grouped(&requests["included"])),
        overage: grouped(&requests["overage"]),
        cost: usd(&usage["overage_cost_usd"]),
        cap: if cap.is_null() {
            "unlimited".to_owned()
        } else {
            usd(cap)
        },
        automations: of_limit(
            &usage["automations"]["active"],
            &usage["automations"]["limit"],
        ),
        sequences: of_limit(&usage["sequences"]["count"], &usage["sequences"]["limit"]),
        rate_limit: grouped(&usage["rate_limit_per_minute"]),
        settings,
        can_write: scopes.allows(Scope::write("settings")),
        notice,
        error,
    };
    page(status, &body)
}

/// `GET /settings/usage`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(q): RawQuery,
) -> Response {
    let query = Form::parse(q.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    usage_page(&state, &signed, 200, None, notice, None).await
}

/// A submitted setting as JSON: blank is `null`; a number as a number (a leading `$` and
/// thousands' commas allowed); anything else as text, for the API's validation to name.
fn setting_value(text: Option<&str>) -> Value {
    let Some(text) = text else {
        return Value::Null;
    };
    let plain: String = text
        .trim_start_matches('$')
        .chars()
        .filter(|c| *c != ',')
        .collect();
    if let Ok(whole) = plain.parse::<i64>() {
        return Value::from(whole);
    }
    plain
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or_else(|| Value::String(text.to_owned()), Value::Number)
}

/// The body of `svc_update_settings` from the form: every setting.
fn settings_body(form: &Form) -> Map<String, Value> {
    SETTINGS
        .iter()
        .map(|name| ((*name).to_owned(), setting_value(form.text(name))))
        .collect()
}

fn refusal(problem: &Problem) -> String {
    match problem.extra.get("field").and_then(Value::as_str) {
        Some(field) => format!("{} ({field})", problem.detail),
        None => problem.detail.clone(),
    }
}

/// `POST /settings/usage`: saves the cap and the retention days.
async fn save(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    match call(&state, &signed, "svc_update_settings", settings_body(&form)).await {
        Ok(_) => Redirect::to(&format!("{PATH}?notice=saved")).into_response(),
        Err(problem) if matches!(problem.status(), 403 | 422) => {
            let text = |name: &str| form.text(name).unwrap_or_default().to_owned();
            let sent = SettingsForm {
                overage_cap_usd: text("overage_cap_usd"),
                history_retention_days: text("history_retention_days"),
                email_retention_days: text("email_retention_days"),
            };
            let error = Some(refusal(&problem));
            usage_page(&state, &signed, problem.status(), Some(sent), None, error).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_are_sent_as_numbers_or_null() {
        let form = Form::parse(
            b"overage_cap_usd=%2412.50&history_retention_days=1%2C000&email_retention_days=+",
        );
        assert_eq!(
            Value::Object(settings_body(&form)),
            json!({"overage_cap_usd": 12.5, "history_retention_days": 1000, "email_retention_days": null})
        );
        assert_eq!(setting_value(Some("lots")), json!("lots"));
        assert_eq!(setting_value(Some("0")), json!(0));
    }

    #[test]
    fn numbers_are_shown_for_people() {
        assert_eq!(grouped(&json!(1234567)), "1,234,567");
        assert_eq!(grouped(&json!(12)), "12");
        assert_eq!(usd(&json!(0)), "$0.00");
        assert_eq!(usd(&json!(1.234)), "$1.234");
        assert_eq!(usd(&json!(12.5)), "$12.50");
        assert_eq!(usd(&json!(0.00125)), "$0.0013");
        assert_eq!(of_limit(&json!(3), &json!(5)), "3 of 5");
        assert_eq!(of_limit(&json!(2), &Value::Null), "2 of unlimited");
        assert!(notice_text("saved").is_some() && notice_text("x").is_none());
    }
}
