//! Erasure (decisions §25): after erasing a contact that had activities, emails (test mode),
//! history, events, an idempotent create and an enrollment, no table of the database holds its
//! email or name (read directly), reads of its id answer 404, references to it are null, and a
//! dry run reported the same counts while changing nothing.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{Backend, Server};

const EMAIL: &str = "zelda.quartermain@erase-me.example";
const FIRST: &str = "Zeldabeth";
const LAST: &str = "Quartermainova";

/// Every (table, column or row) of the database whose text holds `needle` (case-insensitive).
async fn tables_holding(s: &Server, needle: &str) -> Vec<String> {
    use sqlx::{Connection, Row};
    let mut found = Vec::new();
    match s.backend {
        Backend::Sqlite => {
            let path = s.database_url.trim_start_matches("sqlite://");
            let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{path}"))
                .await
                .unwrap();
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )
            .fetch_all(&mut db)
            .await
            .unwrap();
            assert!(tables.len() > 20, "{tables:?}");
            for table in tables {
                let columns: Vec<String> =
                    sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
                        .bind(&table)
                        .fetch_all(&mut db)
                        .await
                        .unwrap();
                for column in columns {
                    let sql = format!(
                        "SELECT count(*) AS n FROM \"{table}\" WHERE CAST(\"{column}\" AS TEXT) LIKE ?"
                    );
                    let n: i64 = sqlx::query(&sql)
                        .bind(format!("%{needle}%"))
                        .fetch_one(&mut db)
                        .await
                        .unwrap()
                        .get("n");
                    if n > 0 {
                        found.push(format!("{table}.{column}"));
                    }
                }
            }
        }
        Backend::Postgres => {
            let mut db = sqlx::PgConnection::connect(&s.database_url).await.unwrap();
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
            )
            .fetch_all(&mut db)
            .await
            .unwrap();
            assert!(tables.len() > 20, "{tables:?}");
            // bytea columns render as hex in a row's text: look for that spelling too.
            let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
            for table in tables {
                let sql = format!(
                    "SELECT count(*) AS n FROM \"{table}\" t WHERE t::text ILIKE $1 OR t::text ILIKE $2"
                );
                let n: i64 = sqlx::query(&sql)
                    .bind(format!("%{needle}%"))
                    .bind(format!("%{hex}%"))
                    .fetch_one(&mut db)
                    .await
                    .unwrap()
                    .get("n");
                if n > 0 {
                    found.push(table);
                }
            }
        }
    }
    found
}

fn data(v: &Value) -> Vec<Value> {
    v["data"].as_array().unwrap().clone()
}

/// What reads of the contact and its surroundings show, to compare before and after a dry run.
async fn snapshot(s: &Server, contact: &str, deal: &str) -> Value {
    json!({
        "contact": s.get(&format!("/contacts/{contact}")).await.ok(200).clone(),
        "history": s.get(&format!("/contacts/{contact}/history")).await.ok(200).clone(),
        "deal": s.get(&format!("/deals/{deal}")).await.ok(200).clone(),
        "activities": s.get("/activities?limit=100").await.ok(200).clone(),
        "emails": s.get("/emails").await.ok(200).clone(),
        "events": s.get("/events?limit=100").await.ok(200).clone(),
    })
}

async fn an_erased_contact_leaves_no_trace(s: Server) {
    s.post("/sequences", json!({"name": "Nurture", "trigger": {"event": "contact.created"},
        "steps": [{"wait_days": 2, "subject": "Hi {{first_name}}", "body": "Hello {{first_name}}"}]}))
        .await
        .ok(201);
    s.post(
        "/automations",
        json!({"name": "welcome", "trigger_event": "contact.created",
        "actions": [{"type": "send_email", "subject": "Welcome {{first_name}} {{last_name}}",
                     "body": "<p>Dear {{first_name}}, we write to {{email}}</p>"}]}),
    )
    .await
    .ok(201);

    // An idempotent create, then an update: history, events, an email, an enrollment.
    let created = s
        .req(Method::POST, "/contacts")
        .header("idempotency-key", "create-zelda")
        .json(&json!({"first_name": FIRST, "last_name": "Q", "email": EMAIL}))
        .send()
        .await
        .ok(201)
        .clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/contacts/{id}");
    s.patch(&path, json!({"last_name": LAST})).await.ok(200);
    s.post(
        "/activities",
        json!({"type": "note", "contact_id": id, "body": format!("called {FIRST}")}),
    )
    .await
    .ok(201);
    let deal = s
        .post(
            "/deals",
            json!({"title": "Renewal", "primary_contact_id": id}),
        )
        .await
        .ok(201)
        .clone();
    let deal_id = deal["id"].as_str().unwrap().to_owned();
    let shared = s
        .post(
            "/activities",
            json!({"type": "call", "contact_id": id, "deal_id": deal_id, "body": "pricing call"}),
        )
        .await
        .ok(201)
        .clone();
    let emails = data(s.get("/emails").await.ok(200));
    assert_eq!(emails.len(), 1);
    assert_eq!(emails[0]["to"], EMAIL);
    let enrollments = data(
        s.get(&format!(
            "/sequences/{}/enrollments",
            data(s.get("/sequences").await.ok(200))[0]["id"]
                .as_str()
                .unwrap()
        ))
        .await
        .ok(200),
    );
    assert_eq!(enrollments.len(), 1);
    assert!(
        !tables_holding(&s, EMAIL).await.is_empty(),
        "the probe finds the email before"
    );
    assert!(
        !tables_holding(&s, LAST).await.is_empty(),
        "the probe finds the name before"
    );

    // Scopes: the object's write and `erase`.
    let writer = s
        .post(
            "/keys",
            json!({"name": "writer", "scopes": ["contacts:write"]}),
        )
        .await
        .ok(201)
        .clone();
    let res = s
        .req(Method::POST, &format!("{path}/erase"))
        .key(writer["secret"].as_str().unwrap())
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "erase:write");
    let eraser = s
        .post(
            "/keys",
            json!({"name": "eraser", "scopes": ["erase:write"]}),
        )
        .await
        .ok(201)
        .clone();
    let res = s
        .req(Method::POST, &format!("{path}/erase"))
        .key(eraser["secret"].as_str().unwrap())
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "contacts:write");
    s.req(
        Method::POST,
        "/contacts/con_7zzzzzzzzzzzzzzzzzzzzzzzzz/erase",
    )
    .send()
    .await
    .problem(404, "not_found");
    s.req(Method::POST, &format!("{path}/erase?dry_run=maybe"))
        .send()
        .await
        .problem(422, "validation_failed");

    // The dry run: counts, and nothing changes.
    let before = snapshot(&s, &id, &deal_id).await;
    let dry = s
        .req(Method::POST, &format!("{path}/erase?dry_run=true"))
        .send()
        .await
        .ok(200)
        .clone();
    // The generic dry-run envelope (decisions §18): what the erasure would answer, as `result`.
    assert_eq!(dry["object"], "dry_run");
    assert_eq!(dry["status"], 200);
    assert_eq!(dry["result"]["erased"], true);
    let counts = dry["result"]["counts"].clone();
    assert_eq!(counts["history_entries"], 2, "{counts}");
    assert_eq!(
        counts["activities_deleted"], 2,
        "the note and the email's activity: {counts}"
    );
    assert_eq!(counts["activities_unlinked"], 1, "{counts}");
    assert_eq!(counts["emails_scrubbed"], 1, "{counts}");
    assert_eq!(
        counts["events_scrubbed"], 2,
        "created and updated: {counts}"
    );
    assert_eq!(counts["idempotency_replays"], 1, "{counts}");
    assert_eq!(counts["enrollments_ended"], 1, "{counts}");
    assert_eq!(
        counts["references_cleared"], 1,
        "the deal's primary contact: {counts}"
    );
    assert_eq!(
        snapshot(&s, &id, &deal_id).await,
        before,
        "a dry run changes nothing"
    );
    assert!(s.get("/audit?action=contact.erased").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let deliveries_before = s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len();

    // The erasure.
    let erased = s
        .req(Method::POST, &format!("{path}/erase"))
        .send()
        .await
        .ok(200)
        .clone();
    assert_eq!(erased["id"], id.as_str());
    assert_eq!(erased["object"], "contact");
    assert_eq!(erased["erased"], true);
    assert_eq!(
        erased["counts"], counts,
        "the dry run's counts were the erasure's"
    );

    // Reads of the id: 404.
    s.get(&path).await.problem(404, "not_found");
    s.get(&format!("{path}/history"))
        .await
        .problem(404, "not_found");
    s.patch(&path, json!({"first_name": "x"}))
        .await
        .problem(404, "not_found");
    s.req(Method::POST, &format!("{path}/erase"))
        .send()
        .await
        .problem(404, "not_found");
    let listed = data(s.get("/contacts?include_deleted=true").await.ok(200));
    assert!(listed.iter().all(|c| c["id"] != id.as_str()));

    // References: the deal's primary contact is null, with an entry by `system`; the shared
    // activity stays on the deal alone.
    let deal_now = s.get(&format!("/deals/{deal_id}")).await.ok(200).clone();
    assert_eq!(deal_now["primary_contact_id"], Value::Null);
    assert_eq!(deal_now["version"], deal["version"].as_i64().unwrap() + 1);
    let deal_history = data(s.get(&format!("/deals/{deal_id}/history")).await.ok(200));
    assert_eq!(deal_history[0]["actor"]["type"], "system");
    assert_eq!(deal_history[0]["via"], "direct");
    assert_eq!(
        deal_history[0]["changes"],
        json!([{"field": "primary_contact_id", "from": id, "to": null}])
    );
    let act = s
        .get(&format!("/activities/{}", shared["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (act["contact_id"].clone(), act["deal_id"].clone()),
        (Value::Null, json!(deal_id))
    );
    // The email keeps its status and dates only; the enrollment ended `erased`; the events are
    // stubs; no webhook event was written for the erase.
    let emails = data(s.get("/emails").await.ok(200));
    assert_eq!(emails.len(), 1);
    assert_eq!(emails[0]["status"], "simulated");
    assert!(emails[0]["created_at"].is_string());
    assert_ne!(emails[0]["to"], EMAIL);
    let seq_id = data(s.get("/sequences").await.ok(200))[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let enrollments = data(
        s.get(&format!("/sequences/{seq_id}/enrollments"))
            .await
            .ok(200),
    );
    assert_eq!(
        (
            enrollments[0]["state"].clone(),
            enrollments[0]["exit_reason"].clone()
        ),
        (json!("exited"), json!("erased"))
    );
    let events = data(s.get("/events?limit=100").await.ok(200));
    assert_eq!(events.len(), deliveries_before, "an erase writes no event");
    let stubs: Vec<&Value> = events.iter().filter(|e| e["object"] == "contact").collect();
    assert_eq!(stubs.len(), 2);
    for e in stubs {
        assert_eq!(
            e["data"],
            json!({"id": id, "object": "contact", "erased": true})
        );
    }
    // The idempotent create runs afresh (its replay is gone): a new contact.
    let again = s
        .req(Method::POST, "/contacts")
        .header("idempotency-key", "create-zelda")
        .json(&json!({"first_name": "Other", "email": "other@example.com"}))
        .send()
        .await;
    assert_eq!(again.status, 201);
    assert!(again.header("idempotent-replayed").is_none());
    // Audited once, by the key.
    let audit = data(s.get("/audit?action=contact.erased").await.ok(200));
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["target"], json!({"object": "contact", "id": id}));
    assert_eq!(audit[0]["actor"]["type"], "api_key");

    // Nothing in the database holds the email or the name any more.
    for needle in [EMAIL, FIRST, LAST] {
        let left = tables_holding(&s, needle).await;
        assert!(left.is_empty(), "{needle} is still in {left:?}");
    }
}

async fn companies_and_deals_erase_and_clear_references(s: Server) {
    let company = s
        .post(
            "/companies",
            json!({"name": "Erasable Ltd", "domain": "erasable.example"}),
        )
        .await
        .ok(201)
        .clone();
    let cid = company["id"].as_str().unwrap().to_owned();
    let contact = s
        .post(
            "/contacts",
            json!({"email": "a@b.example", "company_id": cid}),
        )
        .await
        .ok(201)
        .clone();
    let deal = s
        .post("/deals", json!({"title": "Big", "company_id": cid}))
        .await
        .ok(201)
        .clone();
    let did = deal["id"].as_str().unwrap().to_owned();
    s.delete(&format!("/companies/{cid}")).await.ok(200);
    // A soft-deleted record can be erased too.
    let res = s
        .req(Method::POST, &format!("/companies/{cid}/erase"))
        .send()
        .await
        .ok(200)
        .clone();
    assert_eq!(res["counts"]["references_cleared"], 2);
    s.get(&format!("/companies/{cid}"))
        .await
        .problem(404, "not_found");
    let c = s
        .get(&format!("/contacts/{}", contact["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(c["company_id"], Value::Null);

    s.post(
        "/activities",
        json!({"type": "note", "deal_id": did, "body": "deal only"}),
    )
    .await
    .ok(201);
    let res = s
        .req(Method::POST, &format!("/deals/{did}/erase"))
        .send()
        .await
        .ok(200)
        .clone();
    assert_eq!(res["counts"]["activities_deleted"], 1);
    assert_eq!(res["counts"]["events_scrubbed"], 1);
    s.get(&format!("/deals/{did}"))
        .await
        .problem(404, "not_found");
    assert!(tables_holding(&s, "Erasable Ltd").await.is_empty());
    assert!(tables_holding(&s, "deal only").await.is_empty());
    let actions: Vec<String> = data(s.get("/audit").await.ok(200))
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions, ["deal.erased", "company.erased"]);
}

crate::on_both_stores!(
    an_erased_contact_leaves_no_trace,
    companies_and_deals_erase_and_clear_references,
);
