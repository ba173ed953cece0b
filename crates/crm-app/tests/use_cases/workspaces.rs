//! Workspaces: creation with their keys, the first start, plans and settings.

use crm_app::{plans::PlanChange, workspaces::Overrides, AppError};
use crm_domain::Plan;

use crate::support::env;

#[tokio::test]
async fn a_new_workspace_has_a_working_key_per_mode_and_a_default_pipeline() {
    let env = env().await;
    assert_eq!(env.caller.tenant.workspace_id, env.live.tenant.workspace_id);
    assert_ne!(env.caller.tenant.mode, env.live.tenant.mode);
    for caller in [&env.caller, &env.live] {
        let pipeline = env.app.get_pipeline(caller, "default").await.unwrap();
        assert!(pipeline.is_default);
    }
}

#[tokio::test]
async fn bootstrap_creates_a_workspace_only_on_an_empty_database() {
    let env = env().await;
    assert!(
        env.app.bootstrap().await.unwrap().is_none(),
        "the test's workspace exists"
    );
}

#[tokio::test]
async fn a_plan_change_applies_to_the_next_authentication() {
    let env = env().await;
    let change = PlanChange {
        plan: Plan::Pro,
        overrides: Overrides {
            rate_limit_per_minute: Some(7),
            included_requests: None,
        },
        clear_overrides: false,
    };
    let ws = env
        .app
        .set_plan(env.caller.tenant.workspace_id.as_str(), change)
        .await
        .unwrap();
    assert_eq!(ws.plan, Plan::Pro);
    let caller = env
        .app
        .authenticate(Some(&format!("Bearer {}", env.test_key)))
        .await
        .unwrap();
    assert_eq!(caller.workspace.plan, Plan::Pro);
    assert_eq!(caller.workspace.limits().rate_limit_per_minute, 7);
}

#[tokio::test]
async fn the_spend_cap_is_a_number_at_least_zero_and_is_kept() {
    let env = env().await;
    let refused = env.app.update_settings(&env.caller, Some(-1.0)).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
    let cap = env
        .app
        .update_settings(&env.caller, Some(12.5))
        .await
        .unwrap();
    assert_eq!(cap, Some(12.5));
    let caller = env
        .app
        .authenticate(Some(&format!("Bearer {}", env.test_key)))
        .await
        .unwrap();
    assert_eq!(env.app.settings(&caller), Some(12.5));
}

#[tokio::test]
async fn set_plan_of_an_unknown_workspace_is_not_found() {
    let env = env().await;
    let change = PlanChange {
        plan: Plan::Pro,
        overrides: Overrides::default(),
        clear_overrides: true,
    };
    let missing = env.app.set_plan("wsp_nope", change).await;
    assert!(
        matches!(missing, Err(AppError::NotFound { .. })),
        "{missing:?}"
    );
}
