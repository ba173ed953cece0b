//! Input errors of decisions §4-§5, each as a problem document.

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

async fn malformed_json_and_non_objects_are_bad_requests(s: Server) {
    s.req(Method::POST, "/contacts")
        .raw("{\"first_name\": ")
        .send()
        .await
        .problem(400, "bad_request");
    s.req(Method::POST, "/contacts")
        .raw("[1, 2]")
        .send()
        .await
        .problem(400, "bad_request");
    s.req(Method::POST, "/contacts")
        .raw("\"text\"")
        .send()
        .await
        .problem(400, "bad_request");
}

async fn bodies_over_one_mebibyte_are_refused(s: Server) {
    let big = format!("{{\"first_name\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));
    s.req(Method::POST, "/contacts")
        .raw(big)
        .send()
        .await
        .problem(413, "payload_too_large");
}

async fn unknown_query_parameters_list_the_valid_ones(s: Server) {
    let res = s.get("/contacts?emial=a@b.co").await;
    let p = res.problem(400, "bad_request");
    assert_eq!(p["field"], "emial");
    assert_eq!(p["suggestion"], "did you mean `email`?");
    assert!(p["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("include_deleted")));
}

async fn limits_out_of_range_fail_validation(s: Server) {
    for bad in ["0", "101", "abc", "2.5", "-1"] {
        let res = s.get(&format!("/contacts?limit={bad}")).await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "limit",
            "limit={bad}"
        );
    }
    s.get("/contacts?limit=100").await.ok(200);
}

async fn bad_cursors_are_refused(s: Server) {
    for i in 0..3 {
        s.post("/contacts", json!({"first_name": format!("c{i}")}))
            .await
            .ok(201);
    }
    let page = s.get("/contacts?limit=1").await.ok(200).clone();
    let cursor = page["next_cursor"].as_str().unwrap();
    s.get("/contacts?cursor=garbage")
        .await
        .problem(400, "invalid_cursor");
    // A cursor belongs to its list and its filters.
    s.get(&format!("/companies?cursor={cursor}"))
        .await
        .problem(400, "invalid_cursor");
    s.get(&format!("/contacts?q=c&cursor={cursor}"))
        .await
        .problem(400, "invalid_cursor");
    let mut tampered = cursor.to_owned();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    s.get(&format!("/contacts?cursor={tampered}"))
        .await
        .problem(400, "invalid_cursor");
    s.get(&format!("/contacts?limit=1&cursor={cursor}"))
        .await
        .ok(200);
}

async fn bad_if_match_is_a_bad_request(s: Server) {
    let c = s
        .post("/contacts", json!({"first_name": "A"}))
        .await
        .ok(201)
        .clone();
    let path = format!("/contacts/{}", c["id"].as_str().unwrap());
    s.req(Method::PATCH, &path)
        .header("If-Match", "yesterday")
        .json(&json!({"first_name": "B"}))
        .send()
        .await
        .problem(400, "bad_request");
    let res = s
        .req(Method::PATCH, &path)
        .header("If-Match", "*")
        .json(&json!({"first_name": "B"}))
        .send()
        .await;
    assert_eq!(res.ok(200)["version"], 2);
}

async fn unknown_routes_are_problems(s: Server) {
    s.get("/nothing-here").await.problem(404, "not_found");
    s.req(Method::PUT, "/contacts")
        .send()
        .await
        .problem(405, "method_not_allowed");
}

crate::on_both_stores!(
    malformed_json_and_non_objects_are_bad_requests,
    bodies_over_one_mebibyte_are_refused,
    unknown_query_parameters_list_the_valid_ones,
    limits_out_of_range_fail_validation,
    bad_cursors_are_refused,
    bad_if_match_is_a_bad_request,
    unknown_routes_are_problems,
);
