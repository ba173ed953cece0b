//! API keys: created with scopes, listed, revoked, rolled; authentication follows them.

use crm_app::{AppError, PageParams, Scope};

use crate::support::env;

#[tokio::test]
async fn a_new_key_authenticates_with_only_its_scopes() {
    let env = env().await;
    let new = env
        .app
        .create_key(
            &env.caller,
            Some("reader".into()),
            Some(vec!["contacts:read".into()]),
        )
        .await
        .unwrap();
    let caller = env
        .app
        .authenticate(Some(&format!("Bearer {}", new.secret)))
        .await
        .unwrap();
    assert_eq!(caller.tenant, env.caller.tenant);
    assert!(caller.require(Scope::read("contacts")).is_ok());
    assert!(matches!(
        caller.require(Scope::write("contacts")),
        Err(AppError::Forbidden { .. })
    ));
    let listed = env
        .app
        .list_keys(&env.caller, PageParams::default())
        .await
        .unwrap();
    assert!(listed.data.iter().any(|k| k.id == new.key.id));
}

#[tokio::test]
async fn an_unknown_scope_is_refused() {
    let env = env().await;
    let refused = env
        .app
        .create_key(
            &env.caller,
            Some("admin".into()),
            Some(vec!["contacts:admin".into()]),
        )
        .await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn a_revoked_key_no_longer_authenticates() {
    let env = env().await;
    let new = env
        .app
        .create_key(&env.caller, Some("spare".into()), Some(vec!["*".into()]))
        .await
        .unwrap();
    let revoked = env
        .app
        .revoke_key(&env.caller, new.key.id.as_str())
        .await
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    let refused = env
        .app
        .authenticate(Some(&format!("Bearer {}", new.secret)))
        .await;
    assert!(
        matches!(refused, Err(AppError::Unauthorized(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_rolled_key_answers_with_a_new_secret_and_the_old_one_expires_after_its_grace() {
    let env = env().await;
    let old = env
        .app
        .create_key(&env.caller, Some("spare".into()), Some(vec!["*".into()]))
        .await
        .unwrap();
    let rolled = env
        .app
        .roll_key(&env.caller, old.key.id.as_str(), Some(60))
        .await
        .unwrap();
    assert_ne!(rolled.secret, old.secret);
    let bearer = |s: &str| format!("Bearer {s}");
    assert!(env
        .app
        .authenticate(Some(&bearer(&rolled.secret)))
        .await
        .is_ok());
    assert!(
        env.app
            .authenticate(Some(&bearer(&old.secret)))
            .await
            .is_ok(),
        "within the grace period"
    );
    env.clock.advance_ms(61_000);
    assert!(matches!(
        env.app.authenticate(Some(&bearer(&old.secret))).await,
        Err(AppError::Unauthorized(_))
    ));
}

#[tokio::test]
async fn a_missing_or_malformed_authorization_is_unauthorized() {
    let env = env().await;
    for header in [None, Some("Basic abc"), Some("Bearer svc_test_short")] {
        let refused = env.app.authenticate(header).await;
        assert!(
            matches!(refused, Err(AppError::Unauthorized(_))),
            "{header:?}"
        );
    }
}

#[tokio::test]
async fn a_keys_use_is_shown_before_it_is_written() {
    let env = env().await;
    let key = env
        .app
        .get_key(&env.caller, env.caller.key_id().unwrap().as_str())
        .await
        .unwrap();
    assert_eq!(
        key.last_used_at,
        Some(env.clock_now()),
        "the use by authentication, noted by the meter"
    );
}
