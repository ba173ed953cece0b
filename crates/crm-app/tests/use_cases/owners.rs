//! Owners (decisions §24): an owner must be a user of the record's workspace; a user's deletion
//! leaves the records they owned, in both modes, without an owner, with a history entry by
//! `system`; a merge's survivor without an owner takes a merged record's.

use crm_app::{paging::PageParams, users::UserInput, AppError};
use crm_domain::{
    history::{ActorType, Via},
    CompanyDraft, ContactPatch, DealDraft, ObjectKind, Patch, UserId, ValidationError,
};
use serde_json::{json, Value};

use crate::support::{env, person, Env};

async fn user(env: &Env, workspace: &crm_domain::WorkspaceId, email: &str) -> UserId {
    env.app
        .create_user_as_operator(
            workspace,
            UserInput {
                email: Some(email.into()),
                name: Some("Owner".into()),
                role: Some("member".into()),
            },
            None,
        )
        .await
        .unwrap()
        .user
        .id
}

/// Creates, as `caller`, a contact `owner` owns (none when `None`).
async fn new_contact(
    env: &Env,
    caller: &crm_app::Caller,
    email: &str,
    owner: Option<&UserId>,
) -> Result<crm_domain::Contact, AppError> {
    let draft = crm_domain::ContactDraft {
        owner_id: owner.map(UserId::to_string),
        ..person("Ada", email)
    };
    env.app.create_contact(caller, draft, None).await
}

fn is_invalid_owner(result: Result<impl std::fmt::Debug, AppError>) -> bool {
    matches!(
        result,
        Err(AppError::Validation(ValidationError::InvalidReference { ref field, .. })) if field == "owner_id"
    )
}

#[tokio::test]
async fn an_owner_is_a_user_of_the_workspace() {
    let env = env().await;
    let kate = user(&env, &env.caller.tenant.workspace_id, "kate@example.com").await;
    let other = env
        .app
        .create_workspace("other", crm_domain::Plan::Free, Default::default())
        .await
        .unwrap();
    let stranger = user(&env, &other.workspace.id, "stranger@example.com").await;

    let contact = new_contact(&env, &env.caller, "ada@example.com", Some(&kate))
        .await
        .unwrap();
    assert_eq!(contact.owner_id, Some(kate.clone()));
    // Live mode: users belong to the workspace, not to a mode.
    let live = new_contact(&env, &env.live, "ada@example.com", Some(&kate))
        .await
        .unwrap();
    assert_eq!(live.owner_id, Some(kate.clone()));

    let refused = new_contact(&env, &env.caller, "bo@example.com", Some(&stranger)).await;
    assert!(is_invalid_owner(refused));
    let refused = env
        .app
        .create_company(
            &env.caller,
            CompanyDraft {
                name: Some("Acme".into()),
                owner_id: Some(stranger.to_string()),
                ..Default::default()
            },
            None,
        )
        .await;
    assert!(is_invalid_owner(refused));
    let refused = env
        .app
        .update_contact(
            &env.caller,
            contact.id.as_str(),
            ContactPatch {
                owner_id: Patch::Value(stranger.to_string()),
                ..Default::default()
            },
            None,
        )
        .await;
    assert!(is_invalid_owner(refused));
}

#[tokio::test]
async fn deleting_a_user_releases_their_records_in_both_modes_with_history() {
    let env = env().await;
    let workspace = env.caller.tenant.workspace_id.clone();
    let kate = user(&env, &workspace, "kate@example.com").await;
    let omar = user(&env, &workspace, "omar@example.com").await;
    let contact = new_contact(&env, &env.caller, "ada@example.com", Some(&kate))
        .await
        .unwrap();
    let kept = new_contact(&env, &env.caller, "bo@example.com", Some(&omar))
        .await
        .unwrap();
    let deal = env
        .app
        .create_deal(
            &env.live,
            DealDraft {
                title: Some("Live deal".into()),
                owner_id: Some(kate.to_string()),
                ..Default::default()
            },
            None,
            None,
        )
        .await
        .unwrap();

    env.app
        .delete_user(&env.caller, kate.as_str())
        .await
        .unwrap();

    let released = env
        .app
        .get_contact(&env.caller, contact.id.as_str())
        .await
        .unwrap();
    assert_eq!((released.owner_id, released.version), (None, 2));
    let released = env.app.get_deal(&env.live, deal.id.as_str()).await.unwrap();
    assert_eq!((released.owner_id, released.version), (None, 2));
    let untouched = env
        .app
        .get_contact(&env.caller, kept.id.as_str())
        .await
        .unwrap();
    assert_eq!((untouched.owner_id, untouched.version), (Some(omar), 1));

    let history = env
        .app
        .list_history(
            &env.caller,
            ObjectKind::Contact,
            contact.id.as_str(),
            PageParams::default(),
        )
        .await
        .unwrap();
    let entry = &history.data[0];
    assert_eq!(entry.author.actor.kind, ActorType::System);
    assert_eq!(entry.author.via, Via::Direct);
    let changes: Vec<Value> = entry
        .changes
        .iter()
        .map(|c| json!({"field": c.field, "from": c.from, "to": c.to}))
        .collect();
    assert_eq!(
        changes,
        [json!({"field": "owner_id", "from": kate.as_str(), "to": null})]
    );
    let history = env
        .app
        .list_history(
            &env.live,
            ObjectKind::Deal,
            deal.id.as_str(),
            PageParams::default(),
        )
        .await
        .unwrap();
    assert_eq!(history.data[0].author.actor.kind, ActorType::System);
}

#[tokio::test]
async fn a_survivor_without_an_owner_takes_a_merged_records() {
    let env = env().await;
    let kate = user(&env, &env.caller.tenant.workspace_id, "kate@example.com").await;
    let survivor = new_contact(&env, &env.caller, "ada@example.com", None)
        .await
        .unwrap();
    let duplicate = new_contact(&env, &env.caller, "ada2@example.com", Some(&kate))
        .await
        .unwrap();
    let merged = env
        .app
        .merge_contacts(
            &env.caller,
            survivor.id.as_str(),
            vec![duplicate.id.to_string()],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(merged.owner_id, Some(kate));
}
