//! Contact creates grouped into shared transactions (`CRM_CREATE_SLOTS`, docs/operations.md).
//! With one slot and eighty creates at once, most are committed in groups; each must still
//! answer what it would have answered alone (created, refused as invalid, its company missing,
//! its email taken by a stored contact or by another create of its group), with the record as
//! committed (after the automation it triggers), its one event, and its idempotency record.

use std::collections::{HashMap, HashSet};

use futures::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{create_workspace, fresh_database, start, Backend, Server};

async fn serve(backend: Backend) -> Server {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(
        &database_url,
        &["--plan", "pro", "--rate-limit-per-minute", "100000"],
    );
    start(
        backend,
        database_url,
        keys,
        &[("CRM_CREATE_SLOTS", "1"), ("CRM_CREATE_GROUP_MAX", "16")],
    )
}

/// What a create of the mix should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Created,
    Invalid,
    NoSuchCompany,
    /// Its reference-typed custom field names no contact (such creates are inserted one by one).
    NoSuchReferrer,
    TakenByStored,
    /// One of two creates with one email: exactly one of each pair is created.
    Pair(usize),
}

/// The i-th create of the mix: what it should answer, its body, its idempotency key.
fn mix(i: usize, company: &str, held: &str) -> (Expect, Value, Option<String>) {
    let email =
        |e: String| json!({"first_name": format!("P{i}"), "email": e, "company_id": company});
    let key = Some(format!("key-{i}"));
    match i % 10 {
        0 => (
            Expect::Invalid,
            json!({"first_name": "x", "email": "not-an-email"}),
            None,
        ),
        1 => (
            Expect::NoSuchCompany,
            json!({"email": format!("p{i}@x.example"), "company_id": "cmp_01m8d7ksfnehpsjh9gfxk2gsng"}),
            None,
        ),
        2 => (
            Expect::TakenByStored,
            json!({"email": "held@x.example"}),
            None,
        ),
        3 => (
            Expect::Pair(i / 20),
            email(format!("pair{}@x.example", i / 20)),
            None,
        ),
        4 => (Expect::Created, email(format!("p{i}@x.example")), key),
        5 => (
            Expect::Created,
            json!({"email": format!("p{i}@x.example"), "company_id": company, "custom_fields": {"referrer": held}}),
            None,
        ),
        6 => (
            Expect::NoSuchReferrer,
            json!({"email": format!("p{i}@x.example"), "custom_fields": {"referrer": "con_00000000000000000000000000"}}),
            None,
        ),
        7 => (
            Expect::TakenByStored,
            json!({"email": "held@x.example"}),
            key,
        ),
        _ => (Expect::Created, email(format!("p{i}@x.example")), None),
    }
}

async fn grouped_creates_answer_as_each_would_alone(s: Server) {
    s.post("/automations", json!({"name": "tag", "trigger_event": "contact.created", "actions": [{"type": "set_field", "field": "phone", "value": "+1 555"}]}))
        .await
        .ok(201);
    s.post(
        "/fields",
        json!({"object": "contact", "key": "referrer", "data_type": "reference"}),
    )
    .await
    .ok(201);
    let company = s.post("/companies", json!({"name": "Acme"})).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let held = s
        .post("/contacts", json!({"email": "held@x.example"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let mix: Vec<_> = (0..80).map(|i| mix(i, &company, &held)).collect();
    let sends = mix.iter().map(|(_, body, key)| {
        let mut req = s.req(Method::POST, "/contacts").json(body);
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        req.send()
    });
    let answers = join_all(sends).await;

    let mut created: HashMap<String, Value> = HashMap::new();
    let mut pairs: HashMap<usize, Vec<u16>> = HashMap::new();
    for ((expect, body, _), res) in mix.iter().zip(&answers) {
        match expect {
            Expect::Created => {
                let c = res.ok(201);
                assert_eq!(c["email"], body["email"]);
                assert_eq!(c["company_id"], company.as_str());
                assert_eq!(
                    c["custom_fields"],
                    body.get("custom_fields").cloned().unwrap_or(json!({}))
                );
                created.insert(c["id"].as_str().unwrap().to_owned(), c.clone());
            }
            Expect::Invalid => {
                res.problem(422, "validation_failed");
            }
            Expect::NoSuchCompany => {
                assert_eq!(res.problem(422, "invalid_reference")["field"], "company_id");
            }
            Expect::NoSuchReferrer => {
                assert_eq!(
                    res.problem(422, "invalid_reference")["field"],
                    "custom_fields.referrer"
                );
            }
            Expect::TakenByStored => {
                assert_eq!(
                    res.problem(409, "conflict")["existing"]["id"],
                    held.as_str()
                );
            }
            Expect::Pair(n) => {
                pairs.entry(*n).or_default().push(res.status.as_u16());
                if res.status == 201 {
                    created.insert(
                        res.body["id"].as_str().unwrap().to_owned(),
                        res.body.clone(),
                    );
                } else {
                    let existing = res.problem(409, "conflict")["existing"].clone();
                    assert_eq!(existing["email"], body["email"]);
                    // The holder as committed, as a create alone would see it: after its automation.
                    assert_eq!(existing["phone"], "+1 555", "{existing}");
                }
            }
        }
    }
    for (n, mut statuses) in pairs {
        statuses.sort();
        assert_eq!(statuses, [201, 409], "pair {n}");
    }
    assert_eq!(
        created.len(),
        8 * 4 + 4,
        "created: the plain, keyed and referring ones and one of each pair"
    );
    // The reply is the record as committed: the automation's change included.
    for c in created.values() {
        assert_eq!(c["phone"], "+1 555", "{c}");
    }

    // Stored: every created contact, once, with one event each carrying the committed record.
    let listed = s.get("/contacts?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone();
    let mut ids: HashSet<String> = listed
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.remove(&held));
    assert_eq!(ids, created.keys().cloned().collect::<HashSet<_>>());
    let events = s
        .get("/events?type=contact.created&limit=100")
        .await
        .ok(200)["data"]
        .as_array()
        .unwrap()
        .clone();
    let mut evented: Vec<String> = events
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap().to_owned())
        .filter(|id| *id != held)
        .collect();
    evented.sort();
    let mut expected: Vec<String> = created.keys().cloned().collect();
    expected.sort();
    assert_eq!(evented, expected);
    for e in events.iter().filter(|e| e["data"]["id"] != held.as_str()) {
        assert_eq!(e["data"]["phone"], "+1 555", "{e}");
    }

    // The keyed creates replay their answer, a refusal included.
    for ((expect, body, key), res) in mix.iter().zip(&answers) {
        let Some(key) = key else { continue };
        let again = s
            .req(Method::POST, "/contacts")
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await;
        if *expect == Expect::Created {
            assert_eq!(again.header("idempotent-replayed"), Some("true"));
            assert_eq!(again.ok(201)["id"], res.body["id"]);
        } else {
            let replayed = again.problem(409, "conflict");
            assert_eq!(replayed["idempotent_replayed"], true, "{replayed}");
            assert_eq!(replayed["existing"]["id"], held.as_str());
        }
    }

    // Grouped they were: a group's creates share one timestamp, and with one slot creates alone
    // run one after another, each a whole transaction. Alone, nearly every create has a
    // timestamp of its own (also with many transactions at once, without grouping).
    let stamps: HashSet<&str> = created
        .values()
        .map(|c| c["created_at"].as_str().unwrap())
        .collect();
    assert!(
        stamps.len() * 2 <= created.len(),
        "{} timestamps for {} creates: too few grouped",
        stamps.len(),
        created.len()
    );
}

/// A group whose transaction fails before its commit is rolled back, and each of its creates runs
/// again alone: all are created, once. The failure is a trigger that refuses a marked contact's
/// event inside a group and never alone ([`refuse_marked_events_in_groups`]).
async fn a_group_that_fails_before_its_commit_runs_each_create_again_alone(backend: Backend) {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(
        &database_url,
        &["--plan", "pro", "--rate-limit-per-minute", "100000"],
    );
    // No webhook worker: every committed event keeps its dispatch-queue row (the SQLite trigger).
    let s = start(
        backend,
        database_url.clone(),
        keys,
        &[
            ("CRM_CREATE_SLOTS", "1"),
            ("CRM_CREATE_GROUP_MAX", "16"),
            ("CRM_WEBHOOK_WORKER", "false"),
        ],
    );
    refuse_marked_events_in_groups(backend, &database_url).await;
    let bodies: Vec<Value> = (0..40)
        .map(|i| json!({"first_name": if i % 8 == 5 { "Boom".to_owned() } else { format!("P{i}") }, "email": format!("b{i}@x.example")}))
        .collect();
    let answers = join_all(
        bodies
            .iter()
            .map(|b| s.req(Method::POST, "/contacts").json(b).send()),
    )
    .await;
    let mut ids = HashSet::new();
    for (body, res) in bodies.iter().zip(&answers) {
        let c = res.ok(201);
        assert_eq!(c["email"], body["email"]);
        ids.insert(c["id"].as_str().unwrap().to_owned());
    }
    let listed = s.get("/contacts?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        listed
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect::<HashSet<_>>(),
        ids
    );
    let events = s
        .get("/events?type=contact.created&limit=100")
        .await
        .ok(200)["data"]
        .as_array()
        .unwrap()
        .clone();
    let mut evented: Vec<String> = events
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    evented.sort();
    evented.dedup();
    assert_eq!(
        (events.len(), evented.len()),
        (40, 40),
        "one event per contact"
    );
}

/// Makes the insert of an event of a contact named Boom fail when it is one of a group's.
/// - Postgres: a statement trigger that sees more than one new event.
/// - SQLite (row triggers only): the event fails when another event has no dispatch-queue row
///   yet. A group inserts all its events before their queue rows, so any marked event but the
///   group's first fails. Alone, every other event is either committed with its queue row (the
///   worker that deletes those rows is off) or invisible (one writer at a time).
async fn refuse_marked_events_in_groups(backend: Backend, database_url: &str) {
    use sqlx::Connection;
    match backend {
        Backend::Postgres => {
            let mut db = sqlx::PgConnection::connect(database_url).await.unwrap();
            for sql in [
                "CREATE FUNCTION refuse_grouped_boom() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                   IF (SELECT count(*) FROM new_events) > 1 AND EXISTS (SELECT 1 FROM new_events WHERE body::text LIKE '%Boom%') THEN
                     RAISE EXCEPTION 'refused for the test';
                   END IF;
                   RETURN NULL;
                 END $$",
                "CREATE TRIGGER refuse_grouped_boom AFTER INSERT ON events REFERENCING NEW TABLE AS new_events
                 FOR EACH STATEMENT EXECUTE FUNCTION refuse_grouped_boom()",
            ] {
                sqlx::query(sql).execute(&mut db).await.unwrap();
            }
        }
        Backend::Sqlite => {
            use std::str::FromStr;
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(database_url)
                .unwrap()
                .busy_timeout(std::time::Duration::from_secs(10));
            let mut db = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            sqlx::query(
                "CREATE TRIGGER refuse_grouped_boom AFTER INSERT ON events
                 WHEN NEW.body LIKE '%Boom%' AND EXISTS (
                   SELECT 1 FROM events e WHERE e.id <> NEW.id AND NOT EXISTS (
                     SELECT 1 FROM event_dispatch_queue q WHERE q.workspace_id = e.workspace_id AND q.mode = e.mode AND q.id = e.id))
                 BEGIN SELECT RAISE(ABORT, 'refused for the test'); END",
            )
            .execute(&mut db)
            .await
            .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_group_that_fails_before_its_commit_runs_each_create_again_alone() {
    a_group_that_fails_before_its_commit_runs_each_create_again_alone(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_group_that_fails_before_its_commit_runs_each_create_again_alone() {
    a_group_that_fails_before_its_commit_runs_each_create_again_alone(Backend::Sqlite).await;
}

crate::on_both_stores!(served_by super::serve; grouped_creates_answer_as_each_would_alone);
