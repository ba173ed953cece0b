//! Pipelines and their stages.

use crm_app::{
    pipelines::{PipelineUpdate, StageAction},
    AppError,
};
use crm_domain::{DealDraft, PipelineDraft, StageDraft, StageType};

use crate::support::env;

fn stage(key: &str, stage_type: Option<&str>) -> StageDraft {
    StageDraft {
        key: key.into(),
        label: None,
        stage_type: stage_type.map(Into::into),
    }
}

fn hiring() -> PipelineDraft {
    PipelineDraft {
        key: Some("hiring".into()),
        name: Some("Hiring".into()),
        is_default: false,
        stages: vec![
            stage("applied", None),
            stage("hired", Some("won")),
            stage("declined", Some("lost")),
        ],
    }
}

#[tokio::test]
async fn a_pipeline_is_created_with_its_stages_in_order_and_found_by_key() {
    let env = env().await;
    let created = env
        .app
        .create_pipeline(&env.caller, hiring())
        .await
        .unwrap();
    let keys: Vec<_> = created.stages.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["applied", "hired", "declined"]);
    assert_eq!(created.stages[1].stage_type, StageType::Won);
    let found = env.app.get_pipeline(&env.caller, "hiring").await.unwrap();
    assert_eq!(found, created);
    let all = env.app.list_pipelines(&env.caller).await.unwrap();
    assert_eq!(
        all.len(),
        2,
        "the workspace's default pipeline and this one"
    );
}

#[tokio::test]
async fn a_pipeline_key_taken_in_the_tenant_is_a_conflict() {
    let env = env().await;
    env.app
        .create_pipeline(&env.caller, hiring())
        .await
        .unwrap();
    let again = env.app.create_pipeline(&env.caller, hiring()).await;
    assert!(matches!(again, Err(AppError::Conflict { .. })), "{again:?}");
}

#[tokio::test]
async fn a_new_default_pipeline_takes_the_flag_from_the_old_one() {
    let env = env().await;
    env.app
        .create_pipeline(&env.caller, hiring())
        .await
        .unwrap();
    let update = PipelineUpdate {
        name: Some("People".into()),
        is_default: Some(true),
    };
    let updated = env
        .app
        .update_pipeline(&env.caller, "hiring", update)
        .await
        .unwrap();
    assert!(updated.is_default && updated.name == "People");
    let old = env.app.get_pipeline(&env.caller, "default").await.unwrap();
    assert!(!old.is_default);
}

#[tokio::test]
async fn a_stage_is_added_at_a_position_and_removed_moving_its_deals() {
    let env = env().await;
    env.app
        .create_pipeline(&env.caller, hiring())
        .await
        .unwrap();
    let added = env
        .app
        .manage_stage(
            &env.caller,
            "hiring",
            StageAction::Add {
                draft: stage("interview", None),
                position: Some(1),
            },
        )
        .await
        .unwrap();
    let keys: Vec<_> = added.stages.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["applied", "interview", "hired", "declined"]);
    let deal = env
        .app
        .create_deal(
            &env.caller,
            DealDraft {
                title: Some("Grace".into()),
                stage: Some("interview".into()),
                ..Default::default()
            },
            Some("hiring"),
            None,
        )
        .await
        .unwrap();
    let removed = env
        .app
        .manage_stage(
            &env.caller,
            "hiring",
            StageAction::Remove {
                key: "interview".into(),
                move_to: Some("applied".into()),
            },
        )
        .await
        .unwrap();
    assert!(removed.stages.iter().all(|s| s.key != "interview"));
    let moved = env
        .app
        .get_deal(&env.caller, deal.id.as_str())
        .await
        .unwrap();
    assert_eq!(moved.stage, "applied");
}

#[tokio::test]
async fn the_default_pipeline_cannot_be_deleted_but_another_empty_one_can() {
    let env = env().await;
    env.app
        .create_pipeline(&env.caller, hiring())
        .await
        .unwrap();
    let refused = env.app.delete_pipeline(&env.caller, "default").await;
    assert!(refused.is_err());
    env.app
        .delete_pipeline(&env.caller, "hiring")
        .await
        .unwrap();
    let gone = env.app.get_pipeline(&env.caller, "hiring").await;
    assert!(matches!(gone, Err(AppError::NotFound { .. })), "{gone:?}");
}
