//! Plans and their caps (decisions §8).

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plan {
    Free,
    Pro,
    Scale,
}

/// The effective limits of a workspace: its plan's, with any operator overrides applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanLimits {
    pub included_requests: u64,
    /// USD per request beyond the included ones; `None`: no overage, the quota is hard.
    pub overage_price_usd: Option<f64>,
    pub active_automations: u32,
    /// `None`: unlimited.
    pub sequences: Option<u32>,
    pub rate_limit_per_minute: u32,
}

impl Plan {
    pub const ALL: [Plan; 3] = [Plan::Free, Plan::Pro, Plan::Scale];

    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Scale => "scale",
        }
    }

    pub fn parse(s: &str) -> Option<Plan> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn limits(self) -> PlanLimits {
        match self {
            Plan::Free => PlanLimits {
                included_requests: 1_000,
                overage_price_usd: None,
                active_automations: 2,
                sequences: Some(1),
                rate_limit_per_minute: 120,
            },
            Plan::Pro => PlanLimits {
                included_requests: 100_000,
                overage_price_usd: Some(0.001),
                active_automations: 25,
                sequences: Some(10),
                rate_limit_per_minute: 1_200,
            },
            Plan::Scale => PlanLimits {
                included_requests: 1_000_000,
                overage_price_usd: Some(0.0005),
                active_automations: 250,
                sequences: None,
                rate_limit_per_minute: 12_000,
            },
        }
    }
}
