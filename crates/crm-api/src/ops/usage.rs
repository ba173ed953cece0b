//! Usage and settings: `GET /usage`, `GET /settings`, `PATCH /settings` (decisions §8, §17).
//! These three are never counted and stay open when the quota or the spend cap is reached, so
//! a client can always see where it stands and lift the cap.

use crm_app::{plans::Usage, Scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::handler;
use crate::{
    body,
    operation::{Hints, Method, Operation, Output, Reply},
    schema::PatchField,
    Problem,
};

// The answers below are rendered from the types that describe them in the catalog's schemas,
// so the two cannot drift apart, and serialized once, without a `serde_json::Value` between
// (a map whose every key is hashed and allocated).

/// The billing period.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "UsagePeriod")]
pub struct PeriodOut {
    /// First instant of the billing period (the calendar month, UTC).
    start: String,
    /// First instant after it.
    end: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "UsageRequests")]
pub struct RequestsOut {
    /// Requests counted this period in this mode (all but GET /usage and GET/PATCH /settings;
    /// 401s and 429s are not counted). Other servers' counts arrive within about a second.
    used: u64,
    /// Live requests the plan includes; `null` in test mode, which is never metered.
    included: Option<u64>,
    /// Live requests beyond the included ones, billed as overage (0 on the free plan).
    overage: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "UsageAutomations")]
pub struct AutomationsOut {
    active: u64,
    limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "UsageSequences")]
pub struct SequencesOut {
    count: u64,
    /// `null`: unlimited (scale plan).
    limit: Option<u32>,
}

/// Usage of the calling key's mode in the current billing period, with the effective limits.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Usage")]
pub struct UsageOut {
    /// Always `usage`.
    object: &'static str,
    /// `test` or `live`.
    mode: &'static str,
    /// `free`, `pro` or `scale`.
    plan: &'static str,
    period: PeriodOut,
    requests: RequestsOut,
    /// `overage × price per request` (pro $0.001, scale $0.0005), unrounded.
    overage_cost_usd: f64,
    /// The workspace's cap on overage cost; `null` is unlimited, 0 is no overage at all.
    overage_cap_usd: Option<f64>,
    automations: AutomationsOut,
    sequences: SequencesOut,
    /// Requests per minute for this workspace and mode (bursts of up to as many at once).
    rate_limit_per_minute: u32,
}

/// The workspace's settings (shared by both modes).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Settings")]
pub struct SettingsOut {
    /// Always `settings`.
    object: &'static str,
    /// USD cap on metered overage per billing period: a number ≥ 0 (0 means no overage at all) or
    /// `null` (unlimited).
    overage_cap_usd: Option<f64>,
    /// Days history entries are kept (≥ 30), or `null`: forever.
    history_retention_days: Option<u32>,
    /// Days emails are kept (≥ 30), or `null`: forever.
    email_retention_days: Option<u32>,
}

/// The change to the settings. Its schema is written out ([`update_schema`]): the wire types
/// (a cap in USD, whole days of at least 30, each nullable) are narrower than the parse types.
#[derive(Debug, Deserialize)]
pub struct SettingsUpdate {
    /// A number ≥ 0 (0 means never any overage), or `null` for unlimited.
    #[serde(default)]
    pub overage_cap_usd: PatchField<f64>,
    #[serde(default)]
    pub history_retention_days: PatchField<f64>,
    #[serde(default)]
    pub email_retention_days: PatchField<f64>,
}

fn render_usage(u: &Usage) -> UsageOut {
    UsageOut {
        object: "usage",
        mode: u.mode.as_str(),
        plan: u.plan.as_str(),
        period: PeriodOut {
            start: u.period.start.to_string(),
            end: u.period.end.to_string(),
        },
        requests: RequestsOut {
            used: u.used,
            included: u.included(),
            overage: u.overage(),
        },
        overage_cost_usd: u.overage_cost_usd(),
        overage_cap_usd: u.overage_cap_usd,
        automations: AutomationsOut {
            active: u.counts.active_automations,
            limit: u.limits.active_automations,
        },
        sequences: SequencesOut {
            count: u.counts.sequences,
            limit: u.limits.sequences,
        },
        rate_limit_per_minute: u.limits.rate_limit_per_minute,
    }
}

fn render_settings(s: &crm_app::plans::Settings) -> SettingsOut {
    SettingsOut {
        object: "settings",
        overage_cap_usd: s.overage_cap_usd,
        history_retention_days: s.history_retention_days,
        email_retention_days: s.email_retention_days,
    }
}

impl JsonSchema for SettingsUpdate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SettingsUpdate".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::Schema::try_from(update_schema()).expect("the settings schema is an object")
    }
}

fn update_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "overage_cap_usd": {
                "type": ["number", "null"],
                "minimum": 0,
                "description": "USD cap on metered overage per billing period: a number ≥ 0 (0 means never any overage) or null (unlimited).",
            },
            "history_retention_days": {
                "type": ["integer", "null"],
                "minimum": crm_app::plans::MIN_RETENTION_DAYS,
                "maximum": crm_app::plans::MAX_RETENTION_DAYS,
                "description": "Days history is kept (null: forever).",
            },
            "email_retention_days": {
                "type": ["integer", "null"],
                "minimum": crm_app::plans::MIN_RETENTION_DAYS,
                "maximum": crm_app::plans::MAX_RETENTION_DAYS,
                "description": "Days emails are kept (null: forever).",
            },
        },
        "minProperties": 1,
        "additionalProperties": false,
    })
}

handler!(get_usage(api, caller, _input) {
    let usage = api.app.usage(caller).await?;
    Ok(Reply::serialized(&render_usage(&usage)))
});

handler!(get_settings(api, caller, _input) {
    Ok(Reply::serialized(&render_settings(&api.app.all_settings(caller))))
});

handler!(update_settings(api, caller, input) {
    let u: SettingsUpdate = body::parse(input.body.as_ref(), None)?;
    let patch = crm_app::plans::SettingsPatch {
        overage_cap_usd: u.overage_cap_usd.into_patch(),
        history_retention_days: u.history_retention_days.into_patch(),
        email_retention_days: u.email_retention_days.into_patch(),
    };
    if patch.overage_cap_usd.is_absent()
        && patch.history_retention_days.is_absent()
        && patch.email_retention_days.is_absent()
    {
        return Err(Problem::validation("overage_cap_usd", "send at least one setting: overage_cap_usd (a number ≥ 0, or null for unlimited), history_retention_days or email_retention_days (≥ 30, or null)"));
    }
    let settings = api.app.patch_settings(caller, patch).await?;
    Ok(Reply::serialized(&render_settings(&settings)))
});

pub fn operations() -> Vec<Operation> {
    vec![
        Operation {
            name: "svc_get_usage",
            method: Method::Get,
            path: "/usage",
            summary: "Get usage",
            description: "This month's requests, overage, plan caps and rate limit. Not counted; open when capped.",
            scope: Scope::read("usage"),
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<UsageOut>(),
            hints: Hints::READ,
            handler: get_usage,
        },
        Operation {
            name: "svc_get_settings",
            method: Method::Get,
            path: "/settings",
            summary: "Get settings",
            description: "The workspace settings (`overage_cap_usd`, retention days). Not counted; open when capped.",
            scope: Scope::read("settings"),
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<SettingsOut>(),
            hints: Hints::READ,
            handler: get_settings,
        },
        Operation {
            name: "svc_update_settings",
            method: Method::Patch,
            path: "/settings",
            summary: "Update settings",
            description: "Sets `overage_cap_usd` (null: no cap) or `history_retention_days`/`email_retention_days` (≥ 30; null: forever). Not counted; open when capped.",
            scope: Scope::write("settings"),
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<SettingsUpdate>()),
            output: Output::of::<SettingsOut>(),
            hints: Hints::UPDATE,
            handler: update_settings,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::property_names;
    use crate::schema::schema_of;
    use crm_domain::{Mode, Period, Plan, Timestamp};

    #[test]
    fn the_usage_schema_describes_the_document_of_decisions_8() {
        let usage = Usage {
            mode: Mode::Live,
            plan: Plan::Scale,
            period: Period::containing(Timestamp::from_millis(0)),
            used: 1,
            limits: Plan::Scale.limits(),
            overage_cap_usd: None,
            counts: Default::default(),
        };
        let doc = serde_json::to_value(render_usage(&usage)).unwrap();
        let keys: Vec<String> = doc.as_object().unwrap().keys().cloned().collect();
        assert_eq!(property_names(&schema_of::<UsageOut>()), keys);
        assert_eq!(
            keys,
            [
                "object",
                "mode",
                "plan",
                "period",
                "requests",
                "overage_cost_usd",
                "overage_cap_usd",
                "automations",
                "sequences",
                "rate_limit_per_minute"
            ]
        );
        assert_eq!(
            doc["sequences"]["limit"],
            Value::Null,
            "scale has unlimited sequences"
        );
        assert_eq!(doc["period"]["start"], "1970-01-01T00:00:00.000Z");
        assert_eq!(
            property_names(&schema_of::<SettingsOut>()),
            [
                "object",
                "overage_cap_usd",
                "history_retention_days",
                "email_retention_days"
            ]
        );
    }

    /// The typed answers are byte for byte the `json!` documents they replaced (key order,
    /// numbers, nulls), for a live usage with overage, a cap, and unlimited sequences.
    #[test]
    fn typed_answers_serialize_as_the_maps_they_replaced() {
        let usage = Usage {
            mode: Mode::Live,
            plan: Plan::Pro,
            period: Period::containing(Timestamp::from_millis(1_764_547_200_000)),
            used: Plan::Pro.limits().included_requests + 1_234,
            limits: crm_domain::PlanLimits {
                sequences: None,
                ..Plan::Pro.limits()
            },
            overage_cap_usd: Some(12.5),
            counts: crm_app::ports::PlanCounts {
                active_automations: 3,
                sequences: 7,
            },
        };
        let u = &usage;
        let before = json!({
            "object": "usage",
            "mode": u.mode.as_str(),
            "plan": u.plan.as_str(),
            "period": {"start": u.period.start.to_string(), "end": u.period.end.to_string()},
            "requests": {"used": u.used, "included": u.included(), "overage": u.overage()},
            "overage_cost_usd": u.overage_cost_usd(),
            "overage_cap_usd": u.overage_cap_usd,
            "automations": {"active": u.counts.active_automations, "limit": u.limits.active_automations},
            "sequences": {"count": u.counts.sequences, "limit": u.limits.sequences},
            "rate_limit_per_minute": u.limits.rate_limit_per_minute,
        });
        assert_eq!(
            serde_json::to_vec(&render_usage(u)).unwrap(),
            serde_json::to_vec(&before).unwrap()
        );
        for cap in [None, Some(0.0), Some(12.5)] {
            let settings = crm_app::plans::Settings {
                overage_cap_usd: cap,
                history_retention_days: cap.map(|_| 30),
                email_retention_days: None,
            };
            let days = settings.history_retention_days;
            assert_eq!(
                serde_json::to_vec(&render_settings(&settings)).unwrap(),
                serde_json::to_vec(&json!({"object": "settings", "overage_cap_usd": cap,
                    "history_retention_days": days, "email_retention_days": null}))
                .unwrap()
            );
        }
    }

    #[test]
    fn exempt_operations_exist_in_the_catalog() {
        for name in crm_app::metering::EXEMPT_OPERATIONS {
            assert!(crate::catalog::find(name).is_some(), "{name}");
        }
    }
}
