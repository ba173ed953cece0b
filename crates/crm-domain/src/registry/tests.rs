use super::*;

#[test]
fn whole_numbers_take_any_spelling_within_i64() {
    let n = |text: &str| whole_number(&serde_json::from_str(text).unwrap());
    assert_eq!(n("1e18"), Some(1_000_000_000_000_000_000));
    assert_eq!(n("3.0"), Some(3));
    assert_eq!(n("-9223372036854775808"), Some(i64::MIN));
    assert_eq!(n("-9.223372036854775808e18"), Some(i64::MIN));
    assert_eq!(n("9223372036854775807"), Some(i64::MAX));
    assert_eq!(n("3.5"), None);
    assert_eq!(n("9223372036854775808"), None);
    assert_eq!(n("9.223372036854775807e18"), None, "rounds to 2^63");
    assert_eq!(n("1e300"), None);
    assert_eq!(n("\"3\""), None);
}
use proptest::prelude::*;
use serde_json::json;

fn registry() -> Registry {
    let f = |key: &str, t: DataType, required: bool| {
        FieldDef::new(ObjectKind::Contact, key, None, t, None, required).unwrap()
    };
    let mut r = Registry {
        fields: vec![
            f("nickname", DataType::Text, false),
            f("score", DataType::Number, false),
            f("vip", DataType::Boolean, false),
            f("birthday", DataType::Date, false),
            f("tier", DataType::Select, false),
            f("tags", DataType::Multiselect, false),
            f("ltv", DataType::Currency, false),
            f("referrer", DataType::Reference, false),
            f("alt_email", DataType::Email, false),
            f("site", DataType::Url, false),
        ],
        enums: BTreeMap::new(),
    };
    let values = |vs: &[&str]| {
        vs.iter()
            .map(|v| EnumValue {
                value: (*v).into(),
                label: None,
            })
            .collect()
    };
    r.enums
        .insert("contact.tier".into(), values(&["gold", "silver"]));
    r.enums.insert("contact.tags".into(), values(&["a", "b"]));
    r
}

fn map(v: Value) -> JsonMap {
    v.as_object().unwrap().clone()
}

#[test]
fn custom_values_and_records_have_sizes() {
    let r = registry();
    let field_of = |v: Value| match r.validate_new(map(v)).unwrap_err() {
        ValidationError::Invalid { field, .. } => field,
        other => panic!("{other:?}"),
    };
    let ok = "é".repeat(text::MAX_CUSTOM_TEXT);
    assert!(r.validate_new(map(json!({"nickname": ok}))).is_ok());
    let long = "x".repeat(text::MAX_CUSTOM_TEXT + 1);
    assert_eq!(
        field_of(json!({"nickname": long})),
        "custom_fields.nickname"
    );
    let url = format!("https://example.com/{}", "x".repeat(text::MAX_LINE));
    assert_eq!(field_of(json!({"site": url})), "custom_fields.site");
    let many: Vec<&str> = vec!["a"; text::MAX_MULTISELECT + 1];
    assert_eq!(field_of(json!({"tags": many})), "custom_fields.tags");

    // 30 text fields of 10,000 characters: each allowed, together over 256 KiB.
    let mut big = r.clone();
    let mut values = JsonMap::new();
    for i in 0..30 {
        let key = format!("t{i}");
        big.fields.push(
            FieldDef::new(ObjectKind::Contact, &key, None, DataType::Text, None, false).unwrap(),
        );
        values.insert(key, Value::from("y".repeat(text::MAX_CUSTOM_TEXT)));
    }
    match big.validate_new(values.clone()).unwrap_err() {
        ValidationError::Invalid { field, .. } => assert_eq!(field, "custom_fields"),
        other => panic!("{other:?}"),
    }
    let mut current = JsonMap::new();
    assert!(big.merge(&mut current, values).is_err());
}

#[test]
fn filter_values_read_as_the_stored_value_of_their_type() {
    let r = registry();
    let ok = |k: &str, raw: &str| r.filter_value(k, raw).unwrap();
    assert_eq!(ok("nickname", "Ada"), json!("Ada"));
    assert_eq!(ok("score", "5"), json!(5));
    assert_eq!(ok("score", "2.5"), json!(2.5));
    assert_eq!(ok("vip", "true"), json!(true));
    assert_eq!(ok("birthday", "1990-01-02"), json!("1990-01-02"));
    assert_eq!(ok("tier", "gold"), json!("gold"));
    assert_eq!(
        ok("tags", "b"),
        json!("b"),
        "a multiselect filter names one value"
    );
    assert_eq!(ok("ltv", "100"), json!(100));
    assert_eq!(ok("alt_email", "Ada@Example.COM"), json!("ada@example.com"));
    assert_eq!(ok("referrer", "con_x"), json!("con_x"));

    let field_of = |k: &str, raw: &str| match r.filter_value(k, raw).unwrap_err() {
        ValidationError::Invalid { field, .. } => field,
        other => panic!("{k}={raw}: {other:?}"),
    };
    for (k, raw) in [
        ("score", "five"),
        ("score", "NaN"),
        ("vip", "yes"),
        ("birthday", "02.01.1990"),
        ("ltv", "1.5"),
        ("referrer", "x"),
        ("alt_email", "nope"),
        ("site", "ftp://x"),
    ] {
        assert_eq!(field_of(k, raw), format!("custom_fields.{k}"));
    }
    match r.filter_value("tier", "platinum").unwrap_err() {
        ValidationError::UnknownValue {
            field,
            valid_options,
            ..
        } => assert_eq!(
            (field.as_str(), valid_options),
            (
                "custom_fields.tier",
                vec!["gold".to_owned(), "silver".to_owned()]
            )
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        r.filter_value("tags", "c").unwrap_err(),
        ValidationError::UnknownValue { .. }
    ));
    match r.filter_value("nicknam", "x").unwrap_err() {
        ValidationError::UnknownField {
            field, suggestion, ..
        } => {
            assert_eq!(field, "custom_fields.nicknam");
            assert_eq!(suggestion.as_deref(), Some("did you mean `nickname`?"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn select_without_group_uses_object_dot_key() {
    let f = FieldDef::new(
        ObjectKind::Deal,
        "tier",
        None,
        DataType::Select,
        None,
        false,
    )
    .unwrap();
    assert_eq!(f.enum_group.as_deref(), Some("deal.tier"));
    assert!(FieldDef::new(
        ObjectKind::Deal,
        "x",
        None,
        DataType::Text,
        Some("g".into()),
        false
    )
    .is_err());
    assert!(FieldDef::new(
        ObjectKind::Deal,
        "Bad Key",
        None,
        DataType::Text,
        None,
        false
    )
    .is_err());
}

fn registration(object: &str, key: &str, data_type: Option<&str>) -> FieldRegistration {
    FieldRegistration {
        object: object.into(),
        key: key.into(),
        data_type: data_type.map(String::from),
        ..Default::default()
    }
}

#[test]
fn registration_defaults_to_text_and_parses_the_ten_types() {
    let f = FieldDef::register(registration("company", "industry", None)).unwrap();
    assert_eq!(
        (f.object, f.data_type, f.enum_group, f.required),
        (ObjectKind::Company, DataType::Text, None, false)
    );
    for t in DataType::ALL {
        let f = FieldDef::register(registration("deal", "x", Some(t.as_str()))).unwrap();
        assert_eq!(f.data_type, t);
    }
}

#[test]
fn registration_refuses_unknown_objects_and_types_listing_the_valid_ones() {
    let err = FieldDef::register(registration("lead", "x", None)).unwrap_err();
    assert_eq!(
        err,
        ValidationError::UnknownValue {
            field: "object".into(),
            value: "lead".into(),
            valid_options: vec![
                "contact".into(),
                "company".into(),
                "deal".into(),
                "activity".into()
            ],
        }
    );
    let err = FieldDef::register(registration("contact", "x", Some("string"))).unwrap_err();
    let ValidationError::UnknownValue {
        field,
        valid_options,
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(field, "data_type");
    assert_eq!(valid_options.len(), 10);
    assert!(valid_options.contains(&"multiselect".to_owned()));
}

#[test]
fn registration_checks_key_group_and_label() {
    for bad in ["", "Tier", "1st", "has space", "dash-ed", &"k".repeat(65)] {
        let err = FieldDef::register(registration("contact", bad, None)).unwrap_err();
        assert!(
            matches!(err, ValidationError::Invalid { ref field, .. } if field == "key"),
            "{bad:?}"
        );
    }
    assert!(FieldDef::register(registration("contact", &"k".repeat(64), None)).is_ok());
    let mut r = registration("contact", "tier", Some("select"));
    r.enum_group = Some("Bad Group".into());
    assert!(
        matches!(FieldDef::register(r.clone()), Err(ValidationError::Invalid { field, .. }) if field == "enum_group")
    );
    r.enum_group = Some("tiers".into());
    assert_eq!(
        FieldDef::register(r.clone()).unwrap().enum_group.as_deref(),
        Some("tiers"),
        "bare group names are allowed"
    );
    r.label = Some("   ".into());
    assert_eq!(
        FieldDef::register(r.clone()).unwrap().label,
        None,
        "a blank label is none"
    );
    r.label = Some(" Tier ".into());
    assert_eq!(
        FieldDef::register(r.clone()).unwrap().label.as_deref(),
        Some("Tier")
    );
    r.label = Some("x".repeat(MAX_LABEL_LEN + 1));
    assert!(
        matches!(FieldDef::register(r), Err(ValidationError::Invalid { field, .. }) if field == "label")
    );
}

#[test]
fn registration_refuses_keys_that_shadow_built_in_or_reserved_names() {
    let refused =
        |object: &str, key: &str| match FieldDef::register(registration(object, key, None)) {
            Err(ValidationError::Invalid { field, detail }) => {
                field == "key" && detail.contains(&format!("`{key}`"))
            }
            _ => false,
        };
    for key in [
        "stage",
        "pipeline",
        "pipeline_id",
        "stage_type",
        "title",
        "primary_contact_id",
        "previous_stage",
        "company",
    ] {
        assert!(refused("deal", key), "deal {key}");
    }
    for key in ["first_name", "email", "type", "company_id", "company"] {
        assert!(refused("contact", key), "contact {key}");
    }
    for key in ["name", "domain"] {
        assert!(refused("company", key), "company {key}");
    }
    for key in ["body", "occurred_at", "deal_id"] {
        assert!(refused("activity", key), "activity {key}");
    }
    for object in ["contact", "company", "deal", "activity"] {
        for key in [
            "id",
            "object",
            "created_at",
            "updated_at",
            "version",
            "deleted_at",
            "custom_fields",
        ] {
            assert!(refused(object, key), "{object} {key}");
        }
    }
    // A name is reserved only where it means something.
    assert!(FieldDef::register(registration("deal", "first_name", None)).is_ok());
    assert!(FieldDef::register(registration("company", "stage", None)).is_ok());
    assert!(FieldDef::register(registration("contact", "previous_stage", None)).is_ok());
    assert!(FieldDef::register(registration("company", "company", None)).is_ok());
    // Definitions read back are not re-checked.
    assert!(FieldDef::new(ObjectKind::Deal, "stage", None, DataType::Text, None, false).is_ok());
}

#[test]
fn multiselect_without_group_uses_object_dot_key_too() {
    let f = FieldDef::register(registration("activity", "channels", Some("multiselect"))).unwrap();
    assert_eq!(f.enum_group.as_deref(), Some("activity.channels"));
}

#[test]
fn enum_values_are_trimmed_and_group_names_checked() {
    assert_eq!(
        EnumValue::new("  vip ", Some("".into())).unwrap(),
        EnumValue {
            value: "vip".into(),
            label: None
        }
    );
    assert!(EnumValue::new("   ", None).is_err());
    assert!(EnumValue::new("a\u{7}b", None).is_err());
    assert!(check_group_name("group", "contact.type").is_ok());
    assert!(check_group_name("group", "deal-source_2").is_ok());
    for bad in ["", "Contact.type", ".type", "a b", &"g".repeat(101)] {
        assert!(check_group_name("group", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn object_types_use_the_key_format() {
    assert_eq!(
        ObjectType::new("partner", Some(" Partner ".into()))
            .unwrap()
            .label
            .as_deref(),
        Some("Partner")
    );
    assert!(ObjectType::new("Partner", None).is_err());
}

#[test]
fn objects_know_their_id_prefix_and_rule_fields() {
    let prefixes: Vec<_> = ObjectKind::ALL.iter().map(|o| o.id_prefix()).collect();
    assert_eq!(prefixes, ["con_", "cmp_", "deal_", "act_"]);
    assert_eq!(
        prefixes, REFERENCE_PREFIXES,
        "a reference may name a record of any object"
    );
    assert_eq!(ObjectKind::Company.required_on_create(), ["name"]);
    assert_eq!(ObjectKind::Deal.required_on_create(), ["title"]);
    assert_eq!(
        ObjectKind::Contact.enum_fields(),
        [("type", "contact.type")]
    );
    assert_eq!(
        ObjectKind::Activity.enum_fields(),
        [("type", "activity.type")]
    );
}

#[test]
fn unregistered_key_is_rejected_with_suggestion() {
    let err = registry()
        .validate_new(map(json!({"nicknam": "x"})))
        .unwrap_err();
    let ValidationError::UnknownField {
        field,
        suggestion,
        valid_options,
    } = err
    else {
        panic!()
    };
    assert_eq!(field, "custom_fields.nicknam");
    assert_eq!(suggestion.as_deref(), Some("did you mean `nickname`?"));
    assert!(valid_options.contains(&"nickname".to_owned()));
}

#[test]
fn select_outside_group_lists_valid_options() {
    let err = registry()
        .validate_new(map(json!({"tier": "bronze"})))
        .unwrap_err();
    assert_eq!(
        err,
        ValidationError::UnknownValue {
            field: "custom_fields.tier".into(),
            value: "bronze".into(),
            valid_options: vec!["gold".into(), "silver".into()]
        }
    );
    assert!(registry()
        .validate_new(map(json!({"tags": ["a", "zzz"]})))
        .is_err());
    assert!(registry()
        .validate_new(map(json!({"tags": ["a", "b"]})))
        .is_ok());
}

#[test]
fn wrong_types_fail() {
    for (k, v) in [
        ("score", json!("12")),
        ("vip", json!("yes")),
        ("birthday", json!("2026-13-01")),
        ("ltv", json!(10.5)),
        ("alt_email", json!("nope")),
        ("site", json!("ftp://x.y")),
        ("nickname", json!(3)),
        ("referrer", json!(5)),
    ] {
        let mut m = JsonMap::new();
        m.insert(k.into(), v.clone());
        assert!(registry().validate_new(m).is_err(), "{k}={v} should fail");
    }
}

#[test]
fn currency_accepts_whole_floats_and_normalises() {
    let (out, _) = registry()
        .validate_new(map(json!({"ltv": 1200.0})))
        .unwrap();
    assert_eq!(out["ltv"], json!(1200));
}

#[test]
fn references_are_returned_for_checking() {
    let (_, refs) = registry()
        .validate_new(map(json!({"referrer": "con_0000000000000000000000000a"})))
        .unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].field, "custom_fields.referrer");
}

#[test]
fn merge_sets_and_removes() {
    let r = registry();
    let mut current = map(json!({"nickname": "a", "score": 1}));
    let (changed, _) = r
        .merge(&mut current, map(json!({"nickname": null, "vip": true})))
        .unwrap();
    assert!(changed);
    assert_eq!(
        Value::Object(current.clone()),
        json!({"score": 1, "vip": true})
    );
    let (changed, _) = r.merge(&mut current, map(json!({"score": 1}))).unwrap();
    assert!(!changed, "same value is no change");
}

#[test]
fn required_fields_are_enforced_on_create_and_merge() {
    let mut r = registry();
    r.fields.push(
        FieldDef::new(
            ObjectKind::Contact,
            "region",
            None,
            DataType::Text,
            None,
            true,
        )
        .unwrap(),
    );
    let err = r.validate_new(JsonMap::new()).unwrap_err();
    assert_eq!(
        err,
        ValidationError::invalid("custom_fields.region", "this custom field is required")
    );
    let mut current = map(json!({"region": "eu"}));
    assert!(r.merge(&mut current, map(json!({"region": null}))).is_err());
}

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z@.:/0-9-]{0,20}".prop_map(Value::String),
        prop::collection::vec("[a-z]{1,3}".prop_map(Value::String), 0..3).prop_map(Value::Array),
    ]
}

proptest! {
    /// No value of the wrong type is ever accepted, and an accepted value is accepted again,
    /// unchanged, when it comes back (as it does from the store).
    #[test]
    fn accepted_values_are_of_the_field_type_and_stable(idx in 0usize..10, value in arb_value()) {
        let r = registry();
        let def = r.fields[idx].clone();
        let mut refs = Vec::new();
        if let Ok(stored) = r.check_value(&def, value, &mut refs) {
            let ok_type = match def.data_type {
                DataType::Text | DataType::Select | DataType::Email | DataType::Url | DataType::Reference | DataType::Date => stored.is_string(),
                DataType::Number => stored.is_number(),
                DataType::Currency => stored.is_i64(),
                DataType::Boolean => stored.is_boolean(),
                DataType::Multiselect => stored.is_array(),
            };
            prop_assert!(ok_type);
            let round_trip: Value = serde_json::from_str(&stored.to_string()).unwrap();
            let again = r.check_value(&def, round_trip, &mut refs);
            prop_assert_eq!(again, Ok(stored));
        }
    }
}
