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

impl Plan {
    /// The plan's limits with an operator's overrides applied (decisions §7: custom contracts, and
    /// tests that need a small quota).
    pub fn limits_with(
        self,
        rate_limit_per_minute: Option<u32>,
        included_requests: Option<u64>,
    ) -> PlanLimits {
        let mut limits = self.limits();
        if let Some(n) = rate_limit_per_minute {
            limits.rate_limit_per_minute = n;
        }
        if let Some(n) = included_requests {
            limits.included_requests = n;
        }
        limits
    }
}

/// What refusing a live request past the period's allowance is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A plan without overage (free): the included requests are all there is.
    QuotaExceeded,
    /// A paid plan whose next request would take the overage cost past `overage_cap_usd`.
    SpendCapReached,
}

/// How many live requests a billing period admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    Unlimited,
    Capped { requests: u64, refusal: Refusal },
}

/// Caps of a plan that creates and enables are checked against (counted per mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanCap {
    ActiveAutomations,
    Sequences,
}

impl PlanCap {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanCap::ActiveAutomations => "active_automations",
            PlanCap::Sequences => "sequences",
        }
    }
}

/// Tolerance for `cap / price`, which floating point may land a hair under a whole number
/// (1.0 / 0.001 must allow 1,000 requests, not 999).
const RATIO_EPSILON: f64 = 1e-9;

impl PlanLimits {
    /// The live requests a period admits under these limits and the workspace's
    /// `overage_cap_usd` (`None`: unlimited; 0: no overage at all).
    ///
    /// Refusing "when the next request would make the overage cost exceed the cap" is the same as
    /// admitting at most `included + floor(cap / price)` requests, which is what makes the cap a
    /// plain count that can be reserved ahead (see `crm-app`'s meter).
    pub fn live_allowance(&self, overage_cap_usd: Option<f64>) -> Allowance {
        match (self.overage_price_usd, overage_cap_usd) {
            (None, _) => Allowance::Capped {
                requests: self.included_requests,
                refusal: Refusal::QuotaExceeded,
            },
            (Some(_), None) => Allowance::Unlimited,
            (Some(price), Some(cap)) => {
                let ratio = (cap.max(0.0) / price + RATIO_EPSILON).floor();
                // `as` saturates: a cap of 1e300 USD is as good as unlimited.
                let overage = ratio as u64;
                Allowance::Capped {
                    requests: self.included_requests.saturating_add(overage),
                    refusal: Refusal::SpendCapReached,
                }
            }
        }
    }

    /// Live requests beyond the included ones that are billed (none on a plan without overage).
    pub fn overage(&self, used: u64) -> u64 {
        match self.overage_price_usd {
            Some(_) => used.saturating_sub(self.included_requests),
            None => 0,
        }
    }

    /// `overage × price`, unrounded (decisions §17).
    pub fn overage_cost_usd(&self, used: u64) -> f64 {
        self.overage_price_usd
            .map_or(0.0, |price| self.overage(used) as f64 * price)
    }

    /// The cap on `cap`, `None` when unlimited.
    pub fn cap(&self, cap: PlanCap) -> Option<u32> {
        match cap {
            PlanCap::ActiveAutomations => Some(self.active_automations),
            PlanCap::Sequences => self.sequences,
        }
    }

    /// Whether one more (beyond `current`) stays within `cap`; `Err(limit)` when it would not.
    pub fn check_cap(&self, cap: PlanCap, current: u64) -> Result<(), u32> {
        match self.cap(cap) {
            Some(limit) if current >= u64::from(limit) => Err(limit),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_only_what_they_name() {
        let l = Plan::Pro.limits_with(Some(30), None);
        assert_eq!(l.rate_limit_per_minute, 30);
        assert_eq!(l.included_requests, 100_000);
        assert_eq!(Plan::Free.limits_with(None, Some(5)).included_requests, 5);
    }

    #[test]
    fn free_is_a_hard_quota_whatever_the_cap() {
        for cap in [None, Some(0.0), Some(100.0)] {
            assert_eq!(
                Plan::Free.limits().live_allowance(cap),
                Allowance::Capped {
                    requests: 1_000,
                    refusal: Refusal::QuotaExceeded
                }
            );
        }
    }

    #[test]
    fn paid_plans_admit_included_plus_what_the_cap_pays_for() {
        let pro = Plan::Pro.limits_with(None, Some(5));
        assert_eq!(pro.live_allowance(None), Allowance::Unlimited);
        assert_eq!(
            pro.live_allowance(Some(0.0)),
            Allowance::Capped {
                requests: 5,
                refusal: Refusal::SpendCapReached
            }
        );
        // $1 buys exactly 1,000 requests at $0.001, despite 0.001 having no exact binary form.
        assert_eq!(
            pro.live_allowance(Some(1.0)),
            Allowance::Capped {
                requests: 1_005,
                refusal: Refusal::SpendCapReached
            }
        );
        // Half a request's price buys nothing.
        assert_eq!(
            pro.live_allowance(Some(0.0005)),
            Allowance::Capped {
                requests: 5,
                refusal: Refusal::SpendCapReached
            }
        );
        let scale = Plan::Scale.limits_with(None, Some(0));
        assert_eq!(
            scale.live_allowance(Some(0.003)),
            Allowance::Capped {
                requests: 6,
                refusal: Refusal::SpendCapReached
            }
        );
        assert!(matches!(
            pro.live_allowance(Some(1e300)),
            Allowance::Capped {
                requests: u64::MAX,
                ..
            }
        ));
    }

    #[test]
    fn overage_is_priced_per_request_unrounded() {
        let pro = Plan::Pro.limits_with(None, Some(5));
        assert_eq!(pro.overage(3), 0);
        assert_eq!(pro.overage(8), 3);
        assert!((pro.overage_cost_usd(8) - 0.003).abs() < 1e-12);
        assert_eq!(Plan::Free.limits().overage(5_000), 0);
        assert_eq!(Plan::Free.limits().overage_cost_usd(5_000), 0.0);
    }

    #[test]
    fn caps_refuse_the_one_past_the_limit() {
        let free = Plan::Free.limits();
        assert_eq!(free.check_cap(PlanCap::ActiveAutomations, 1), Ok(()));
        assert_eq!(free.check_cap(PlanCap::ActiveAutomations, 2), Err(2));
        assert_eq!(free.check_cap(PlanCap::Sequences, 0), Ok(()));
        assert_eq!(free.check_cap(PlanCap::Sequences, 1), Err(1));
        assert_eq!(
            Plan::Scale
                .limits()
                .check_cap(PlanCap::Sequences, 1_000_000),
            Ok(())
        );
    }
}
