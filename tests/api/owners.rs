//! Owners (decisions §24): contacts, companies and deals name the user of their workspace who
//! owns them in `owner_id`, written like any field and filtered with `owner_id=`; an id that
//! names no user of the workspace is `invalid_reference`; deleting a user leaves the records
//! they owned, in both modes, without an owner, each with a history entry by `system`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::imports::{finished, post_csv};
use crate::support::{create_workspace, Server};

/// A well-formed user id no user has.
const NOBODY: &str = "usr_00000000000000000000000000";

async fn new_user(s: &Server, key: &str, email: &str) -> String {
    s.req(Method::POST, "/users")
        .key(key)
        .json(&json!({"email": email, "name": "Owner", "role": "member"}))
        .send()
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `POST path` with `body`, which must answer 201; the created record.
async fn created(s: &Server, path: &str, body: Value) -> Value {
    s.post(path, body).await.ok(201).clone()
}

fn ids(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect()
}

async fn owners_are_written_filtered_and_checked(s: Server) {
    let test = s.keys.test.clone();
    let kate = new_user(&s, &test, "kate@example.com").await;
    let omar = new_user(&s, &test, "omar@example.com").await;

    let mine = created(
        &s,
        "/contacts",
        json!({"email": "a@example.com", "owner_id": kate}),
    )
    .await;
    assert_eq!(mine["owner_id"], kate.as_str());
    let theirs = created(
        &s,
        "/contacts",
        json!({"email": "b@example.com", "owner_id": omar}),
    )
    .await;
    let nobody = created(&s, "/contacts", json!({"email": "c@example.com"})).await;
    assert_eq!(nobody["owner_id"], Value::Null);
    let company = created(&s, "/companies", json!({"name": "Acme", "owner_id": omar})).await;
    assert_eq!(company["owner_id"], omar.as_str());
    let deal = created(
        &s,
        "/deals",
        json!({"title": "Big one", "owner_id": kate, "value_cents": 500, "currency": "USD"}),
    )
    .await;
    assert_eq!(deal["owner_id"], kate.as_str());
    s.post(
        "/deals",
        json!({"title": "Small one", "value_cents": 7, "currency": "USD"}),
    )
    .await
    .ok(201);

    // Each list filters by owner; an id no user has simply matches nothing.
    let listed = s.get(&format!("/contacts?owner_id={kate}")).await;
    assert_eq!(ids(listed.ok(200)), [mine["id"].as_str().unwrap()]);
    let listed = s.get(&format!("/contacts?owner_id={omar}")).await;
    assert_eq!(ids(listed.ok(200)), [theirs["id"].as_str().unwrap()]);
    let listed = s.get(&format!("/companies?owner_id={omar}")).await;
    assert_eq!(ids(listed.ok(200)), [company["id"].as_str().unwrap()]);
    let listed = s.get(&format!("/deals?owner_id={kate}")).await;
    assert_eq!(ids(listed.ok(200)), [deal["id"].as_str().unwrap()]);
    let listed = s
        .get(&format!("/contacts?owner_id={NOBODY}&q=example"))
        .await;
    assert!(ids(listed.ok(200)).is_empty());
    s.get("/contacts?owner_id=kate")
        .await
        .problem(422, "validation_failed");

    // The board's totals count one owner's deals when asked.
    let totals = s.get("/pipelines/default/totals").await.ok(200).clone();
    let all: u64 = totals["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["deals"].as_u64().unwrap())
        .sum();
    assert_eq!(all, 2);
    let kates = s
        .get(&format!("/pipelines/default/totals?owner_id={kate}"))
        .await
        .ok(200)
        .clone();
    let first = &kates["stages"][0];
    assert_eq!(first["deals"], 1, "{kates}");
    assert_eq!(
        first["values"],
        json!([{"currency": "USD", "value_cents": 500}])
    );

    // An owner must be a user of this workspace.
    let other = create_workspace(&s.database_url, &[]);
    let stranger = new_user(&s, &other.test, "stranger@example.com").await;
    for bad in [NOBODY, stranger.as_str(), "usr_nope", "kate@example.com"] {
        let refused = s
            .post(
                "/contacts",
                json!({"email": "d@example.com", "owner_id": bad}),
            )
            .await;
        let problem = refused.problem(422, "invalid_reference");
        assert_eq!(problem["field"], "owner_id", "{problem}");
        s.post("/companies", json!({"name": "X", "owner_id": bad}))
            .await
            .problem(422, "invalid_reference");
        s.post("/deals", json!({"title": "X", "owner_id": bad}))
            .await
            .problem(422, "invalid_reference");
    }
    let path = format!("/contacts/{}", mine["id"].as_str().unwrap());
    s.patch(&path, json!({"owner_id": stranger}))
        .await
        .problem(422, "invalid_reference");

    // Changed and cleared like any field, with history.
    let moved = s
        .patch(&path, json!({"owner_id": omar}))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (moved["owner_id"].as_str(), moved["version"].as_i64()),
        (Some(omar.as_str()), Some(2))
    );
    let cleared = s
        .patch(&path, json!({"owner_id": null}))
        .await
        .ok(200)
        .clone();
    assert_eq!(cleared["owner_id"], Value::Null);
    let history = s.get(&format!("{path}/history")).await.ok(200).clone();
    let change = &history["data"][1]["changes"][0];
    assert_eq!(
        change,
        &json!({"field": "owner_id", "from": kate, "to": omar}),
        "{history}"
    );
    let company_path = format!("/companies/{}", company["id"].as_str().unwrap());
    let company = s
        .patch(&company_path, json!({"owner_id": kate}))
        .await
        .ok(200)
        .clone();
    assert_eq!(company["owner_id"], kate.as_str());
    let deal_path = format!("/deals/{}", deal["id"].as_str().unwrap());
    let deal = s
        .patch(&deal_path, json!({"owner_id": ""}))
        .await
        .ok(200)
        .clone();
    assert_eq!(deal["owner_id"], Value::Null);

    // A projection may name it.
    let shaped = s
        .get(&format!("{company_path}?fields=owner_id"))
        .await
        .ok(200)
        .clone();
    assert_eq!(shaped["owner_id"], kate.as_str());

    // An import fills it like any column, and refuses a row naming no user.
    let csv = format!("email,owner_id\ne@example.com,{kate}\nf@example.com,{NOBODY}\n");
    let import = post_csv(&s, "object=contact", csv).await.ok(202).clone();
    let import = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(
        (import["created"].as_i64(), import["failed"].as_i64()),
        (Some(1), Some(1)),
        "{import}"
    );
    let listed = s
        .get(&format!("/contacts?owner_id={kate}&email=e@example.com"))
        .await;
    assert_eq!(ids(listed.ok(200)).len(), 1);
}

async fn deleting_a_user_leaves_their_records_without_an_owner(s: Server) {
    let (test, live) = (s.keys.test.clone(), s.keys.live.clone());
    let kate = new_user(&s, &test, "kate@example.com").await;
    let omar = new_user(&s, &test, "omar@example.com").await;
    let contact = created(
        &s,
        "/contacts",
        json!({"email": "a@example.com", "owner_id": kate}),
    )
    .await;
    let kept = created(
        &s,
        "/contacts",
        json!({"email": "b@example.com", "owner_id": omar}),
    )
    .await;
    // Users belong to the workspace, records to a mode: the live deal is released too.
    let deal = s
        .req(Method::POST, "/deals")
        .key(&live)
        .json(&json!({"title": "Live one", "owner_id": kate}))
        .send()
        .await
        .ok(201)
        .clone();

    s.delete(&format!("/users/{kate}")).await.ok(200);

    let path = format!("/contacts/{}", contact["id"].as_str().unwrap());
    let released = s.get(&path).await.ok(200).clone();
    assert_eq!(
        (released["owner_id"].clone(), released["version"].as_i64()),
        (Value::Null, Some(2))
    );
    let history = s.get(&format!("{path}/history")).await.ok(200).clone();
    let entry = &history["data"][0];
    assert_eq!(entry["actor"]["type"], "system", "{history}");
    assert_eq!(entry["via"], "direct");
    assert_eq!(
        entry["changes"],
        json!([{"field": "owner_id", "from": kate, "to": null}])
    );
    let deal_path = format!("/deals/{}", deal["id"].as_str().unwrap());
    let live_deal = s
        .req(Method::GET, &deal_path)
        .key(&live)
        .send()
        .await
        .ok(200)
        .clone();
    assert_eq!(live_deal["owner_id"], Value::Null);
    let untouched = s
        .get(&format!("/contacts/{}", kept["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (
            untouched["owner_id"].as_str(),
            untouched["version"].as_i64()
        ),
        (Some(omar.as_str()), Some(1))
    );

    // The deleted user can no longer be named.
    s.patch(&path, json!({"owner_id": kate}))
        .await
        .problem(422, "invalid_reference");
}

crate::on_both_stores!(
    served_by crate::imports::spawn;
    owners_are_written_filtered_and_checked,
    deleting_a_user_leaves_their_records_without_an_owner,
);
