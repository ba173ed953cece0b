//! The REST aliases of `svc_manage_stage` (`PATCH` and `DELETE /pipelines/{pipeline}/stages/{key}`,
//! decisions §3): the path names the stage and the method the action, and neither the query nor
//! the body can name another (a `?key=` once removed or renamed a stage other than the path's).

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

/// The stages of pipeline `qtest` as `(key, label)`.
async fn stages(s: &Server) -> Vec<(String, String)> {
    let p = s.get("/pipelines/qtest").await.ok(200).clone();
    p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            (
                st["key"].as_str().unwrap().to_owned(),
                st["label"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, l)| ((*k).to_owned(), (*l).to_owned()))
        .collect()
}

async fn create_qtest(s: &Server) -> Vec<(String, String)> {
    s.post(
        "/pipelines",
        json!({"key": "qtest", "stages": ["one", "two", "three"]}),
    )
    .await
    .ok(201);
    stages(s).await
}

async fn a_query_parameter_never_names_the_stage(s: Server) {
    let before = create_qtest(&s).await;
    let res = s.delete("/pipelines/qtest/stages/one?key=two").await;
    let p = res.problem(400, "bad_request");
    assert_eq!(
        (&p["field"], &p["valid_options"]),
        (&json!("key"), &json!(["move_to"]))
    );
    let res = s
        .req(Method::PATCH, "/pipelines/qtest/stages/one?key=three")
        .json(&json!({"label": "Renamed"}))
        .send()
        .await;
    let p = res.problem(400, "bad_request");
    assert_eq!(
        (&p["field"], &p["valid_options"]),
        (&json!("key"), &json!([]))
    );
    // Nor the action, nor anything else the route does not take; and `move_to` only once.
    s.delete("/pipelines/qtest/stages/one?action=update")
        .await
        .problem(400, "bad_request");
    s.req(Method::PATCH, "/pipelines/qtest/stages/one?move_to=two")
        .json(&json!({}))
        .send()
        .await
        .problem(400, "bad_request");
    s.delete("/pipelines/qtest/stages/one?move_to=two&move_to=three")
        .await
        .problem(400, "bad_request");
    assert_eq!(stages(&s).await, before, "nothing was removed or renamed");
}

async fn a_body_key_or_action_is_refused(s: Server) {
    let before = create_qtest(&s).await;
    let patch = |body: Value| {
        s.req(Method::PATCH, "/pipelines/qtest/stages/one")
            .json(&body)
            .send()
    };
    let res = patch(json!({"key": "three", "label": "Renamed"})).await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(
        (&p["field"], &p["valid_options"]),
        (&json!("key"), &json!(["label", "type", "position"]))
    );
    patch(json!({"action": "remove"}))
        .await
        .problem(422, "unknown_field");
    patch(json!({"move_to": "two"}))
        .await
        .problem(422, "unknown_field");
    let delete = |body: Value| {
        s.req(Method::DELETE, "/pipelines/qtest/stages/one")
            .json(&body)
            .send()
    };
    assert_eq!(
        delete(json!({"key": "two"}))
            .await
            .problem(422, "unknown_field")["field"],
        "key"
    );
    delete(json!({"action": "update", "label": "X"}))
        .await
        .problem(422, "unknown_field");
    assert_eq!(stages(&s).await, before, "nothing was removed or renamed");
}

async fn the_aliases_change_the_stage_their_path_names(s: Server) {
    create_qtest(&s).await;
    let p = s
        .patch(
            "/pipelines/qtest/stages/two",
            json!({"label": "Second", "position": 0}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(p["stages"][0]["label"], "Second");
    // An empty body is no change of fields.
    s.req(Method::DELETE, "/pipelines/qtest/stages/three")
        .json(&json!({}))
        .send()
        .await
        .ok(200);
    s.delete("/pipelines/qtest/stages/two?move_to=one")
        .await
        .ok(200);
    assert_eq!(stages(&s).await, pairs(&[("one", "one")]));
}

crate::on_both_stores!(
    a_query_parameter_never_names_the_stage,
    a_body_key_or_action_is_refused,
    the_aliases_change_the_stage_their_path_names
);
