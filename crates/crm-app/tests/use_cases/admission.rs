//! Admission: the rate limit first, then counting against the quota, with the operations that
//! stay open at the quota.

use std::sync::Arc;

use async_trait::async_trait;
use crm_app::{
    metering::EXEMPT_OPERATIONS, workspaces::Overrides, AppError, RateLimiter, RateStatus,
};
use crm_domain::{Plan, Tenant};

use crate::support::{env, env_with, full_budget, AdmitAll};

mockall::mock! {
    pub Limiter {}

    #[async_trait]
    impl RateLimiter for Limiter {
        async fn acquire(&self, tenant: &Tenant, per_minute: u32) -> RateStatus;
        fn acquire_now(&self, tenant: &Tenant, per_minute: u32) -> Option<RateStatus>;
    }
}

fn refused() -> RateStatus {
    RateStatus {
        allowed: false,
        limit: 60,
        remaining: 0,
        reset_secs: 60,
        retry_after_secs: 3,
    }
}

#[tokio::test]
async fn a_request_the_limiter_refuses_is_rate_limited_and_not_counted() {
    let mut limiter = MockLimiter::new();
    limiter
        .expect_acquire_now()
        .returning(|_, _| Some(refused()));
    let env = env_with(Arc::new(limiter), Plan::Free, Overrides::default()).await;
    let answer = env.app.admit(&env.caller, "svc_create_contact").await;
    let refusal = answer.expect_err("the limiter refused");
    assert!(matches!(
        refusal.error,
        AppError::RateLimited {
            retry_after_secs: 3
        }
    ));
    assert_eq!(refusal.rate, Some(refused()));
    assert_eq!(env.meter.counted(&env.caller.tenant), 0);
}

#[tokio::test]
async fn a_shared_limiter_is_awaited_when_it_has_no_answer_at_once() {
    let mut limiter = MockLimiter::new();
    limiter.expect_acquire_now().returning(|_, _| None);
    limiter
        .expect_acquire()
        .times(1)
        .returning(|_, per_minute| full_budget(per_minute));
    let env = env_with(Arc::new(limiter), Plan::Free, Overrides::default()).await;
    let admitted = env
        .app
        .admit(&env.caller, "svc_create_contact")
        .await
        .unwrap();
    assert!(admitted.rate.allowed);
}

#[tokio::test]
async fn the_rate_limit_asked_for_is_the_workspaces() {
    let mut limiter = MockLimiter::new();
    limiter
        .expect_acquire_now()
        .withf(|_, per_minute| *per_minute == 7)
        .returning(|_, per_minute| Some(full_budget(per_minute)));
    let overrides = Overrides {
        rate_limit_per_minute: Some(7),
        included_requests: None,
    };
    let env = env_with(Arc::new(limiter), Plan::Free, overrides).await;
    let admitted = env
        .app
        .admit(&env.caller, "svc_list_contacts")
        .await
        .unwrap();
    assert_eq!(admitted.rate.limit, 7);
}

#[tokio::test]
async fn live_requests_past_the_included_quota_are_refused_but_exempt_operations_pass() {
    let overrides = Overrides {
        rate_limit_per_minute: None,
        included_requests: Some(2),
    };
    let env = env_with(Arc::new(AdmitAll), Plan::Free, overrides).await;
    for _ in 0..2 {
        env.app.admit(&env.live, "svc_list_contacts").await.unwrap();
    }
    let over = env
        .app
        .admit(&env.live, "svc_list_contacts")
        .await
        .expect_err("the quota is used up");
    assert!(
        matches!(over.error, AppError::QuotaExceeded { included: 2, .. }),
        "{:?}",
        over.error
    );
    for operation in EXEMPT_OPERATIONS {
        assert!(
            env.app.admit(&env.live, operation).await.is_ok(),
            "{operation}"
        );
    }
    assert_eq!(
        env.meter.counted(&env.live.tenant),
        2,
        "exempt ones are not counted"
    );
}

#[tokio::test]
async fn test_mode_is_counted_and_never_capped() {
    let overrides = Overrides {
        rate_limit_per_minute: None,
        included_requests: Some(1),
    };
    let env = env_with(Arc::new(AdmitAll), Plan::Free, overrides).await;
    for _ in 0..3 {
        env.app
            .admit(&env.caller, "svc_list_contacts")
            .await
            .unwrap();
    }
    assert_eq!(env.meter.counted(&env.caller.tenant), 3);
}

#[tokio::test]
async fn usage_reports_what_the_meter_has_not_written_yet() {
    let env = env().await;
    env.app
        .admit(&env.caller, "svc_list_contacts")
        .await
        .unwrap();
    let usage = env.app.usage(&env.caller).await.unwrap();
    assert_eq!(usage.used, 1);
    assert_eq!(usage.included(), None, "test mode has no quota");
}
