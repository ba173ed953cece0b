//! `Idempotency-Key`: claims, replays, reuse with another request, release.

use crm_app::{
    idempotency::{Claim, StoredReply, LEASE_MS},
    AppError,
};

use crate::support::{env, person};

#[tokio::test]
async fn a_key_is_claimed_once_and_its_stored_outcome_replayed() {
    let env = env().await;
    let tenant = &env.caller.tenant;
    let Claim::Fresh(claim) = env
        .app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("a new key is fresh");
    };
    let in_flight = env.app.claim_idempotency(tenant, "k-1", "fp", 201).await;
    assert!(
        matches!(in_flight, Err(AppError::IdempotencyInProgress)),
        "{in_flight:?}"
    );
    let reply = StoredReply {
        status: 422,
        body: b"{}".to_vec(),
    };
    env.app
        .finish_idempotency(tenant, &claim, &reply)
        .await
        .unwrap();
    match env
        .app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    {
        Claim::Replay(replayed) => assert_eq!(replayed, reply),
        Claim::Fresh(_) => panic!("a finished key replays"),
    }
}

#[tokio::test]
async fn a_key_used_with_another_request_is_refused() {
    let env = env().await;
    let tenant = &env.caller.tenant;
    env.app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap();
    let reused = env.app.claim_idempotency(tenant, "k-1", "other", 201).await;
    assert!(
        matches!(reused, Err(AppError::IdempotencyKeyReused)),
        "{reused:?}"
    );
}

#[tokio::test]
async fn a_released_key_runs_the_request_again() {
    let env = env().await;
    let tenant = &env.caller.tenant;
    let Claim::Fresh(claim) = env
        .app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("fresh");
    };
    env.app.release_idempotency(tenant, &claim).await.unwrap();
    assert!(matches!(
        env.app.claim_idempotency(tenant, "k-1", "fp", 201).await,
        Ok(Claim::Fresh(_))
    ));
}

#[tokio::test]
async fn a_create_under_a_key_stores_its_reply_in_its_own_transaction() {
    let env = env().await;
    let tenant = &env.caller.tenant;
    let Claim::Fresh(claim) = env
        .app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("fresh");
    };
    let ada = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), Some(&claim))
        .await
        .unwrap();
    match env
        .app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    {
        Claim::Replay(reply) => {
            assert_eq!(reply.status, 201);
            let body = String::from_utf8(reply.body).unwrap();
            assert!(body.contains(ada.id.as_str()), "{body}");
        }
        Claim::Fresh(_) => panic!("the create finished the key"),
    }
}

#[tokio::test]
async fn a_claim_whose_lease_ran_out_is_taken_over() {
    let env = env().await;
    let tenant = &env.caller.tenant;
    env.app
        .claim_idempotency(tenant, "k-1", "fp", 201)
        .await
        .unwrap();
    env.clock.advance_ms(LEASE_MS + 1);
    assert!(matches!(
        env.app.claim_idempotency(tenant, "k-1", "fp", 201).await,
        Ok(Claim::Fresh(_))
    ));
}
