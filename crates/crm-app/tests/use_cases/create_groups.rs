//! Contact creates committed together (write grouping): each keeps the outcome it would have had
//! alone.

use crm_app::{
    create_groups::ContactCreate, idempotency::Claim, ports::GroupedWrites, AppError, PageParams,
};
use crm_domain::{history::Author, ContactDraft};

use crate::support::{env, person};

#[tokio::test]
async fn a_group_commits_its_creates_and_answers_each_with_its_own_outcome() {
    let env = env().await;
    let tenant = env.caller.tenant.clone();
    let create = |draft: ContactDraft| ContactCreate {
        tenant: tenant.clone(),
        author: Author::system(),
        draft,
        idem: None,
    };
    let invalid = ContactDraft {
        email: Some("not an email".into()),
        ..Default::default()
    };
    let answers = env
        .app
        .together(vec![
            create(person("Ada", "ada@example.com")),
            create(person("Twin", "ada@example.com")),
            create(invalid),
            create(person("Grace", "grace@example.com")),
        ])
        .await;
    assert_eq!(answers.len(), 4);
    assert_eq!(
        answers[0].as_ref().unwrap().first_name.as_deref(),
        Some("Ada")
    );
    assert!(
        matches!(answers[1], Err(AppError::Conflict { .. })),
        "{:?}",
        answers[1]
    );
    assert!(
        matches!(answers[2], Err(AppError::Validation(_))),
        "{:?}",
        answers[2]
    );
    assert_eq!(
        answers[3].as_ref().unwrap().first_name.as_deref(),
        Some("Grace")
    );
    let listed = env
        .app
        .list_contacts(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 2);
}

#[tokio::test]
async fn a_grouped_create_under_an_idempotency_key_stores_its_reply() {
    let env = env().await;
    let tenant = env.caller.tenant.clone();
    let Claim::Fresh(claim) = env
        .app
        .claim_idempotency(&tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("fresh");
    };
    let answers = env
        .app
        .together(vec![ContactCreate {
            tenant: tenant.clone(),
            author: Author::system(),
            draft: person("Ada", "ada@example.com"),
            idem: Some(claim),
        }])
        .await;
    let ada = answers[0].as_ref().unwrap();
    match env
        .app
        .claim_idempotency(&tenant, "k-1", "fp", 201)
        .await
        .unwrap()
    {
        Claim::Replay(reply) => {
            assert_eq!(reply.status, 201);
            assert!(String::from_utf8(reply.body)
                .unwrap()
                .contains(ada.id.as_str()));
        }
        Claim::Fresh(_) => panic!("the group finished the key"),
    }
}

#[tokio::test]
async fn a_create_alone_is_the_plain_create() {
    let env = env().await;
    let ada = env
        .app
        .alone(ContactCreate {
            tenant: env.caller.tenant.clone(),
            author: Author::system(),
            draft: person("Ada", "ada@example.com"),
            idem: None,
        })
        .await
        .unwrap();
    assert_eq!(
        env.app
            .get_contact(&env.caller, ada.id.as_str())
            .await
            .unwrap(),
        ada
    );
}
