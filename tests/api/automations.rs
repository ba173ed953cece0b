//! Automations (spec, "Automation"; decisions §12): rules fire in the triggering write's
//! transaction, act silently, never chain, record every evaluation, and fail loudly at creation.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{spawn_with, Backend, Server};

/// Like `on_both_stores!`, on the pro plan (the free plan allows two active automations).
macro_rules! on_both_stores_pro {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::support::spawn_with(crate::support::Backend::Sqlite, &["--plan", "pro"]).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::support::spawn_with(crate::support::Backend::Postgres, &["--plan", "pro"]).await).await;
                }
            )*
        }
    };
}

async fn rule(s: &Server, body: Value) -> String {
    s.post("/automations", body).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn runs(s: &Server, id: &str) -> Vec<Value> {
    s.get(&format!("/automations/{id}/runs")).await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone()
}

async fn bodies(s: &Server, query: &str) -> Vec<String> {
    let list = s.get(&format!("/activities?{query}")).await.ok(200).clone();
    let mut out: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["body"].as_str().unwrap_or_default().to_owned())
        .collect();
    out.sort();
    out
}

fn note(body: &str) -> Value {
    json!({"type": "create_activity", "activity_type": "note", "body": body})
}

async fn events(s: &Server) -> Vec<Value> {
    s.get("/events").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone()
}

async fn each_trigger_event_fires_its_rules_with_placeholders_filled(s: Server) {
    let mut ids = Vec::new();
    for (event, text) in [
        ("contact.created", "created {{first_name}} {{company.name}}"),
        (
            "contact.updated",
            "updated {{first_name}} {{custom_fields.nope}}",
        ),
        ("deal.created", "deal {{title}} at {{value_cents}}"),
        ("deal.updated", "deal now {{title}}"),
        (
            "deal.stage_changed",
            "moved from {{previous_stage}} to {{stage}}",
        ),
    ] {
        ids.push(
            rule(
                &s,
                json!({"name": event, "trigger_event": event, "actions": [note(text)]}),
            )
            .await,
        );
    }
    let company = s
        .post("/companies", json!({"name": "Acme & Co"}))
        .await
        .ok(201)["id"]
        .clone();
    let c = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "company_id": company}),
        )
        .await
        .ok(201)
        .clone();
    let cid = c["id"].as_str().unwrap();
    s.patch(&format!("/contacts/{cid}"), json!({"first_name": "Grace"}))
        .await
        .ok(200);
    let d = s
        .post(
            "/deals",
            json!({"title": "Big", "value_cents": 500, "stage": "qualified"}),
        )
        .await
        .ok(201)
        .clone();
    let did = d["id"].as_str().unwrap();
    s.patch(
        &format!("/deals/{did}"),
        json!({"title": "Bigger", "stage": "won"}),
    )
    .await
    .ok(200);

    assert_eq!(
        bodies(&s, &format!("contact_id={cid}")).await,
        ["created Ada Acme & Co", "updated Grace "]
    );
    assert_eq!(
        bodies(&s, &format!("deal_id={did}")).await,
        [
            "deal Big at 500",
            "deal now Bigger",
            "moved from  to qualified",
            "moved from qualified to won"
        ],
        "previous_stage is empty on a create"
    );
    for (id, expected) in ids.iter().zip([1, 1, 1, 1, 2]) {
        let r = runs(&s, id).await;
        assert_eq!(r.len(), expected, "{r:#?}");
        for run in &r {
            assert_eq!(run["matched"], true);
            assert_eq!(run["object"], "automation_run");
            assert!(run["id"].as_str().unwrap().starts_with("run_"));
            assert!(run["event_id"].as_str().unwrap().starts_with("evt_"));
            assert_eq!(run["actions"][0]["status"], "succeeded", "{run:#}");
            assert!(run["actions"][0]["result"]["activity_id"]
                .as_str()
                .unwrap()
                .starts_with("act_"));
        }
    }
    let deal_runs = runs(&s, &ids[2]).await;
    assert_eq!(
        (
            deal_runs[0]["record_id"].as_str(),
            deal_runs[0]["event_type"].as_str()
        ),
        (Some(did), Some("deal.created"))
    );
}

async fn actions_write_silently_and_events_carry_the_record_as_committed(s: Server) {
    s.post("/fields", json!({"object": "deal", "key": "source"}))
        .await
        .ok(201);
    rule(
        &s,
        json!({"name": "route", "trigger_event": "deal.created", "conditions": [{"field": "value_cents", "op": "gte", "value": 1000}],
               "actions": [{"type": "move_deal_stage", "stage": "proposal"}, {"type": "set_field", "field": "source", "value": "auto-{{title}}"},
                           {"type": "set_field", "field": "currency", "value": "eur"}]}),
    )
    .await;
    let small = s
        .post("/deals", json!({"title": "Small", "value_cents": 10}))
        .await
        .ok(201)
        .clone();
    assert_eq!(
        (small["stage"].as_str(), small["version"].as_i64()),
        (Some("lead"), Some(1)),
        "conditions did not match"
    );
    let big = s
        .post("/deals", json!({"title": "Big", "value_cents": 5000}))
        .await
        .ok(201)
        .clone();
    assert_eq!(
        big["stage"], "proposal",
        "the reply is the record as committed: {big:#}"
    );
    assert_eq!(big["custom_fields"]["source"], "auto-Big");
    assert_eq!(big["currency"], "EUR");
    let fetched = s
        .get(&format!("/deals/{}", big["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(fetched, big);

    let evs = events(&s).await;
    let types: Vec<_> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["deal.created", "deal.created"],
        "the actions emitted no events (so no webhooks)"
    );
    assert_eq!(
        evs[0]["data"], big,
        "the event carries the record as it stands at commit"
    );
}

async fn two_rules_that_would_chain_do_not(s: Server) {
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    let first = rule(&s, json!({"name": "a", "trigger_event": "contact.created", "actions": [{"type": "set_field", "field": "tier", "value": "gold"}]})).await;
    let chained = rule(
        &s,
        json!({"name": "b", "trigger_event": "contact.updated", "conditions": [{"field": "tier", "op": "eq", "value": "gold"}],
               "actions": [{"type": "set_field", "field": "phone", "value": "+1 555"}]}),
    )
    .await;
    // Evaluated against the record as the client's write left it, before `a` acted.
    let sees_client_write =
        rule(&s, json!({"name": "c", "trigger_event": "contact.created", "conditions": [{"field": "tier", "op": "empty"}], "actions": [note("untiered")]})).await;
    let c = s
        .post("/contacts", json!({"email": "ada@example.com"}))
        .await
        .ok(201)
        .clone();
    assert_eq!(c["custom_fields"]["tier"], "gold");
    assert_eq!(
        c["phone"],
        Value::Null,
        "the rule on contact.updated never ran"
    );
    assert!(runs(&s, &chained).await.is_empty());
    assert_eq!(runs(&s, &first).await.len(), 1);
    assert_eq!(runs(&s, &sees_client_write).await[0]["matched"], true);
    assert_eq!(events(&s).await.len(), 1);
}

async fn a_failing_action_is_recorded_on_the_run_and_the_write_succeeds(s: Server) {
    let id = rule(
        &s,
        json!({"name": "flaky", "trigger_event": "deal.created",
               "actions": [{"type": "set_field", "field": "value_cents", "value": "lots"}, note("still here"),
                           {"type": "send_email", "subject": "Hi", "body": "<p>Hi</p>"}]}),
    )
    .await;
    let d = s
        .post("/deals", json!({"title": "No contact"}))
        .await
        .ok(201)
        .clone();
    assert_eq!(
        (d["value_cents"].clone(), d["version"].as_i64()),
        (Value::Null, Some(1))
    );
    let run = runs(&s, &id).await[0].clone();
    assert_eq!(run["matched"], true);
    assert_eq!(run["actions"][0]["status"], "failed");
    assert_eq!(
        run["actions"][0]["error"]["code"], "validation_failed",
        "{run:#}"
    );
    assert_eq!(run["actions"][1]["status"], "succeeded");
    assert_eq!(
        run["actions"][2]["error"]["code"], "no_recipient",
        "a deal without a primary contact: {run:#}"
    );
    assert_eq!(bodies(&s, "").await, ["still here"]);
}

async fn unmatched_evaluations_are_recorded_too(s: Server) {
    let id = rule(&s, json!({"name": "x", "trigger_event": "contact.created", "conditions": [{"field": "email", "op": "contains", "value": "@acme."}], "actions": [note("acme")]})).await;
    s.post("/contacts", json!({"email": "a@other.org"}))
        .await
        .ok(201);
    s.post("/contacts", json!({"email": "b@ACME.com"}))
        .await
        .ok(201);
    let r = runs(&s, &id).await;
    let matched: Vec<_> = r.iter().map(|r| r["matched"].as_bool().unwrap()).collect();
    assert_eq!(matched, [true, false], "newest first");
    assert_eq!(r[1]["actions"], json!([]));
}

async fn rule_creation_fails_loudly(s: Server) {
    let one = |trigger: &str, action: Value| json!({"name": "r", "trigger_event": trigger, "actions": [action]});
    let res = s
        .post("/automations", one("company.created", note("x")))
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(
        p["valid_options"],
        json!([
            "contact.created",
            "contact.updated",
            "deal.created",
            "deal.updated",
            "deal.stage_changed"
        ])
    );
    let res = s
        .post(
            "/automations",
            one("contact.created", json!({"type": "post_to_slack"})),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!([
            "create_activity",
            "set_field",
            "move_deal_stage",
            "send_email"
        ])
    );
    let res = s
        .post(
            "/automations",
            one(
                "contact.created",
                json!({"type": "move_deal_stage", "stage": "won"}),
            ),
        )
        .await;
    let p = res.problem(422, "unknown_value");
    assert!(
        !p["valid_options"]
            .as_array()
            .unwrap()
            .contains(&json!("move_deal_stage")),
        "deal-only on a contact trigger: {p:#}"
    );
    let res = s
        .post(
            "/automations",
            one(
                "deal.updated",
                json!({"type": "move_deal_stage", "stage": "closed"}),
            ),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["lead", "qualified", "proposal", "won", "lost"])
    );
    let res = s
        .post(
            "/automations",
            one(
                "deal.updated",
                json!({"type": "set_field", "field": "region", "value": "eu"}),
            ),
        )
        .await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "actions[0].field");
    let res = s.post("/automations", json!({"name": "r", "trigger_event": "contact.created", "conditions": [{"field": "email", "op": "like", "value": "x"}], "actions": [note("x")]})).await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"]
            .as_array()
            .unwrap()
            .len(),
        11
    );
    let res = s
        .post(
            "/automations",
            json!({"name": "r", "trigger_event": "contact.created", "actions": []}),
        )
        .await;
    res.problem(422, "validation_failed");
    let res = s.post("/automations", json!({"name": "r", "trigger_event": "contact.created", "actions": [note("x")], "colour": 1})).await;
    res.problem(422, "unknown_field");
    assert_eq!(
        s.get("/automations").await.ok(200)["data"],
        json!([]),
        "nothing was installed"
    );
}

async fn automations_are_read_listed_changed_and_deleted(s: Server) {
    let body =
        json!({"name": "welcome", "trigger_event": "contact.created", "actions": [note("hi")]});
    let created = s.post("/automations", body.clone()).await.ok(201).clone();
    assert!(created["id"].as_str().unwrap().starts_with("aut_"));
    assert_eq!(
        (
            created["enabled"].clone(),
            created["conditions"].clone(),
            created["version"].clone()
        ),
        (json!(true), json!([]), json!(1))
    );
    let again = s.post("/automations", body).await.ok(201).clone();
    assert_ne!(
        again["id"], created["id"],
        "no duplicate-name guard: a retry installs a second copy"
    );
    let id = created["id"].as_str().unwrap();
    assert_eq!(s.get(&format!("/automations/{id}")).await.ok(200), &created);
    let list = s.get("/automations").await.ok(200).clone();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);
    assert_eq!(list["data"][0]["id"], again["id"], "newest first");

    let paused = s
        .patch(
            &format!("/automations/{id}"),
            json!({"enabled": false, "name": "welcome v2"}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (
            paused["enabled"].clone(),
            paused["name"].clone(),
            paused["version"].clone()
        ),
        (json!(false), json!("welcome v2"), json!(2))
    );
    s.patch(
        &format!("/automations/{id}"),
        json!({"actions": [{"type": "bogus"}]}),
    )
    .await
    .problem(422, "unknown_value");
    s.post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201);
    assert!(
        runs(&s, id).await.is_empty(),
        "a disabled rule does not run"
    );

    let deleted = s
        .delete(&format!("/automations/{id}"))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        deleted,
        json!({"id": id, "object": "automation", "deleted": true})
    );
    s.get(&format!("/automations/{id}"))
        .await
        .problem(404, "not_found");
    s.get(&format!("/automations/{id}/runs"))
        .await
        .problem(404, "not_found");
    s.delete(&format!("/automations/{id}"))
        .await
        .problem(404, "not_found");
    s.get("/automations/aut_nope")
        .await
        .problem(404, "not_found");
    let other_mode = s
        .req(
            Method::GET,
            &format!("/automations/{}", again["id"].as_str().unwrap()),
        )
        .key(&s.keys.live)
        .send()
        .await;
    other_mode.problem(404, "not_found");
}

async fn batch_writes_fire_no_automations(s: Server) {
    let id = rule(
        &s,
        json!({"name": "x", "trigger_event": "contact.created", "actions": [note("from batch?")]}),
    )
    .await;
    let res = s.post("/batch", json!({"operations": [{"op": "create", "object": "contact", "data": {"first_name": "Ada"}}]})).await;
    assert_eq!(res.ok(200)["succeeded"], 1);
    assert!(runs(&s, &id).await.is_empty());
    assert!(bodies(&s, "").await.is_empty());
}

/// Once this process knows that nothing reacts to a contact's creation, a create is one atomic
/// write of the contact and its event (docs/decisions.md, "one statement"). What it learns later
/// (a rule, a sequence) must reach the very next create, and the one-statement create must answer
/// as any other: its event, a missing company, a taken email.
async fn creates_written_in_one_statement_still_see_new_rules_and_sequences(s: Server) {
    let ada = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "email": "ada@example.com"}),
        )
        .await
        .ok(201)
        .clone();
    let grace = s
        .post("/contacts", json!({"first_name": "Grace"}))
        .await
        .ok(201)
        .clone();
    let evs = events(&s).await;
    assert_eq!(evs.len(), 2);
    assert_eq!(
        (evs[0]["type"].as_str(), &evs[0]["data"]),
        (Some("contact.created"), &grace),
        "{evs:#?}"
    );
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "X", "company_id": "cmp_00000000000000000000000000"}),
        )
        .await;
    assert_eq!(res.problem(422, "invalid_reference")["field"], "company_id");
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada 2", "email": "ada@example.com"}),
        )
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], ada["id"]);
    assert_eq!(
        events(&s).await.len(),
        2,
        "a refused create writes no event"
    );

    // A new rule empties the cache: the first create after it loads the rule, the second finds
    // it cached. Both fire it.
    let id = rule(&s, json!({"name": "welcome", "trigger_event": "contact.created", "actions": [note("hello {{first_name}}")]})).await;
    s.post("/contacts", json!({"first_name": "Linus"}))
        .await
        .ok(201);
    s.post("/contacts", json!({"first_name": "Ken"}))
        .await
        .ok(201);
    assert_eq!(bodies(&s, "").await, ["hello Ken", "hello Linus"]);
    assert_eq!(runs(&s, &id).await.len(), 2);
    s.delete(&format!("/automations/{id}")).await.ok(200);

    let seq = s
        .post("/sequences", json!({"name": "Welcome", "trigger": {"event": "contact.created"}, "steps": [{"wait_seconds": 3600, "subject": "s", "body": "b"}]}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut joined: Vec<Value> = Vec::new();
    for name in ["barbara", "margaret"] {
        joined.push(
            s.post(
                "/contacts",
                json!({"first_name": name, "email": format!("{name}@example.com")}),
            )
            .await
            .ok(201)["id"]
                .clone(),
        );
    }
    let enrolled = s
        .get(&format!("/sequences/{seq}/enrollments"))
        .await
        .ok(200)["data"]
        .as_array()
        .unwrap()
        .clone();
    let mut enrolled: Vec<Value> = enrolled.iter().map(|e| e["contact_id"].clone()).collect();
    enrolled.reverse();
    assert_eq!(enrolled, joined, "newest first, both enrolled");
}

on_both_stores_pro!(
    creates_written_in_one_statement_still_see_new_rules_and_sequences,
    each_trigger_event_fires_its_rules_with_placeholders_filled,
    actions_write_silently_and_events_carry_the_record_as_committed,
    two_rules_that_would_chain_do_not,
    a_failing_action_is_recorded_on_the_run_and_the_write_succeeds,
    unmatched_evaluations_are_recorded_too,
    rule_creation_fails_loudly,
    automations_are_read_listed_changed_and_deleted,
    batch_writes_fire_no_automations,
);

mod plan_caps {
    use super::*;

    /// The free plan allows two active automations per mode: the third is refused in test and in live
    /// mode separately; disabled rules do not count, and enabling one checks the cap.
    async fn the_third_active_automation_on_free_is_refused_per_mode(backend: Backend) {
        let s = spawn_with(backend, &["--plan", "free"]).await;
        let body = json!({"name": "r", "trigger_event": "contact.created", "actions": [note("x")]});
        for key in [s.keys.test.clone(), s.keys.live.clone()] {
            let post = |b: Value| {
                let key = key.clone();
                let s = &s;
                async move {
                    s.req(Method::POST, "/automations")
                        .key(&key)
                        .json(&b)
                        .send()
                        .await
                }
            };
            post(body.clone()).await.ok(201);
            let second = post(body.clone()).await.ok(201).clone();
            let p = post(body.clone()).await.problem(403, "plan_limit").clone();
            assert_eq!(
                (p["plan"].clone(), p["limit"].clone()),
                (json!("free"), json!(2)),
                "{p:#}"
            );
            let mut disabled = body.clone();
            disabled["enabled"] = json!(false);
            let off = post(disabled).await.ok(201).clone();
            let path = format!("/automations/{}", off["id"].as_str().unwrap());
            s.req(Method::PATCH, &path)
                .key(&key)
                .json(&json!({"enabled": true}))
                .send()
                .await
                .problem(403, "plan_limit");
            s.req(
                Method::DELETE,
                &format!("/automations/{}", second["id"].as_str().unwrap()),
            )
            .key(&key)
            .send()
            .await
            .ok(200);
            s.req(Method::PATCH, &path)
                .key(&key)
                .json(&json!({"enabled": true}))
                .send()
                .await
                .ok(200);
        }
        let usage = s.get("/usage").await.ok(200).clone();
        assert_eq!(usage["automations"], json!({"active": 2, "limit": 2}));
    }

    crate::on_both_backends!(the_third_active_automation_on_free_is_refused_per_mode);
}
