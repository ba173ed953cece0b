//! Plans, settings and usage: what an operator's `set-plan` changes, what `PATCH /settings`
//! changes, what `GET /usage` reports, and the plan caps that creates and enables check.

use crm_domain::{
    audit::changes, history::Channel, Mode, Patch, Period, Plan, PlanCap, PlanLimits, Tenant,
    ValidationError, WorkspaceId,
};
use serde_json::{json, Value};

use crate::{
    audit::{operator, Audited},
    auth::Caller,
    auth::Workspace,
    error::AppError,
    ports::PlanCounts,
    ports::Tx,
    workspaces::Overrides,
    App,
};

/// The usage of the caller's tenant in the current billing period.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub mode: Mode,
    pub plan: Plan,
    pub period: Period,
    /// Requests counted (durably, plus what this process has not flushed yet).
    pub used: u64,
    pub limits: PlanLimits,
    pub overage_cap_usd: Option<f64>,
    pub counts: PlanCounts,
}

impl Usage {
    /// Test mode is never metered: it has no included amount and no overage.
    pub fn included(&self) -> Option<u64> {
        (self.mode == Mode::Live).then_some(self.limits.included_requests)
    }

    pub fn overage(&self) -> u64 {
        if self.mode == Mode::Live {
            self.limits.overage(self.used)
        } else {
            0
        }
    }

    pub fn overage_cost_usd(&self) -> f64 {
        if self.mode == Mode::Live {
            self.limits.overage_cost_usd(self.used)
        } else {
            0.0
        }
    }
}

/// A plan change by the operator: overrides not given are kept; `clear_overrides` drops them first.
#[derive(Debug, Clone)]
pub struct PlanChange {
    pub plan: Plan,
    pub overrides: Overrides,
    pub clear_overrides: bool,
}

/// The fewest days history or emails may be kept for (decisions §25).
pub const MIN_RETENTION_DAYS: u32 = 30;
/// The most days a retention setting takes (a century).
pub const MAX_RETENTION_DAYS: u32 = 36_500;

/// The workspace's settings (decisions §8, §25), shared by both modes.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub overage_cap_usd: Option<f64>,
    pub history_retention_days: Option<u32>,
    pub email_retention_days: Option<u32>,
}

impl Settings {
    fn of(ws: &Workspace) -> Settings {
        Settings {
            overage_cap_usd: ws.overage_cap_usd,
            history_retention_days: ws.history_retention_days,
            email_retention_days: ws.email_retention_days,
        }
    }

    fn shape(&self) -> Value {
        json!({
            "overage_cap_usd": self.overage_cap_usd,
            "history_retention_days": self.history_retention_days,
            "email_retention_days": self.email_retention_days,
        })
    }
}

/// A change to the settings: each member left alone, cleared (`null`) or set.
#[derive(Debug, Clone, Default)]
pub struct SettingsPatch {
    pub overage_cap_usd: Patch<f64>,
    /// Whole days (any integral number); checked to be at least [`MIN_RETENTION_DAYS`].
    pub history_retention_days: Patch<f64>,
    pub email_retention_days: Patch<f64>,
}

fn plan_shape(ws: &Workspace) -> Value {
    json!({
        "plan": ws.plan.as_str(),
        "rate_limit_per_minute": ws.rate_limit_override,
        "included_requests": ws.included_requests_override,
    })
}

fn check_retention_days(field: &str, days: f64) -> Result<u32, AppError> {
    if days.fract() != 0.0
        || days < f64::from(MIN_RETENTION_DAYS)
        || days > f64::from(MAX_RETENTION_DAYS)
    {
        return Err(ValidationError::invalid(
            field,
            format!("{field} must be a whole number of days from {MIN_RETENTION_DAYS} to {MAX_RETENTION_DAYS}, or null (kept forever)"),
        )
        .into());
    }
    Ok(days as u32)
}

fn check_cap_value(cap: Option<f64>) -> Result<Option<f64>, AppError> {
    match cap {
        Some(c) if !c.is_finite() || c < 0.0 => Err(ValidationError::invalid(
            "overage_cap_usd",
            "overage_cap_usd must be a number ≥ 0 (0 means no overage) or null (unlimited)",
        )
        .into()),
        other => Ok(other),
    }
}

/// Fails with `plan_limit` when one more `cap` object (a create, or an enable) would pass the
/// plan's cap in the caller's tenant. Call it inside the write transaction that creates or
/// enables, before writing: the store serialises counters of one tenant there (SQLite's single
/// writer; a lock on the workspace row on Postgres), so two concurrent creates cannot both pass.
pub async fn check_plan_cap(
    tx: &mut dyn Tx,
    caller: &Caller,
    cap: PlanCap,
) -> Result<(), AppError> {
    let counts = tx.count_plan_objects(&caller.tenant).await?;
    let (current, what) = match cap {
        PlanCap::ActiveAutomations => (counts.active_automations, "active automations"),
        PlanCap::Sequences => (counts.sequences, "sequences"),
    };
    caller
        .workspace
        .limits()
        .check_cap(cap, current)
        .map_err(|limit| AppError::PlanLimit {
            cap: cap.as_str(),
            what,
            plan: caller.workspace.plan.as_str(),
            limit,
        })
}

impl App {
    /// The usage document's data for the caller's tenant and the current period.
    pub async fn usage(&self, caller: &Caller) -> Result<Usage, AppError> {
        let period = Period::containing(self.clock.now());
        let tenant: &Tenant = &caller.tenant;
        let (stored, counts) = {
            let mut tx = self.store.begin_read().await?;
            (
                tx.get_usage(tenant, period.start).await?,
                tx.count_plan_objects(tenant).await?,
            )
        };
        let pending = self.meter.pending(tenant, period).await;
        Ok(Usage {
            mode: tenant.mode,
            plan: caller.workspace.plan,
            period,
            used: stored + pending,
            limits: caller.workspace.limits(),
            overage_cap_usd: caller.workspace.overage_cap_usd,
            counts,
        })
    }

    /// The workspace's settings (they belong to the workspace, not to a mode).
    pub fn settings(&self, caller: &Caller) -> Option<f64> {
        caller.workspace.overage_cap_usd
    }

    /// Every setting of the caller's workspace, as its key last read it.
    pub fn all_settings(&self, caller: &Caller) -> Settings {
        Settings::of(&caller.workspace)
    }

    /// Sets `overage_cap_usd` (≥ 0, or `None` for unlimited). It applies from the next request
    /// on, on every server process (workspaces are read with each request's key).
    pub async fn update_settings(
        &self,
        caller: &Caller,
        overage_cap_usd: Option<f64>,
    ) -> Result<Option<f64>, AppError> {
        let patch = SettingsPatch {
            overage_cap_usd: overage_cap_usd.map_or(Patch::Null, Patch::Value),
            ..SettingsPatch::default()
        };
        Ok(self.patch_settings(caller, patch).await?.overage_cap_usd)
    }

    /// Applies `patch` to the workspace's settings (decisions §8, §25) and records the change in
    /// the audit log of both modes. A patch that changes nothing writes nothing.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn patch_settings(
        &self,
        caller: &Caller,
        patch: SettingsPatch,
    ) -> Result<Settings, AppError> {
        let cap = patch
            .overage_cap_usd
            .try_map(|c| check_cap_value(Some(c)).map(|c| c.unwrap_or_default()))?;
        let history = patch
            .history_retention_days
            .try_map(|d| check_retention_days("history_retention_days", d))?;
        let email = patch
            .email_retention_days
            .try_map(|d| check_retention_days("email_retention_days", d))?;
        let mut tx = self.store.begin_write().await?;
        let mut ws = tx
            .get_workspace(&caller.tenant.workspace_id)
            .await?
            .ok_or_else(|| AppError::Internal("the caller's workspace is gone".into()))?;
        let before = Settings::of(&ws);
        let mut changed = cap.apply_to(&mut ws.overage_cap_usd);
        changed |= history.apply_to(&mut ws.history_retention_days);
        changed |= email.apply_to(&mut ws.email_retention_days);
        let after = Settings::of(&ws);
        if !changed {
            return Ok(after);
        }
        tx.mark_config_changed(&ws.id);
        tx.update_workspace(&ws).await?;
        let author = caller.author(crm_domain::history::Via::Direct);
        let what = Audited::new(
            "settings.updated",
            "settings",
            ws.id.as_str(),
            changes(Some(&before.shape()), Some(&after.shape())),
        );
        self.audit_workspace(
            &mut tx,
            &ws.id,
            author.actor,
            author.channel,
            author.request_id,
            what,
        )
        .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// The operator's `workspace set-plan`. Running servers apply it from their next request.
    pub async fn set_plan(
        &self,
        workspace_id: &str,
        change: PlanChange,
    ) -> Result<Workspace, AppError> {
        let id = WorkspaceId::parse(workspace_id)
            .map_err(|_| AppError::not_found("workspace", workspace_id))?;
        let mut tx = self.store.begin_write().await?;
        let mut ws = tx
            .get_workspace(&id)
            .await?
            .ok_or_else(|| AppError::not_found("workspace", workspace_id))?;
        let before = ws.clone();
        ws.plan = change.plan;
        if change.clear_overrides {
            ws.rate_limit_override = None;
            ws.included_requests_override = None;
        }
        if let Some(n) = change.overrides.rate_limit_per_minute {
            ws.rate_limit_override = Some(n);
        }
        if let Some(n) = change.overrides.included_requests {
            ws.included_requests_override = Some(n);
        }
        tx.mark_config_changed(&ws.id);
        tx.update_workspace(&ws).await?;
        let what = Audited::new(
            "plan.changed",
            "workspace",
            ws.id.as_str(),
            changes(Some(&plan_shape(&before)), Some(&plan_shape(&ws))),
        );
        self.audit_workspace(&mut tx, &ws.id, operator(), Channel::Cli, None, what)
            .await?;
        tx.commit().await?;
        Ok(ws)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_a_number_at_least_zero_or_null() {
        assert_eq!(check_cap_value(None).unwrap(), None);
        assert_eq!(check_cap_value(Some(0.0)).unwrap(), Some(0.0));
        assert_eq!(check_cap_value(Some(12.5)).unwrap(), Some(12.5));
        assert!(check_cap_value(Some(-0.01)).is_err());
        assert!(check_cap_value(Some(f64::NAN)).is_err());
    }

    #[test]
    fn test_mode_usage_is_never_metered() {
        let usage = |mode| Usage {
            mode,
            plan: Plan::Pro,
            period: Period::containing(crm_domain::Timestamp::from_millis(0)),
            used: 8,
            limits: Plan::Pro.limits_with(None, Some(5)),
            overage_cap_usd: None,
            counts: PlanCounts::default(),
        };
        let test = usage(Mode::Test);
        assert_eq!(
            (test.included(), test.overage(), test.overage_cost_usd()),
            (None, 0, 0.0)
        );
        let live = usage(Mode::Live);
        assert_eq!((live.included(), live.overage()), (Some(5), 3));
        assert!((live.overage_cost_usd() - 0.003).abs() < 1e-12);
    }
}
