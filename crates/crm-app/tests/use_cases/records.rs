//! Contacts, companies, deals and activities: create, get, update, delete, list.

use crm_app::{deals::DealQuery, ports::ActivityFilter, AppError, PageParams};
use crm_domain::{
    ActivityDraft, CompanyDraft, ContactPatch, DealDraft, DealPatch, Patch, StageType,
};

use crate::support::{env, person};

#[tokio::test]
async fn a_created_contact_is_found_by_id_and_listed() {
    let env = env().await;
    let created = env
        .app
        .create_contact(&env.caller, person("Ada", "Ada@Example.com"), None)
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.email.as_ref().unwrap().as_str(), "ada@example.com");
    let found = env
        .app
        .get_contact(&env.caller, created.id.as_str())
        .await
        .unwrap();
    assert_eq!(found, created);
    let page = env
        .app
        .list_contacts(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(page.data, vec![created]);
    assert!(!page.has_more);
}

#[tokio::test]
async fn a_second_contact_with_the_same_email_is_a_conflict() {
    let env = env().await;
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let again = env
        .app
        .create_contact(&env.caller, person("Other", "ada@example.com"), None)
        .await;
    assert!(matches!(again, Err(AppError::Conflict { .. })), "{again:?}");
}

#[tokio::test]
async fn a_contact_of_one_mode_is_not_found_from_the_other() {
    let env = env().await;
    let created = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let from_live = env.app.get_contact(&env.live, created.id.as_str()).await;
    assert!(matches!(from_live, Err(AppError::NotFound { .. })));
}

#[tokio::test]
async fn updating_a_contact_bumps_its_version_and_a_stale_version_is_refused() {
    let env = env().await;
    let created = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let patch = ContactPatch {
        last_name: Patch::Value("Lovelace".into()),
        ..Default::default()
    };
    let updated = env
        .app
        .update_contact(&env.caller, created.id.as_str(), patch.clone(), Some(1))
        .await
        .unwrap();
    assert_eq!(
        (updated.version, updated.last_name.as_deref()),
        (2, Some("Lovelace"))
    );
    let stale = env
        .app
        .update_contact(&env.caller, created.id.as_str(), patch, Some(1))
        .await;
    assert!(
        matches!(stale, Err(AppError::VersionConflict { current: 2 })),
        "{stale:?}"
    );
}

#[tokio::test]
async fn a_deleted_contact_leaves_the_list_and_comes_back_when_restored() {
    let env = env().await;
    let created = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let deleted = env
        .app
        .delete_contact(&env.caller, created.id.as_str())
        .await
        .unwrap();
    assert!(deleted.deleted_at.is_some());
    let listed = |app: &crm_app::App, caller| {
        let app = app.clone();
        async move {
            app.list_contacts(&caller, Default::default(), PageParams::default())
                .await
                .unwrap()
                .data
                .len()
        }
    };
    assert_eq!(listed(&env.app, env.caller.clone()).await, 0);
    env.app
        .restore_contact(&env.caller, created.id.as_str())
        .await
        .unwrap();
    assert_eq!(listed(&env.app, env.caller.clone()).await, 1);
}

#[tokio::test]
async fn a_contact_list_pages_newest_first_with_a_cursor() {
    let env = env().await;
    for i in 0..3 {
        env.app
            .create_contact(&env.caller, person("P", &format!("p{i}@example.com")), None)
            .await
            .unwrap();
    }
    let first = env
        .app
        .list_contacts(
            &env.caller,
            Default::default(),
            PageParams {
                limit: 2,
                cursor: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(first.data.len(), 2);
    assert!(first.has_more);
    assert_eq!(
        first.data[0].email.as_ref().unwrap().as_str(),
        "p2@example.com"
    );
    let rest = env
        .app
        .list_contacts(
            &env.caller,
            Default::default(),
            PageParams {
                limit: 2,
                cursor: first.next_cursor,
            },
        )
        .await
        .unwrap();
    assert_eq!(rest.data.len(), 1);
    assert_eq!(
        rest.data[0].email.as_ref().unwrap().as_str(),
        "p0@example.com"
    );
    assert!(!rest.has_more);
}

#[tokio::test]
async fn a_contact_naming_a_company_that_does_not_exist_is_refused() {
    let env = env().await;
    let draft = crm_domain::ContactDraft {
        company_id: Some("com_00000000000000000000000000".into()),
        ..person("Ada", "ada@example.com")
    };
    let refused = env.app.create_contact(&env.caller, draft, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_company_is_created_updated_listed_and_soft_deleted() {
    let env = env().await;
    let draft = CompanyDraft {
        name: Some("Acme".into()),
        domain: Some("Acme.com".into()),
        ..Default::default()
    };
    let company = env
        .app
        .create_company(&env.caller, draft, None)
        .await
        .unwrap();
    assert_eq!(company.domain.as_deref(), Some("acme.com"));
    let patch = crm_domain::CompanyPatch {
        name: Patch::Value("Acme Inc".into()),
        ..Default::default()
    };
    let updated = env
        .app
        .update_company(&env.caller, company.id.as_str(), patch, None)
        .await
        .unwrap();
    assert_eq!((updated.name.as_str(), updated.version), ("Acme Inc", 2));
    assert_eq!(
        env.app
            .get_company(&env.caller, company.id.as_str())
            .await
            .unwrap(),
        updated
    );
    let listed = env
        .app
        .list_companies(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data, vec![updated]);
    env.app
        .delete_company(&env.caller, company.id.as_str())
        .await
        .unwrap();
    let listed = env
        .app
        .list_companies(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert!(listed.data.is_empty());
}

#[tokio::test]
async fn a_deal_starts_in_the_default_pipelines_first_stage_and_moves_to_won() {
    let env = env().await;
    let draft = DealDraft {
        title: Some("Big".into()),
        value_cents: Some(10_000),
        ..Default::default()
    };
    let deal = env
        .app
        .create_deal(&env.caller, draft, None, None)
        .await
        .unwrap();
    assert_eq!(
        (deal.stage.as_str(), deal.stage_type),
        ("lead", StageType::Open)
    );
    let patch = DealPatch {
        stage: Patch::Value("won".into()),
        ..Default::default()
    };
    let won = env
        .app
        .update_deal(&env.caller, deal.id.as_str(), patch, None, Some(1))
        .await
        .unwrap();
    assert_eq!(
        (won.stage.as_str(), won.stage_type),
        ("won", StageType::Won)
    );
    let in_won = env
        .app
        .list_deals(
            &env.caller,
            DealQuery {
                pipeline: Some("default".into()),
                stage: Some("won".into()),
                ..Default::default()
            },
            PageParams::default(),
        )
        .await
        .unwrap();
    assert_eq!(in_won.data.len(), 1);
    env.app
        .delete_deal(&env.caller, deal.id.as_str())
        .await
        .unwrap();
    assert!(env
        .app
        .get_deal(&env.caller, deal.id.as_str())
        .await
        .unwrap()
        .deleted_at
        .is_some());
}

#[tokio::test]
async fn a_deal_in_a_stage_its_pipeline_does_not_have_is_refused() {
    let env = env().await;
    let draft = DealDraft {
        title: Some("Big".into()),
        stage: Some("nowhere".into()),
        ..Default::default()
    };
    let refused = env.app.create_deal(&env.caller, draft, None, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_activity_on_a_contact_is_listed_for_that_contact_and_deleted() {
    let env = env().await;
    let ada = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let draft = ActivityDraft {
        activity_type: Some("note".into()),
        contact_id: Some(ada.id.to_string()),
        body: Some("met at the fair".into()),
        ..Default::default()
    };
    let note = env
        .app
        .create_activity(&env.caller, draft, None)
        .await
        .unwrap();
    assert_eq!(
        env.app
            .get_activity(&env.caller, note.id.as_str())
            .await
            .unwrap(),
        note
    );
    let patch = crm_domain::ActivityPatch {
        body: Patch::Value("met at the fair, twice".into()),
        ..Default::default()
    };
    let updated = env
        .app
        .update_activity(&env.caller, note.id.as_str(), patch, None)
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    let filter = ActivityFilter {
        contact_id: Some(ada.id.clone()),
        ..Default::default()
    };
    let listed = env
        .app
        .list_activities(&env.caller, filter.clone(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data, vec![updated]);
    env.app
        .delete_activity(&env.caller, note.id.as_str())
        .await
        .unwrap();
    let missing = env.app.get_activity(&env.caller, note.id.as_str()).await;
    assert!(matches!(missing, Err(AppError::NotFound { .. })));
}

#[tokio::test]
async fn an_activity_of_an_unregistered_type_is_refused() {
    let env = env().await;
    let draft = ActivityDraft {
        activity_type: Some("telepathy".into()),
        body: Some("?".into()),
        ..Default::default()
    };
    let refused = env.app.create_activity(&env.caller, draft, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_merge_fills_the_survivor_moves_deals_and_retires_the_merged_contact() {
    let env = env().await;
    let app = &env.app;
    let ada = app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let dup = app
        .create_contact(
            &env.caller,
            crm_domain::ContactDraft {
                first_name: Some("Augusta".into()),
                email: Some("augusta@example.com".into()),
                phone: Some("+44 1".into()),
                ..Default::default()
            },
            None,
        )
        .await
        .unwrap();
    let deal = app
        .create_deal(
            &env.caller,
            DealDraft {
                title: Some("Engine".into()),
                primary_contact_id: Some(dup.id.to_string()),
                ..Default::default()
            },
            None,
            None,
        )
        .await
        .unwrap();
    let merged = app
        .merge_contacts(
            &env.caller,
            ada.id.as_str(),
            vec![dup.id.to_string()],
            Some(1),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        (
            merged.first_name.as_deref(),
            merged.phone.as_deref(),
            merged.version
        ),
        (Some("Ada"), Some("+44 1"), 2)
    );
    let deal = app.get_deal(&env.caller, deal.id.as_str()).await.unwrap();
    assert_eq!(deal.primary_contact_id.as_ref(), Some(&ada.id));
    let tomb = app.get_contact(&env.caller, dup.id.as_str()).await.unwrap();
    assert_eq!(tomb.merged_into.as_ref(), Some(&ada.id));
    let write = app
        .update_contact(&env.caller, dup.id.as_str(), ContactPatch::default(), None)
        .await;
    assert!(
        matches!(&write, Err(AppError::Conflict { existing: Some(e), .. }) if e["id"] == ada.id.as_str()),
        "{write:?}"
    );
    // The merged contact's email is free again.
    app.create_contact(&env.caller, person("New", "augusta@example.com"), None)
        .await
        .unwrap();
}
