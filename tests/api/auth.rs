//! Keys and modes: 401 for every kind of bad key; test and live data never meet.

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

async fn every_kind_of_bad_key_is_unauthorized(s: Server) {
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("not bearer", Some(format!("Basic {}", s.keys.test))),
        ("malformed", Some("Bearer svc_test_short".into())),
        (
            "wrong prefix",
            Some("Bearer sk_test_0123456789012345678901234567890a".into()),
        ),
        (
            "unknown",
            Some("Bearer svc_test_00000000000000000000000000000000".into()),
        ),
        ("empty", Some("Bearer ".into())),
    ];
    for (what, header) in cases {
        let mut req = s.anon(Method::GET, "/contacts");
        if let Some(h) = &header {
            req = req.header("Authorization", h);
        }
        let res = req.send().await;
        res.problem(401, "unauthorized");
        assert_eq!(res.header("www-authenticate"), Some("Bearer"), "{what}");
    }
    // Authentication comes before anything else, even a malformed body.
    s.anon(Method::POST, "/contacts")
        .raw("{oops")
        .send()
        .await
        .problem(401, "unauthorized");
}

async fn test_and_live_data_are_isolated(s: Server) {
    let test_contact = s
        .post("/contacts", json!({"email": "both@example.com"}))
        .await
        .ok(201)
        .clone();
    let live = |m: Method, p: &str| s.req(m, p).key(&s.keys.live);
    let live_contact = live(Method::POST, "/contacts")
        .json(&json!({"email": "both@example.com"}))
        .send()
        .await;
    let live_contact = live_contact.ok(201).clone();
    assert_ne!(
        test_contact["id"], live_contact["id"],
        "the same email may exist once per mode"
    );

    let test_id = test_contact["id"].as_str().unwrap();
    let live_id = live_contact["id"].as_str().unwrap();
    live(Method::GET, &format!("/contacts/{test_id}"))
        .send()
        .await
        .problem(404, "not_found");
    s.get(&format!("/contacts/{live_id}"))
        .await
        .problem(404, "not_found");
    live(Method::DELETE, &format!("/contacts/{test_id}"))
        .send()
        .await
        .problem(404, "not_found");
    let live_list = live(Method::GET, "/contacts").send().await;
    assert_eq!(live_list.ok(200)["data"].as_array().unwrap().len(), 1);
    assert_eq!(live_list.body["data"][0]["id"], live_id);
    let test_events = s.get("/events").await;
    assert!(test_events.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["mode"] == "test"));
}

crate::on_both_stores!(
    every_kind_of_bad_key_is_unauthorized,
    test_and_live_data_are_isolated
);
