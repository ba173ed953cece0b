//! The registry: custom fields, enum groups and values, custom object types.

use crm_app::AppError;
use crm_domain::{ContactDraft, FieldRegistration, ObjectKind};
use serde_json::json;

use crate::support::{env, person};

fn field(key: &str, data_type: &str) -> FieldRegistration {
    FieldRegistration {
        object: "contact".into(),
        key: key.into(),
        label: None,
        data_type: Some(data_type.into()),
        enum_group: None,
        required: false,
        unique: false,
    }
}

#[tokio::test]
async fn a_registered_field_is_validated_on_the_records_of_its_object() {
    let env = env().await;
    let set = env
        .app
        .create_field(&env.caller, field("score", "number"))
        .await
        .unwrap();
    assert!(set.created);
    assert_eq!(set.object, ObjectKind::Contact);
    let mut draft = person("Ada", "ada@example.com");
    draft
        .custom_fields
        .insert("score".into(), json!("not a number"));
    let refused = env.app.create_contact(&env.caller, draft, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
    let mut draft = person("Ada", "ada@example.com");
    draft.custom_fields.insert("score".into(), json!(7));
    let ada = env
        .app
        .create_contact(&env.caller, draft, None)
        .await
        .unwrap();
    assert_eq!(ada.custom_fields.get("score"), Some(&json!(7)));
}

#[tokio::test]
async fn registering_a_field_again_keeps_its_first_type() {
    let env = env().await;
    env.app
        .create_field(&env.caller, field("score", "number"))
        .await
        .unwrap();
    let again = env
        .app
        .create_field(&env.caller, field("score", "text"))
        .await
        .unwrap();
    assert!(!again.created);
    let view = env.app.describe_registry(&env.caller).await.unwrap();
    let score = view.fields.iter().find(|f| f.key == "score").unwrap();
    assert_eq!(score.data_type.as_str(), "number");
}

#[tokio::test]
async fn an_unregistered_custom_field_is_refused() {
    let env = env().await;
    let mut draft: ContactDraft = person("Ada", "ada@example.com");
    draft.custom_fields.insert("nope".into(), json!(1));
    let refused = env.app.create_contact(&env.caller, draft, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_enum_value_is_added_once_and_then_accepted_as_a_contact_type() {
    let env = env().await;
    let added = env
        .app
        .create_enum_value(
            &env.caller,
            "contact.type",
            "partner",
            Some("Partner".into()),
        )
        .await
        .unwrap();
    assert!(added.values.iter().any(|v| v.value == "partner"));
    let enums = env.app.list_enums(&env.caller).await.unwrap();
    let types = &enums["contact.type"];
    assert_eq!(types.iter().filter(|v| v.value == "partner").count(), 1);
    let draft = ContactDraft {
        contact_type: Some("partner".into()),
        ..person("Ada", "ada@example.com")
    };
    env.app
        .create_contact(&env.caller, draft, None)
        .await
        .unwrap();
    let unknown = ContactDraft {
        contact_type: Some("alien".into()),
        ..person("Bob", "bob@example.com")
    };
    let refused = env.app.create_contact(&env.caller, unknown, None).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_custom_object_type_is_registered_once() {
    let env = env().await;
    let first = env
        .app
        .create_object_type(&env.caller, "invoice", Some("Invoice".into()))
        .await
        .unwrap();
    assert!(first.created);
    let second = env
        .app
        .create_object_type(&env.caller, "invoice", None)
        .await
        .unwrap();
    assert!(!second.created);
    let view = env.app.describe_registry(&env.caller).await.unwrap();
    assert_eq!(view.types.iter().filter(|t| t.key == "invoice").count(), 1);
}
