//! Sequences (spec, "Sequence"; decisions §13, §17): enrollment by trigger and directly, steps
//! sent in order by the scheduler (visible in `GET /emails`), exits on `exit_when`, source
//! deletion, disable and delete, the preview, the plan cap, and exactly-once sends across two
//! server processes on one Postgres database.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::{json, Value};

use crate::support::{create_workspace, fresh_database, start, Backend, Server};

/// A server whose scheduler polls every 100 ms, on `plan`.
async fn serve(backend: Backend, plan: &str) -> Server {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(
        &database_url,
        &["--plan", plan, "--rate-limit-per-minute", "100000"],
    );
    let s = start(
        backend,
        database_url,
        keys,
        &[("CRM_SEQUENCE_POLL_MS", "100")],
    );
    for v in ["lead", "customer", "churned"] {
        s.post("/enums", json!({"group": "contact.type", "value": v}))
            .await
            .ok(201);
    }
    s
}

/// Declares each `async fn name(s: Server)` as a test per store, on the pro plan.
macro_rules! on_both_stores_pro {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::serve(crate::support::Backend::Sqlite, "pro").await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::serve(crate::support::Backend::Postgres, "pro").await).await;
                }
            )*
        }
    };
}

fn data(v: &Value) -> Vec<Value> {
    v["data"].as_array().unwrap().clone()
}

async fn contact(s: &Server, body: Value) -> String {
    s.post("/contacts", body).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn sequence(s: &Server, body: Value) -> String {
    s.post("/sequences", body).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn enrollments(s: &Server, seq: &str) -> Vec<Value> {
    data(
        s.get(&format!("/sequences/{seq}/enrollments?limit=100"))
            .await
            .ok(200),
    )
}

/// Emails to a contact, oldest first.
async fn emails_of(s: &Server, contact: &str) -> Vec<Value> {
    let mut list = data(
        s.get(&format!("/emails?contact_id={contact}&limit=100"))
            .await
            .ok(200),
    );
    list.reverse();
    list
}

/// Waits (with a deadline) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Milliseconds since the epoch of a `YYYY-MM-DDTHH:MM:SS.mmmZ` timestamp.
fn millis(ts: &Value) -> i64 {
    let s = ts.as_str().unwrap();
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let frac = if s.len() > 20 { n(20..23) } else { 0 };
    ((days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) * 1000) + frac
}

fn steps_every(waits: &[i64], subject: &str) -> Value {
    Value::Array(
        waits
            .iter()
            .enumerate()
            .map(|(i, w)| json!({"wait_seconds": w, "subject": format!("{subject} {} {{{{first_name}}}}", i + 1), "body": "<p>Hi {{first_name}} {{last_name}}</p>"}))
            .collect(),
    )
}

async fn steps_are_sent_in_order_at_their_times_then_the_enrollment_completes(s: Server) {
    let seq = sequence(
        &s,
        json!({"name": "Welcome", "channel": "email", "trigger": {"event": "contact.created", "filter": [{"field": "type", "op": "eq", "value": "lead"}]},
               "steps": steps_every(&[0, 1, 1], "Step")}),
    )
    .await;
    let ada = contact(
        &s,
        json!({"first_name": "Ada", "last_name": "<L&co>", "email": "ada@example.com", "type": "lead"}),
    )
    .await;
    let other = contact(
        &s,
        json!({"first_name": "Cy", "email": "cy@example.com", "type": "customer"}),
    )
    .await;
    let list = enrollments(&s, &seq).await;
    assert_eq!(list.len(), 1, "the filter keeps customers out: {list:?}");
    let e = &list[0];
    assert_eq!(
        (
            e["contact_id"].as_str(),
            e["state"].as_str(),
            e["source"]["object"].as_str()
        ),
        (Some(ada.as_str()), Some("active"), Some("contact"))
    );
    eventually("three emails", || async {
        emails_of(&s, &ada).await.len() == 3
    })
    .await;
    let emails = emails_of(&s, &ada).await;
    let enrolled_at = millis(&e["enrolled_at"]);
    let mut offset = 0;
    for (i, email) in emails.iter().enumerate() {
        assert_eq!(email["status"], "simulated", "test mode never delivers");
        assert_eq!(email["to"], "ada@example.com");
        assert_eq!(
            email["subject"],
            format!("Step {} Ada", i + 1),
            "in order, merge tags filled"
        );
        assert_eq!(
            email["html"], "<p>Hi Ada &lt;L&amp;co&gt;</p>",
            "values are HTML-escaped"
        );
        assert_eq!(email["text"], "Hi Ada <L&co>", "the text part is derived");
        assert_eq!(
            email["source"],
            json!({"type": "sequence", "sequence_id": seq, "step": i + 1})
        );
        offset += [0, 1000, 1000][i];
        assert!(
            millis(&email["created_at"]) >= enrolled_at + offset,
            "step {} sent before its time: {email}",
            i + 1
        );
    }
    eventually("completion", || async {
        enrollments(&s, &seq).await[0]["state"] == "completed"
    })
    .await;
    assert!(emails_of(&s, &other).await.is_empty());
    // Each send is also an email activity on the contact.
    let acts = data(
        s.get(&format!("/activities?contact_id={ada}&type=email"))
            .await
            .ok(200),
    );
    assert_eq!(acts.len(), 3);
}

async fn a_second_trigger_does_not_enroll_again(s: Server) {
    let seq = sequence(
        &s,
        json!({"name": "Nudge", "trigger": {"event": "contact.updated"}, "steps": [{"wait_days": 1, "subject": "s", "body": "b"}]}),
    )
    .await;
    let ada = contact(&s, json!({"first_name": "Ada", "email": "ada@example.com"})).await;
    assert!(
        enrollments(&s, &seq).await.is_empty(),
        "contact.created is not this trigger"
    );
    s.patch(&format!("/contacts/{ada}"), json!({"last_name": "L"}))
        .await
        .ok(200);
    s.patch(&format!("/contacts/{ada}"), json!({"last_name": "M"}))
        .await
        .ok(200);
    let list = enrollments(&s, &seq).await;
    assert_eq!(list.len(), 1);
    // Even after it ended, the contact is not enrolled again.
    let enr = list[0]["id"].as_str().unwrap();
    s.delete(&format!("/sequences/{seq}/enrollments/{enr}"))
        .await
        .ok(200);
    s.patch(&format!("/contacts/{ada}"), json!({"last_name": "N"}))
        .await
        .ok(200);
    let list = enrollments(&s, &seq).await;
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0]["state"].as_str(), list[0]["exit_reason"].as_str()),
        (Some("exited"), Some("unenrolled"))
    );
}

async fn exit_conditions_end_enrollments_between_steps_whatever_wrote_the_change(s: Server) {
    let seq = sequence(
        &s,
        json!({"name": "Trial", "trigger": {"event": "contact.created"}, "exit_when": [{"field": "type", "op": "in", "value": ["customer", "churned"]}],
               "steps": steps_every(&[0, 3], "Trial")}),
    )
    .await;
    let ada = contact(
        &s,
        json!({"first_name": "Ada", "email": "ada@example.com", "type": "lead"}),
    )
    .await;
    let bob = contact(
        &s,
        json!({"first_name": "Bob", "email": "bob@example.com", "type": "lead"}),
    )
    .await;
    let already = contact(
        &s,
        json!({"first_name": "Cy", "email": "cy@example.com", "type": "customer"}),
    )
    .await;
    eventually("the first steps", || async {
        emails_of(&s, &ada).await.len() == 1 && emails_of(&s, &bob).await.len() == 1
    })
    .await;
    // An API write and a batch write (which emits no events) both end the enrollment at once.
    s.patch(&format!("/contacts/{ada}"), json!({"type": "customer"}))
        .await
        .ok(200);
    let batch = json!({"operations": [{"op": "update", "object": "contact", "id": bob, "data": {"type": "churned"}}]});
    s.post("/batch", batch).await.ok(200);
    // An automation action (which emits no events) ends it too.
    let rule = json!({"name": "Convert", "trigger_event": "contact.updated", "conditions": [{"field": "last_name", "op": "eq", "value": "Won"}],
                      "actions": [{"type": "set_field", "field": "type", "value": "customer"}]});
    s.post("/automations", rule).await.ok(201);
    let dee = contact(
        &s,
        json!({"first_name": "Dee", "email": "dee@example.com", "type": "lead"}),
    )
    .await;
    s.patch(&format!("/contacts/{dee}"), json!({"last_name": "Won"}))
        .await
        .ok(200);
    let list = enrollments(&s, &seq).await;
    assert_eq!(
        list.len(),
        3,
        "a contact already meeting exit_when is not enrolled: {list:?}"
    );
    for e in &list {
        assert_eq!(
            (e["state"].as_str(), e["exit_reason"].as_str()),
            (Some("exited"), Some("exit_condition")),
            "{e}"
        );
        assert_eq!(e["next_send_at"], Value::Null);
    }
    assert!(emails_of(&s, &already).await.is_empty());
    // Past the second step's time, nothing more was sent.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(emails_of(&s, &ada).await.len(), 1);
    assert_eq!(emails_of(&s, &bob).await.len(), 1);
}

async fn deleting_the_source_disabling_or_deleting_the_sequence_end_enrollments(s: Server) {
    let steps = json!([{"wait_days": 1, "subject": "s", "body": "b"}]);
    let seq = sequence(&s, json!({"name": "Manual", "steps": steps})).await;
    let a = contact(&s, json!({"email": "a@example.com"})).await;
    let b = contact(&s, json!({"email": "b@example.com"})).await;
    let first = s
        .post(
            &format!("/sequences/{seq}/enroll"),
            json!({"contact_id": a}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(first["state"], "active");
    let again = s
        .post(
            &format!("/sequences/{seq}/enroll"),
            json!({"contact_id": a}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(
        again["id"], first["id"],
        "at most once per sequence and contact"
    );
    s.post(
        &format!("/sequences/{seq}/enroll"),
        json!({"contact_id": b}),
    )
    .await
    .ok(201);
    s.delete(&format!("/contacts/{a}")).await.ok(200);
    s.patch(&format!("/sequences/{seq}"), json!({"enabled": false}))
        .await
        .ok(200);
    let reasons: HashMap<String, String> = enrollments(&s, &seq)
        .await
        .iter()
        .map(|e| {
            (
                e["contact_id"].as_str().unwrap().to_owned(),
                e["exit_reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(reasons[&a], "source_deleted");
    assert_eq!(reasons[&b], "sequence_disabled");
    s.post(
        &format!("/sequences/{seq}/enroll"),
        json!({"contact_id": b}),
    )
    .await
    .problem(409, "conflict");

    let other = sequence(&s, json!({"name": "Other", "steps": steps})).await;
    let c = contact(&s, json!({"email": "c@example.com"})).await;
    s.post(
        &format!("/sequences/{other}/enroll"),
        json!({"contact_id": c}),
    )
    .await
    .ok(201);
    let gone = s
        .delete(&format!("/sequences/{other}"))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        gone,
        json!({"id": other, "object": "sequence", "deleted": true})
    );
    s.get(&format!("/sequences/{other}/enrollments"))
        .await
        .problem(404, "not_found");
    s.post(
        &format!("/sequences/{other}/enroll"),
        json!({"contact_id": c}),
    )
    .await
    .problem(404, "not_found");
    // Bad direct enrollments.
    s.post(&format!("/sequences/{seq}/enroll"), json!({}))
        .await
        .problem(422, "validation_failed");
}

async fn the_preview_shows_the_cumulative_schedule_and_would_enroll_now_without_side_effects(
    s: Server,
) {
    for (i, t) in ["lead", "lead", "customer"].iter().enumerate() {
        contact(
            &s,
            json!({"first_name": format!("P{i}"), "email": format!("p{i}@example.com"), "type": t}),
        )
        .await;
    }
    contact(&s, json!({"first_name": "NoMail", "type": "lead"})).await;
    let steps: Vec<Value> = [0, 3, 4, 7]
        .iter()
        .map(|d| json!({"wait_days": d, "subject": format!("Day {d} {{{{favourite_color}}}}"), "body": "Hi {{first_name}}"}))
        .collect();
    let seq = sequence(
        &s,
        json!({"name": "Drip", "trigger": {"event": "contact.created", "filter": [{"field": "type", "op": "eq", "value": "lead"}]}, "steps": steps}),
    )
    .await;
    let preview = s
        .get(&format!("/sequences/{seq}/preview"))
        .await
        .ok(200)
        .clone();
    let offsets: Vec<i64> = preview["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["send_offset_seconds"].as_i64().unwrap() / 86_400)
        .collect();
    assert_eq!(offsets, [0, 3, 7, 14]);
    assert_eq!(
        preview["schedule"][1],
        json!({"step": 2, "wait_seconds": 3 * 86_400, "send_offset_seconds": 3 * 86_400, "subject": "Day 3 {{favourite_color}}"})
    );
    assert_eq!(
        preview["would_enroll_now"], 2,
        "two leads with an email: {preview}"
    );
    let warnings = preview["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].as_str().unwrap().contains("favourite_color"));
    assert!(enrollments(&s, &seq).await.is_empty(), "a dry run");
    // enroll_existing enrolls the same records at creation.
    s.delete(&format!("/sequences/{seq}")).await.ok(200);
    let seq = s
        .post(
            "/sequences",
            json!({"name": "Drip", "enroll_existing": true, "trigger": {"event": "contact.created", "filter": [{"field": "type", "op": "eq", "value": "lead"}]}, "steps": steps}),
        )
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(enrollments(&s, &seq).await.len(), 2);
    assert_eq!(
        s.get(&format!("/sequences/{seq}/preview")).await.ok(200)["would_enroll_now"],
        0,
        "already enrolled"
    );
}

async fn batch_writes_do_not_enroll(s: Server) {
    let seq = sequence(
        &s,
        json!({"name": "Welcome", "trigger": {"event": "contact.created"}, "steps": [{"wait_seconds": 0, "subject": "s", "body": "b"}]}),
    )
    .await;
    let batch = json!({"operations": [{"op": "create", "object": "contact", "data": {"first_name": "Quiet", "email": "quiet@example.com"}}]});
    s.post("/batch", batch).await.ok(200);
    assert!(enrollments(&s, &seq).await.is_empty());
    contact(
        &s,
        json!({"first_name": "Loud", "email": "loud@example.com"}),
    )
    .await;
    assert_eq!(enrollments(&s, &seq).await.len(), 1);
}

async fn deal_triggers_send_to_the_primary_contact_and_deals_without_one_do_not_enroll(s: Server) {
    let seq = sequence(
        &s,
        json!({"name": "Deal", "trigger": {"event": "deal.created"}, "exit_when": [{"field": "stage_type", "op": "in", "value": ["won", "lost"]}],
               "steps": [{"wait_seconds": 0, "subject": "About {{first_name}}", "body": "b"}, {"wait_days": 1, "subject": "Later", "body": "b"}]}),
    )
    .await;
    let ada = contact(&s, json!({"first_name": "Ada", "email": "ada@example.com"})).await;
    s.post("/deals", json!({"title": "Orphan"})).await.ok(201);
    let deal = s
        .post("/deals", json!({"title": "Big", "primary_contact_id": ada}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let list = enrollments(&s, &seq).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["source"], json!({"object": "deal", "id": deal}));
    assert_eq!(list[0]["contact_id"], ada.as_str());
    eventually("the first email", || async {
        emails_of(&s, &ada).await.len() == 1
    })
    .await;
    let email = &emails_of(&s, &ada).await[0];
    assert_eq!(
        (email["subject"].as_str(), email["deal_id"].as_str()),
        (Some("About Ada"), Some(deal.as_str()))
    );
    s.patch(&format!("/deals/{deal}"), json!({"stage": "won"}))
        .await
        .ok(200);
    assert_eq!(
        enrollments(&s, &seq).await[0]["exit_reason"],
        "exit_condition"
    );
}

async fn definitions_fail_loudly(s: Server) {
    let steps = json!([{"wait_days": 0, "subject": "s", "body": "b"}]);
    let res = s
        .post(
            "/sequences",
            json!({"name": "x", "trigger": {"event": "company.created"}, "steps": steps}),
        )
        .await;
    assert_eq!(res.problem(422, "unknown_value")["field"], "trigger.event");
    let res = s
        .post(
            "/sequences",
            json!({"name": "x", "exit_when": [{"field": "nope", "op": "eq", "value": 1}], "steps": steps}),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_field")["field"],
        "exit_when[0].field"
    );
    let res = s
        .post(
            "/sequences",
            json!({"name": "x", "steps": [{"wait_days": 1, "wait_hours": 1, "subject": "s", "body": "b"}]}),
        )
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "steps[0]");
    let res = s
        .post(
            "/sequences",
            json!({"name": "x", "steps": [{"wait_days": 1, "template_id": "tpl_nope"}]}),
        )
        .await;
    res.problem(422, "invalid_reference");
    // Live mode needs an email connection.
    let res = s
        .req(reqwest::Method::POST, "/sequences")
        .key(&s.keys.live)
        .json(&json!({"name": "x", "steps": steps}))
        .send()
        .await;
    assert!(res.problem(422, "validation_failed")["detail"]
        .as_str()
        .unwrap()
        .contains("/connections"));
    s.get("/sequences/seq_nope").await.problem(404, "not_found");
}

/// A step whose template was deleted after the sequence was made cannot be sent: it is recorded as
/// a `failed` email naming the reason (no activity), never silently dropped, and the next step
/// still goes out.
async fn a_step_whose_template_was_deleted_is_recorded_as_a_failed_email(s: Server) {
    let tpl = s
        .post(
            "/templates",
            json!({"name": "T", "subject": "From template", "body": "<p>T</p>"}),
        )
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let seq = sequence(
        &s,
        json!({"name": "Tpl", "steps": [{"wait_seconds": 1, "template_id": tpl}, {"wait_seconds": 1, "subject": "Second", "body": "<p>2</p>"}]}),
    )
    .await;
    s.delete(&format!("/templates/{tpl}")).await.ok(200);
    let ada = contact(&s, json!({"first_name": "Ada", "email": "ada@example.com"})).await;
    s.post(
        &format!("/sequences/{seq}/enroll"),
        json!({"contact_id": ada}),
    )
    .await
    .ok(201);
    eventually("two emails", || async {
        emails_of(&s, &ada).await.len() == 2
    })
    .await;
    let emails = emails_of(&s, &ada).await;
    assert_eq!(emails[0]["status"], "failed", "{emails:?}");
    assert!(
        emails[0]["error"].as_str().unwrap().contains(&tpl),
        "the error names the template: {}",
        emails[0]
    );
    assert_eq!(emails[0]["source"]["step"], 1);
    assert_eq!(emails[1]["status"], "simulated");
    assert_eq!(emails[1]["subject"], "Second");
    let acts = data(
        s.get(&format!("/activities?contact_id={ada}&type=email"))
            .await
            .ok(200),
    );
    assert_eq!(acts.len(), 1, "only the email that went out is an activity");
}

on_both_stores_pro!(
    a_step_whose_template_was_deleted_is_recorded_as_a_failed_email,
    steps_are_sent_in_order_at_their_times_then_the_enrollment_completes,
    a_second_trigger_does_not_enroll_again,
    exit_conditions_end_enrollments_between_steps_whatever_wrote_the_change,
    deleting_the_source_disabling_or_deleting_the_sequence_end_enrollments,
    the_preview_shows_the_cumulative_schedule_and_would_enroll_now_without_side_effects,
    batch_writes_do_not_enroll,
    deal_triggers_send_to_the_primary_contact_and_deals_without_one_do_not_enroll,
    definitions_fail_loudly,
);

/// The free plan allows one sequence per mode: the second is refused, in test and in live mode
/// separately.
mod plan_cap {
    use super::*;

    async fn the_second_sequence_on_free_is_refused_per_mode(backend: Backend) {
        let s = super::serve(backend, "free").await;
        let steps = json!([{"wait_days": 0, "subject": "s", "body": "b"}]);
        let live = s.keys.live.clone();
        s.req(reqwest::Method::POST, "/connections")
            .key(&live)
            .json(&json!({"channel": "email", "provider": "resend", "api_key": "re_123456", "from": "hi@acme.io"}))
            .send()
            .await
            .ok(201);
        for key in [s.keys.test.clone(), live] {
            let create = || {
                s.req(reqwest::Method::POST, "/sequences")
                    .key(&key)
                    .json(&json!({"name": "x", "enabled": false, "steps": steps}))
            };
            create().send().await.ok(201);
            create().send().await.problem(403, "plan_limit");
        }
    }

    crate::on_both_backends!(the_second_sequence_on_free_is_refused_per_mode);
}

/// A workspace whose sends fail does not hold up the others: its part of the round is rolled back
/// and its steps are held back for `CRM_SEQUENCE_HOLD_BACK_MS`, then tried again, while the
/// other workspace's step in the same round goes out. The failure is a trigger refusing the
/// first workspace's emails (a statement failing mid-round, which on Postgres aborts the
/// transaction unless the part was in a savepoint).
mod a_failing_workspace {
    use reqwest::Method;

    use super::*;

    /// Adds (or drops) a trigger that refuses every email of `workspace`.
    async fn poison(backend: Backend, database_url: &str, workspace: &str, on: bool) {
        use sqlx::Connection;
        let statements: Vec<String> = match (backend, on) {
            (Backend::Sqlite, true) => vec![format!(
                "CREATE TRIGGER poison BEFORE INSERT ON emails WHEN NEW.workspace_id = '{workspace}' BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
            )],
            (Backend::Sqlite, false) => vec!["DROP TRIGGER poison".to_owned()],
            (Backend::Postgres, true) => vec![
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'poisoned'; END $$".to_owned(),
                format!("CREATE TRIGGER poison BEFORE INSERT ON emails FOR EACH ROW WHEN (NEW.workspace_id = '{workspace}') EXECUTE FUNCTION poison()"),
            ],
            (Backend::Postgres, false) => vec!["DROP TRIGGER poison ON emails".to_owned()],
        };
        match backend {
            Backend::Sqlite => {
                use std::str::FromStr;
                let options = sqlx::sqlite::SqliteConnectOptions::from_str(database_url)
                    .unwrap()
                    .busy_timeout(Duration::from_secs(10));
                let mut conn = sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                for sql in &statements {
                    sqlx::query(sql).execute(&mut conn).await.unwrap();
                }
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(database_url).await.unwrap();
                for sql in &statements {
                    sqlx::query(sql).execute(&mut conn).await.unwrap();
                }
            }
        }
    }

    async fn emails(s: &Server, key: &str) -> Vec<Value> {
        data(
            s.req(Method::GET, "/emails?limit=100")
                .key(key)
                .send()
                .await
                .ok(200),
        )
    }

    async fn is_held_back_then_retried_and_the_others_are_sent(backend: Backend) {
        let database_url = fresh_database(backend).await;
        let a = create_workspace(&database_url, &["--plan", "pro"]);
        let b = create_workspace(&database_url, &["--plan", "pro"]);
        // Enrolled while the scheduler is idle, so that one round finds both steps due.
        {
            let setup = start(
                backend,
                database_url.clone(),
                a.clone(),
                &[("CRM_SEQUENCE_POLL_MS", "3600000")],
            );
            for key in [&a.test, &b.test] {
                let body = json!({"name": "Welcome", "trigger": {"event": "contact.created"}, "steps": steps_every(&[0], "Hello")});
                setup
                    .req(Method::POST, "/sequences")
                    .key(key)
                    .json(&body)
                    .send()
                    .await
                    .ok(201);
                let contact = json!({"first_name": "Ann", "email": "ann@example.com"});
                setup
                    .req(Method::POST, "/contacts")
                    .key(key)
                    .json(&contact)
                    .send()
                    .await
                    .ok(201);
            }
        }
        poison(backend, &database_url, &a.workspace_id, true).await;
        // One loop: with two, one round can lock the first workspace's step while the other's
        // skips it and takes the second's alone, and the test would pass without the savepoints.
        let env = [
            ("CRM_SEQUENCE_POLL_MS", "20"),
            ("CRM_SEQUENCE_WORKERS", "1"),
            ("CRM_SEQUENCE_HOLD_BACK_MS", "2000"),
        ];
        let s = start(backend, database_url.clone(), a.clone(), &env);
        eventually("the other workspace's step", || async {
            emails(&s, &b.test).await.len() == 1
        })
        .await;
        assert!(
            emails(&s, &a.test).await.is_empty(),
            "nothing of the failing workspace is written"
        );
        poison(backend, &database_url, &a.workspace_id, false).await;
        eventually("the held-back step, once the failure is gone", || async {
            emails(&s, &a.test).await.len() == 1
        })
        .await;
        assert_eq!(emails(&s, &b.test).await.len(), 1, "sent once");
    }

    crate::on_both_backends!(is_held_back_then_retried_and_the_others_are_sent);
}

/// Two server processes on one Postgres database, 1,000 enrollments with two due steps each:
/// every step is sent exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_send_every_step_exactly_once() {
    let backend = Backend::Postgres;
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(
        &database_url,
        &["--plan", "scale", "--rate-limit-per-minute", "1000000"],
    );
    let env = [("CRM_SEQUENCE_POLL_MS", "20"), ("CRM_SEQUENCE_BATCH", "50")];
    let a = start(backend, database_url.clone(), keys.clone(), &env);
    let b = start(backend, database_url, keys, &env);
    for chunk in 0..5 {
        let ops: Vec<Value> = (0..100)
            .map(|i| json!({"op": "create", "object": "contact", "data": {"first_name": "C", "email": format!("c{chunk}-{i}@example.com")}}))
            .collect();
        a.post("/batch", json!({"operations": ops})).await.ok(200);
    }
    let steps = json!([{"wait_seconds": 0, "subject": "One", "body": "b"}, {"wait_seconds": 1, "subject": "Two", "body": "b"}]);
    let mut seqs = Vec::new();
    for name in ["A", "B"] {
        let body = json!({"name": name, "enroll_existing": true, "trigger": {"event": "contact.created"}, "steps": steps});
        seqs.push(
            b.post("/sequences", body).await.ok(201)["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut total = 0;
    for seq in &seqs {
        let mut cursor = String::new();
        loop {
            let page = a
                .get(&format!("/sequences/{seq}/enrollments?limit=100{cursor}"))
                .await
                .ok(200)
                .clone();
            total += page["data"].as_array().unwrap().len();
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => break,
            }
        }
    }
    assert_eq!(total, 1000);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut counts: HashMap<(String, String, u64), u32> = HashMap::new();
    loop {
        counts.clear();
        let mut cursor = String::new();
        loop {
            let page = a
                .get(&format!("/emails?limit=100{cursor}"))
                .await
                .ok(200)
                .clone();
            for e in page["data"].as_array().unwrap() {
                let key = (
                    e["source"]["sequence_id"].as_str().unwrap().to_owned(),
                    e["to"].as_str().unwrap().to_owned(),
                    e["source"]["step"].as_u64().unwrap(),
                );
                *counts.entry(key).or_default() += 1;
            }
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => break,
            }
        }
        if counts.len() == 2000 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(counts.len(), 2000, "every (enrollment, step) sent");
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    drop(b);
}
