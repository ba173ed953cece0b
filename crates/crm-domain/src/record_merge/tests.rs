use super::*;
use crate::{
    sequence::{EnrollmentState, SourceObject},
    CompanyId, Email, EnrollmentId,
};
use proptest::prelude::*;
use serde_json::json;
use uuid::Uuid;

fn contact(n: u128) -> Contact {
    Contact {
        id: ContactId::from_uuid(Uuid::from_u128(n)),
        first_name: None,
        last_name: None,
        email: None,
        phone: None,
        linkedin_url: None,
        company_id: None,
        contact_type: None,
        owner_id: None,
        custom_fields: JsonMap::new(),
        created_at: Timestamp::from_millis(1),
        updated_at: Timestamp::from_millis(1),
        version: 1,
        deleted_at: None,
        merged_into: None,
    }
}

#[test]
fn merge_ids_are_one_to_ten_distinct_ids_other_than_the_survivor() {
    let ids = |n: usize| (0..n).map(|i| format!("con_{i}")).collect::<Vec<_>>();
    assert!(check_merge_ids("con_x", &ids(1)).is_ok());
    assert!(check_merge_ids("con_x", &ids(10)).is_ok());
    for bad in [
        ids(0),
        ids(11),
        vec!["con_x".to_owned()],
        vec!["con_1".to_owned(), "con_1".to_owned()],
    ] {
        let err = check_merge_ids("con_x", &bad).unwrap_err();
        assert!(
            matches!(&err, ValidationError::Invalid { field, .. } if field == "merge_ids"),
            "{bad:?}: {err:?}"
        );
    }
}

#[test]
fn the_survivor_keeps_its_values_and_fills_empty_ones_from_the_first_source_that_has_them() {
    let mut survivor = contact(1);
    survivor.first_name = Some("Ada".into());
    survivor.custom_fields.insert("tier".into(), json!("gold"));
    survivor.custom_fields.insert("notes".into(), json!(""));
    let mut a = contact(2);
    a.first_name = Some("Augusta".into());
    a.phone = Some("+44 1".into());
    a.custom_fields.insert("tier".into(), json!("silver"));
    a.custom_fields.insert("score".into(), json!(null));
    let mut b = contact(3);
    b.phone = Some("+44 2".into());
    b.email = Email::parse("ada@example.com");
    b.company_id = Some(CompanyId::from_uuid(Uuid::from_u128(9)));
    b.owner_id = Some(crate::UserId::from_uuid(Uuid::from_u128(4)));
    b.custom_fields.insert("score".into(), json!(7));
    b.custom_fields
        .insert("notes".into(), json!("met at a fair"));
    let changed = fill_contact(&mut survivor, &[&a, &b]);
    assert_eq!(
        changed,
        ["email", "phone", "company_id", "owner_id", "custom_fields"],
        "in field order"
    );
    assert_eq!(survivor.first_name.as_deref(), Some("Ada"));
    assert_eq!(survivor.phone.as_deref(), Some("+44 1"));
    assert_eq!(survivor.email, b.email);
    assert_eq!(
        serde_json::Value::Object(survivor.custom_fields.clone()),
        json!({"tier": "gold", "notes": "met at a fair", "score": 7})
    );
    assert!(fill_contact(&mut survivor, &[&a, &b]).is_empty());
}

#[test]
fn a_company_fills_its_domain_and_custom_fields() {
    let company = |n: u128, domain: Option<&str>| Company {
        id: CompanyId::from_uuid(Uuid::from_u128(n)),
        name: format!("c{n}"),
        domain: domain.map(String::from),
        owner_id: None,
        custom_fields: JsonMap::new(),
        created_at: Timestamp::from_millis(1),
        updated_at: Timestamp::from_millis(1),
        version: 1,
        deleted_at: None,
        merged_into: None,
    };
    let mut survivor = company(1, None);
    let mut a = company(2, Some("a.test"));
    a.custom_fields.insert("size".into(), json!([1]));
    let changed = fill_company(&mut survivor, &[&company(3, None), &a]);
    assert_eq!(changed, ["domain", "custom_fields"]);
    let mut b = company(4, None);
    b.owner_id = Some(crate::UserId::from_uuid(Uuid::from_u128(5)));
    assert_eq!(fill_company(&mut survivor, &[&b]), ["owner_id"]);
    assert_eq!(survivor.owner_id, b.owner_id);
    assert_eq!(survivor.name, "c1");
    assert_eq!(survivor.domain.as_deref(), Some("a.test"));
}

fn enrollment(n: u128, seq: u128, contact: u128, source: SourceObject) -> Enrollment {
    let contact = ContactId::from_uuid(Uuid::from_u128(contact));
    Enrollment {
        id: EnrollmentId::from_uuid(Uuid::from_u128(n)),
        sequence_id: SequenceId::from_uuid(Uuid::from_u128(seq)),
        source_id: match source {
            SourceObject::Contact => contact.as_str().to_owned(),
            SourceObject::Deal => "deal_x".to_owned(),
        },
        contact_id: contact,
        source_object: source,
        state: EnrollmentState::Active,
        exit_reason: None,
        steps_sent: 0,
        next_send_at: Some(Timestamp::from_millis(5)),
        enrolled_at: Timestamp::from_millis(1),
        updated_at: Timestamp::from_millis(1),
        ended_at: None,
    }
}

#[test]
fn enrollments_move_to_the_survivor_unless_it_has_the_sequence_then_they_exit_merged() {
    let survivor = ContactId::from_uuid(Uuid::from_u128(1));
    let now = Timestamp::from_millis(100);
    let mut ended = enrollment(13, 30, 3, SourceObject::Contact);
    ended.exit(ExitReason::Unenrolled, Timestamp::from_millis(2));
    let merged = vec![
        enrollment(10, 10, 2, SourceObject::Contact), // survivor has seq 10: exits
        enrollment(11, 20, 2, SourceObject::Deal),    // moves, source stays the deal
        enrollment(12, 20, 3, SourceObject::Contact), // seq 20 now taken: exits
        ended,                                        // moves, still ended
    ];
    let plan = plan_enrollments(
        &survivor,
        &[SequenceId::from_uuid(Uuid::from_u128(10))],
        merged,
        now,
    );
    let ids = |v: &[Enrollment]| {
        v.iter()
            .map(|e| e.id.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let id = |n: u128| {
        EnrollmentId::from_uuid(Uuid::from_u128(n))
            .as_str()
            .to_owned()
    };
    assert_eq!(ids(&plan.exited), [id(10), id(12)]);
    assert!(plan
        .exited
        .iter()
        .all(|e| e.exit_reason == Some(ExitReason::Merged) && e.ended_at == Some(now)));
    assert_eq!(ids(&plan.moved), [id(11), id(13)]);
    assert!(plan.moved.iter().all(|e| e.contact_id == survivor));
    assert_eq!(plan.moved[0].source_id, "deal_x");
    assert_eq!(plan.moved[1].source_id, survivor.as_str());
    assert_eq!(plan.moved[1].exit_reason, Some(ExitReason::Unenrolled));
}

/// A text field of a contact.
type Slot = fn(&Contact) -> &Option<String>;

fn text() -> impl Strategy<Value = Option<String>> {
    prop::option::of("[a-c]{1,3}")
}

fn custom() -> impl Strategy<Value = JsonMap> {
    prop::collection::btree_map(
        "k[0-3]",
        prop_oneof![
            Just(json!(null)),
            Just(json!("")),
            "[a-c]{1,2}".prop_map(|s| json!(s)),
            (0i64..5).prop_map(|n| json!(n)),
        ],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

prop_compose! {
    fn any_contact(n: u128)(first in text(), last in text(), phone in text(), kind in text(), cf in custom()) -> Contact {
        let mut c = contact(n);
        c.first_name = first;
        c.last_name = last;
        c.phone = phone;
        c.contact_type = kind;
        c.custom_fields = cf;
        c
    }
}

proptest! {
    #[test]
    fn merging_keeps_the_survivors_values_fills_from_the_first_source_and_is_deterministic(
        survivor in any_contact(1),
        sources in prop::collection::vec(any_contact(2), 1..5),
    ) {
        let refs: Vec<&Contact> = sources.iter().collect();
        let mut merged = survivor.clone();
        let changed = fill_contact(&mut merged, &refs);
        // Deterministic: the same inputs give the same survivor.
        let mut again = survivor.clone();
        prop_assert_eq!(fill_contact(&mut again, &refs), changed.clone());
        prop_assert_eq!(&again, &merged);
        // Idempotent: merging the same records again changes nothing.
        let mut twice = merged.clone();
        prop_assert!(fill_contact(&mut twice, &refs).is_empty());
        prop_assert_eq!(&twice, &merged);
        // Built-in fields: a survivor's value never changes; an empty one takes the first source's.
        let slots: [(Slot, &str); 4] = [
            (|c| &c.first_name, "first_name"),
            (|c| &c.last_name, "last_name"),
            (|c| &c.phone, "phone"),
            (|c| &c.contact_type, "type"),
        ];
        for (get, name) in slots {
            let expected = get(&survivor).clone().or_else(|| sources.iter().find_map(|s| get(s).clone()));
            prop_assert_eq!(get(&merged), &expected);
            prop_assert_eq!(changed.contains(&name), get(&survivor).is_none() && expected.is_some());
        }
        // Custom fields: non-empty ones kept; empty ones take the first non-empty source value.
        for (key, value) in &survivor.custom_fields {
            if !is_empty_value(value) {
                prop_assert_eq!(merged.custom_fields.get(key), Some(value));
            }
        }
        let mut keys: Vec<&String> = sources.iter().flat_map(|s| s.custom_fields.keys()).collect();
        keys.extend(survivor.custom_fields.keys());
        for key in keys {
            let own = survivor.custom_fields.get(key).filter(|v| !is_empty_value(v));
            let first = sources.iter().find_map(|s| s.custom_fields.get(key).filter(|v| !is_empty_value(v)));
            match own.or(first) {
                Some(v) => prop_assert_eq!(merged.custom_fields.get(key), Some(v)),
                None => prop_assert_eq!(merged.custom_fields.get(key), survivor.custom_fields.get(key)),
            }
        }
        prop_assert_eq!(&merged.id, &survivor.id);
        prop_assert_eq!(merged.version, survivor.version);
    }
}
