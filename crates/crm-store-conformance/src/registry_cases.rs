//! Conformance cases of the registry port: enum groups and values, custom fields and object
//! types, in registration order and per tenant.

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{DataType, FieldDef, Mode, ObjectKind, ObjectType, Timestamp};

use crate::fixtures::*;

pub async fn registry_groups_and_values_are_idempotent_and_ordered(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(5);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.insert_enum_group(&t, "contact.type", now).await.unwrap());
    assert!(!tx.insert_enum_group(&t, "contact.type", now).await.unwrap());
    for v in ["zeta", "alpha", "mid"] {
        assert!(tx
            .insert_enum_value(&t, "deal.source", v, Some("Label"), now)
            .await
            .unwrap());
    }
    assert!(!tx
        .insert_enum_value(&t, "deal.source", "alpha", None, now)
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let r = tx.load_registry(&t, ObjectKind::Contact).await.unwrap();
    assert!(r.enums["contact.type"].is_empty());
    let values: Vec<_> = r.enums["deal.source"]
        .iter()
        .map(|v| v.value.as_str())
        .collect();
    assert_eq!(
        values,
        ["zeta", "alpha", "mid"],
        "values keep registration order"
    );
    assert_eq!(r.enums["deal.source"][0].label.as_deref(), Some("Label"));
}

fn field(object: ObjectKind, key: &str, data_type: DataType) -> FieldDef {
    FieldDef::new(
        object,
        key,
        Some(format!("Label {key}")),
        data_type,
        None,
        false,
    )
    .expect("valid field")
}

pub async fn custom_fields_register_once_in_order_per_object(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let zeta = field(ObjectKind::Contact, "zeta", DataType::Number);
    let mut tier = field(ObjectKind::Contact, "tier", DataType::Select);
    tier.required = true;
    let alpha = FieldDef {
        label: None,
        ..field(ObjectKind::Contact, "alpha", DataType::Multiselect)
    };
    let industry = field(ObjectKind::Company, "industry", DataType::Text);
    let mut tx = store.begin_write().await.unwrap();
    for f in [&zeta, &tier, &industry, &alpha] {
        assert!(
            tx.insert_field(&t, f, now).await.unwrap(),
            "{} is new",
            f.key
        );
    }
    // Re-registering a key changes nothing, whatever the new definition says.
    let retyped = FieldDef {
        label: Some("Other".into()),
        required: true,
        ..field(ObjectKind::Contact, "zeta", DataType::Text)
    };
    assert!(!tx.insert_field(&t, &retyped, now).await.unwrap());
    // The same key on another object is another field.
    let company_zeta = field(ObjectKind::Company, "zeta", DataType::Boolean);
    assert!(tx.insert_field(&t, &company_zeta, now).await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let contact = tx.load_registry(&t, ObjectKind::Contact).await.unwrap();
    assert_eq!(
        contact.fields,
        vec![zeta.clone(), tier.clone(), alpha.clone()],
        "every attribute round-trips, in registration order"
    );
    let company = tx.load_registry(&t, ObjectKind::Company).await.unwrap();
    assert_eq!(company.fields, vec![industry.clone(), company_zeta.clone()]);
    assert!(tx
        .load_registry(&t, ObjectKind::Deal)
        .await
        .unwrap()
        .fields
        .is_empty());
    let all = tx.list_fields(&t).await.unwrap();
    let of = |o: ObjectKind| {
        all.iter()
            .filter(|f| f.object == o)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(all.len(), 5);
    assert_eq!(of(ObjectKind::Contact), vec![zeta, tier, alpha]);
    assert_eq!(of(ObjectKind::Company), vec![industry, company_zeta]);
}

pub async fn object_types_register_once_in_order(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let partner = ObjectType {
        key: "partner".into(),
        label: Some("Partner".into()),
    };
    let asset = ObjectType {
        key: "asset".into(),
        label: None,
    };
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.list_object_types(&t).await.unwrap().is_empty());
    assert!(tx.insert_object_type(&t, &partner, now).await.unwrap());
    assert!(tx.insert_object_type(&t, &asset, now).await.unwrap());
    let relabelled = ObjectType {
        key: "partner".into(),
        label: Some("Reseller".into()),
    };
    assert!(!tx.insert_object_type(&t, &relabelled, now).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_object_types(&t).await.unwrap(),
        vec![partner, asset]
    );
}

/// Two transactions registering at once: the one that commits second comes second, even though
/// it started before the first committed (the position must not be read from a stale snapshot).
pub async fn concurrent_registrations_keep_registration_order(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let mut first = store.begin_write().await.unwrap();
    assert!(first
        .insert_field(&t, &field(ObjectKind::Deal, "zeta", DataType::Text), now)
        .await
        .unwrap());
    assert!(first
        .insert_object_type(
            &t,
            &ObjectType {
                key: "zeta".into(),
                label: None
            },
            now
        )
        .await
        .unwrap());
    let second = {
        let (store, t) = (store.clone(), t.clone());
        tokio::spawn(async move {
            let mut tx = store.begin_write().await.unwrap();
            assert!(tx
                .insert_field(&t, &field(ObjectKind::Deal, "alpha", DataType::Text), now)
                .await
                .unwrap());
            assert!(tx
                .insert_object_type(
                    &t,
                    &ObjectType {
                        key: "alpha".into(),
                        label: None
                    },
                    now
                )
                .await
                .unwrap());
            tx.commit().await.unwrap();
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    first.commit().await.unwrap();
    second.await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let keys: Vec<_> = tx
        .load_registry(&t, ObjectKind::Deal)
        .await
        .unwrap()
        .fields
        .into_iter()
        .map(|f| f.key)
        .collect();
    assert_eq!(keys, ["zeta", "alpha"]);
    let types: Vec<_> = tx
        .list_object_types(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(types, ["zeta", "alpha"]);
}

pub async fn registry_fields_and_types_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx
        .insert_field(&t, &field(ObjectKind::Contact, "tier", DataType::Text), now)
        .await
        .unwrap());
    assert!(tx
        .insert_object_type(
            &t,
            &ObjectType {
                key: "partner".into(),
                label: None
            },
            now
        )
        .await
        .unwrap());
    // The same keys are free in every other tenant.
    let live = tenant(&ws, Mode::Live);
    assert!(tx
        .insert_field(
            &live,
            &field(ObjectKind::Contact, "tier", DataType::Number),
            now
        )
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_fields(&live).await.unwrap()[0].data_type,
        DataType::Number
    );
    assert!(tx.list_object_types(&live).await.unwrap().is_empty());
    for other in [tenant(&ws2, Mode::Test), tenant(&ws2, Mode::Live)] {
        assert!(tx.list_fields(&other).await.unwrap().is_empty());
        assert!(tx
            .load_registry(&other, ObjectKind::Contact)
            .await
            .unwrap()
            .fields
            .is_empty());
        assert!(tx.list_object_types(&other).await.unwrap().is_empty());
    }
}
