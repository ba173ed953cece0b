//! Batches of writes: atomic (all or nothing) or not (each on its own).

use crm_app::{batch::BatchOp, AppError, PageParams};
use serde_json::{json, Value};

use crate::support::{env, person};

/// Renders a batch's results as the count of successes, so the tests can see what ran.
fn count_ok(results: &[crm_app::batch::OpResult]) -> Value {
    let ok = results.iter().filter(|(_, r)| r.is_ok()).count();
    json!({ "ok": ok })
}

fn creates() -> Vec<(usize, BatchOp)> {
    vec![
        (0, BatchOp::CreateContact(person("Ada", "ada@example.com"))),
        (1, BatchOp::CreateContact(person("Twin", "ada@example.com"))),
        (
            2,
            BatchOp::CreateContact(person("Grace", "grace@example.com")),
        ),
    ]
}

#[tokio::test]
async fn an_atomic_batch_with_a_failing_operation_writes_nothing() {
    let env = env().await;
    let failed = env
        .app
        .batch(&env.caller, creates(), true, None, &count_ok)
        .await;
    match failed {
        Err(AppError::BatchFailed { failures }) => {
            assert_eq!(failures.len(), 1);
            assert_eq!(failures[0].0, 1, "the duplicate email");
        }
        other => panic!("expected batch_failed, got {other:?}"),
    }
    let listed = env
        .app
        .list_contacts(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert!(listed.data.is_empty());
}

#[tokio::test]
async fn a_non_atomic_batch_keeps_the_operations_that_succeeded() {
    let env = env().await;
    let body = env
        .app
        .batch(&env.caller, creates(), false, None, &count_ok)
        .await
        .unwrap();
    assert_eq!(body, json!({ "ok": 2 }));
    let listed = env
        .app
        .list_contacts(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 2);
}
