//! Console sessions: sign-in by password, the throttle, what a session's caller may do, and
//! every way a session ends (sign-out, 30 days, a role change, the user's deletion, a new
//! password), and one-time sign-in links.

use crm_app::{
    sessions::{FAILURES_PER_ADDRESS_MINUTE, SESSION_MS, WRONG_EMAIL_OR_PASSWORD},
    users::UserInput,
    AppError, Scope,
};
use crm_domain::{
    history::{ActorType, Via},
    Mode,
};

use crate::support::{env, Env};

const PASSWORD: &str = "correct horse battery";

async fn user(
    env: &Env,
    email: &str,
    role: &str,
    password: Option<&str>,
) -> crm_app::users::WithLink {
    env.app
        .create_user_as_operator(
            &env.caller.tenant.workspace_id,
            UserInput {
                email: Some(email.into()),
                name: Some(format!("{role} user")),
                role: Some(role.into()),
            },
            password,
        )
        .await
        .unwrap()
}

fn is_wrong(result: Result<impl std::fmt::Debug, AppError>) -> bool {
    matches!(result, Err(AppError::Unauthorized(m)) if m == WRONG_EMAIL_OR_PASSWORD)
}

#[tokio::test]
async fn a_right_password_opens_a_session_of_the_users_role() {
    let env = env().await;
    user(&env, "mia@example.com", "viewer", Some(PASSWORD)).await;
    let new = env
        .app
        .sign_in(" MIA@example.com ", PASSWORD, "192.0.2.1")
        .await
        .unwrap();
    assert!(new.user.last_login_at.is_some());
    let session = env
        .app
        .console_session(&new.id)
        .await
        .unwrap()
        .expect("the session works");
    assert_eq!(session.mode, Mode::Live, "a new session works on live data");
    assert_eq!(
        session.caller.tenant.workspace_id,
        env.caller.tenant.workspace_id
    );
    assert!(session.csrf_matches(&new.csrf_token));
    assert!(!session.csrf_matches("another token of the same length......"));
    assert!(session.caller.require(Scope::read("contacts")).is_ok());
    assert!(matches!(
        session.caller.require(Scope::write("contacts")),
        Err(AppError::Forbidden { .. })
    ));
    // Writes are the user's.
    let author = session.caller.author(Via::Direct);
    assert_eq!(author.actor.kind, ActorType::User);
    assert_eq!(author.actor.id.as_deref(), Some(new.user.id.as_str()));
    // A token that is not a session is none.
    assert!(env
        .app
        .console_session("no such session")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn an_unknown_email_and_a_wrong_password_get_the_same_answer() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    assert!(is_wrong(
        env.app
            .sign_in("mia@example.com", "wrong password", "192.0.2.1")
            .await
    ));
    assert!(is_wrong(
        env.app
            .sign_in("nobody@example.com", PASSWORD, "192.0.2.1")
            .await
    ));
    assert!(is_wrong(
        env.app.sign_in("not an email", PASSWORD, "192.0.2.1").await
    ));
    // A user whose link was never used has no password to match.
    user(&env, "new@example.com", "member", None).await;
    assert!(is_wrong(
        env.app.sign_in("new@example.com", "", "192.0.2.1").await
    ));
}

#[tokio::test]
async fn failures_past_the_limit_are_refused_before_the_password_is_checked() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    for _ in 0..FAILURES_PER_ADDRESS_MINUTE {
        assert!(is_wrong(
            env.app
                .sign_in("mia@example.com", "guess", "192.0.2.1")
                .await
        ));
    }
    let throttled = env
        .app
        .sign_in("mia@example.com", PASSWORD, "192.0.2.1")
        .await;
    assert!(
        matches!(throttled, Err(AppError::RateLimited { .. })),
        "{throttled:?}"
    );
    // Another address is counted apart, and a minute later this one is let through again.
    assert!(env
        .app
        .sign_in("mia@example.com", PASSWORD, "198.51.100.2")
        .await
        .is_ok());
    env.clock.advance_ms(61_000);
    assert!(env
        .app
        .sign_in("mia@example.com", PASSWORD, "192.0.2.1")
        .await
        .is_ok());
}

#[tokio::test]
async fn twenty_failures_in_an_hour_lock_the_email_from_every_address() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    for i in 0..20 {
        let address = format!("192.0.2.{i}");
        assert!(is_wrong(
            env.app.sign_in("mia@example.com", "guess", &address).await
        ));
    }
    let throttled = env
        .app
        .sign_in("mia@example.com", PASSWORD, "203.0.113.50")
        .await;
    assert!(
        matches!(throttled, Err(AppError::RateLimited { .. })),
        "{throttled:?}"
    );
    env.clock.advance_ms(3_601_000);
    assert!(env
        .app
        .sign_in("mia@example.com", PASSWORD, "203.0.113.50")
        .await
        .is_ok());
}

#[tokio::test]
async fn sign_out_ends_the_session_and_thirty_days_end_any() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let a = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let b = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let session = env.app.console_session(&a.id).await.unwrap().unwrap();
    env.app.sign_out(&session).await.unwrap();
    assert!(env.app.console_session(&a.id).await.unwrap().is_none());
    assert!(
        env.app.console_session(&b.id).await.unwrap().is_some(),
        "only that session"
    );
    // Active or not, a session ends 30 days after its sign-in.
    env.clock.advance_ms(SESSION_MS - 1_000);
    assert!(env.app.console_session(&b.id).await.unwrap().is_some());
    env.clock.advance_ms(1_000);
    assert!(env.app.console_session(&b.id).await.unwrap().is_none());
}

#[tokio::test]
async fn the_mode_switches_per_session() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let new = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let session = env.app.console_session(&new.id).await.unwrap().unwrap();
    env.app.switch_mode(&session, Mode::Test).await.unwrap();
    let session = env.app.console_session(&new.id).await.unwrap().unwrap();
    assert_eq!(session.caller.tenant, env.caller.tenant, "the test tenant");
}

#[tokio::test]
async fn a_role_change_or_deletion_ends_the_users_sessions() {
    let env = env().await;
    let member = user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let new = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let patch = UserInput {
        role: Some("viewer".into()),
        ..UserInput::default()
    };
    env.app
        .update_user(&env.caller, member.user.id.as_str(), patch)
        .await
        .unwrap();
    assert!(env.app.console_session(&new.id).await.unwrap().is_none());
    let again = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let session = env.app.console_session(&again.id).await.unwrap().unwrap();
    assert!(
        session.caller.require(Scope::write("deals")).is_err(),
        "a viewer now"
    );
    env.app
        .delete_user(&env.caller, member.user.id.as_str())
        .await
        .unwrap();
    assert!(env.app.console_session(&again.id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_sign_in_link_sets_the_password_once() {
    let env = env().await;
    let created = user(&env, "mia@example.com", "member", None).await;
    let token = created
        .token
        .expect("a user without a password gets a link");
    assert_eq!(
        env.app.sign_in_link_user(&token).await.unwrap().id,
        created.user.id
    );
    let short = env.app.set_password_with_link(&token, "short").await;
    assert!(matches!(short, Err(AppError::Validation(_))), "{short:?}");
    let session = env
        .app
        .set_password_with_link(&token, PASSWORD)
        .await
        .unwrap();
    assert!(env
        .app
        .console_session(&session.id)
        .await
        .unwrap()
        .is_some());
    assert!(matches!(
        env.app
            .set_password_with_link(&token, "another password")
            .await,
        Err(AppError::Unauthorized(_))
    ));
    assert!(env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .is_ok());
}

#[tokio::test]
async fn an_expired_link_works_no_more() {
    let env = env().await;
    let created = user(&env, "mia@example.com", "member", None).await;
    let token = created.token.unwrap();
    env.clock.advance_ms(crm_domain::user::SIGN_IN_LINK_MS);
    assert!(env.app.sign_in_link_user(&token).await.is_err());
    assert!(env
        .app
        .set_password_with_link(&token, PASSWORD)
        .await
        .is_err());
}

#[tokio::test]
async fn a_new_password_needs_the_current_one_and_ends_the_other_sessions() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let here = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let elsewhere = env
        .app
        .sign_in("mia@example.com", PASSWORD, "b")
        .await
        .unwrap();
    let session = env.app.console_session(&here.id).await.unwrap().unwrap();
    assert!(env
        .app
        .change_password(&session, "not it", "a new long password")
        .await
        .is_err());
    let renewed = env
        .app
        .change_password(&session, PASSWORD, "a new long password")
        .await
        .unwrap();
    assert!(env
        .app
        .console_session(&elsewhere.id)
        .await
        .unwrap()
        .is_none());
    assert!(env.app.console_session(&here.id).await.unwrap().is_none());
    assert!(env
        .app
        .console_session(&renewed.id)
        .await
        .unwrap()
        .is_some());
    assert!(is_wrong(
        env.app.sign_in("mia@example.com", PASSWORD, "c").await
    ));
    assert!(env
        .app
        .sign_in("mia@example.com", "a new long password", "c")
        .await
        .is_ok());
}

#[tokio::test]
async fn guessing_the_current_password_is_throttled() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let new = env
        .app
        .sign_in("mia@example.com", PASSWORD, "a")
        .await
        .unwrap();
    let session = env.app.console_session(&new.id).await.unwrap().unwrap();
    for _ in 0..FAILURES_PER_ADDRESS_MINUTE {
        let wrong = env
            .app
            .change_password(&session, "guess", "a new long password")
            .await;
        assert!(matches!(wrong, Err(AppError::Unauthorized(_))), "{wrong:?}");
    }
    let throttled = env
        .app
        .change_password(&session, PASSWORD, "a new long password")
        .await;
    assert!(
        matches!(throttled, Err(AppError::RateLimited { .. })),
        "{throttled:?}"
    );
    env.clock.advance_ms(61_000);
    assert!(env
        .app
        .change_password(&session, PASSWORD, "a new long password")
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_guesses_get_no_more_than_the_limit() {
    let env = env().await;
    user(&env, "mia@example.com", "member", Some(PASSWORD)).await;
    let mut guesses = tokio::task::JoinSet::new();
    for i in 0..12 {
        let app = env.app.clone();
        guesses.spawn(async move {
            app.sign_in("mia@example.com", &format!("guess {i}"), "192.0.2.1")
                .await
        });
    }
    let (mut checked, mut throttled) = (0, 0);
    while let Some(answer) = guesses.join_next().await {
        match answer.unwrap() {
            Err(AppError::Unauthorized(_)) => checked += 1,
            Err(AppError::RateLimited { .. }) => throttled += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        (checked, throttled),
        (FAILURES_PER_ADDRESS_MINUTE as usize, 7)
    );
}
