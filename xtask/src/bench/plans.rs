//! The search and filter query plans of each store, recorded beside the run.

use super::*;

/// A rare needle (one contact in 5,000: the trigram index) and two common ones (the newest-first
/// walk that stops at the limit).
pub(super) const SEARCH_NEEDLES: [&str; 3] = ["yxq", "kow", "ann"];

pub(super) fn explain_postgres(url: &str, workspace: &str) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for needle in SEARCH_NEEDLES {
        let sql = format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM contacts WHERE workspace_id = '{workspace}' AND mode = 'test' \
             AND deleted_at IS NULL AND search_text LIKE lower('%{needle}%') ESCAPE '\\' ORDER BY id DESC LIMIT 11"
        );
        let plan = raw::psql_out(url, &sql)?;
        println!(
            "\nPostgres search plan for {needle:?} (the store's contact search query):\n{plan}"
        );
        out.insert(needle.to_owned(), Value::String(plan));
    }
    for value in FILTER_VALUES {
        // The store's statement is prepared and kept, so after five runs Postgres may switch to
        // a generic plan that does not know the value: show that one, forced.
        let select = format!("{} LIMIT 26", filter_sql(&format!("'\"{value}\"'::jsonb")));
        let sql = format!(
            "SET plan_cache_mode = force_generic_plan; PREPARE f(jsonb) AS {} LIMIT 26;
             EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE f('\"{value}\"')",
            filter_sql("$1").replace("WORKSPACE", workspace)
        );
        let custom = raw::psql_out(
            url,
            &format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
                select.replace("WORKSPACE", workspace)
            ),
        )?;
        let generic = raw::psql_out(url, &sql)?;
        let plan = format!("{custom}\ngeneric plan:\n{generic}");
        println!("\nPostgres custom-field filter plan for region={value:?} (the store's list query):\n{plan}");
        out.insert(format!("custom_fields.region={value}"), Value::String(plan));
    }
    Ok(Value::Object(out))
}

/// A common region (1 contact in 5) and the rare one (1 in 5,000).
pub(super) const FILTER_VALUES: [&str; 2] = ["emea", scenarios::RARE_REGION];

/// The store's contact list query for `custom_fields.region = <value>` (value as SQL), first page
/// without its LIMIT; `WORKSPACE` stands for the workspace id.
pub(super) fn filter_sql(value: &str) -> String {
    format!(
        "SELECT c.id, c.first_name, c.custom_fields FROM contact_field_values v JOIN contacts c \
         ON c.workspace_id = v.workspace_id AND c.mode = v.mode AND c.id = v.contact_id \
         WHERE v.workspace_id = 'WORKSPACE' AND v.mode = 'test' AND v.field_key = 'region' AND v.value = {value} \
         AND deleted_at IS NULL ORDER BY v.contact_id DESC"
    )
}

pub(super) async fn explain_sqlite(path: &Path, workspace: &str) -> Result<Value> {
    use sqlx::{sqlite::SqliteConnectOptions, ConnectOptions};
    let mut conn = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .read_only(true)
        .connect()
        .await?;
    let mut out = serde_json::Map::new();
    // The store's three steps for the contact section of `/search?limit=10` (crm-store-sqlite's
    // `search_page`): the window of the newest 1,000 rows, the trigram matches older than it
    // (capped at 5,000), and the one statement for a needle that reaches the cap.
    let tenant = format!("workspace_id = '{workspace}' AND mode = 'test'");
    let edge =
        format!("(SELECT id FROM contacts WHERE {tenant} ORDER BY id DESC LIMIT 1 OFFSET 999)");
    for needle in SEARCH_NEEDLES {
        let steps = [
            format!(
                "SELECT * FROM contacts WHERE {tenant} AND deleted_at IS NULL AND id >= coalesce({edge}, '') \
                 AND replace(replace(search_text, '\u{212A}', 'k'), '\u{17F}', 's') LIKE '%{needle}%' ESCAPE '\\' ORDER BY id DESC LIMIT 11"
            ),
            format!(
                "WITH hits AS MATERIALIZED (SELECT * FROM (SELECT rowid AS hit FROM contacts_fts WHERE contacts_fts MATCH '\"{needle}\"') \
                 CROSS JOIN contacts ON contacts.rowid = hit WHERE {tenant} AND deleted_at IS NULL AND id < {edge} AND {edge} IS NOT NULL LIMIT 5000) \
                 SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT 11"
            ),
            format!(
                "SELECT * FROM contacts WHERE {tenant} AND deleted_at IS NULL AND id < {edge} \
                 AND rowid IN (SELECT rowid FROM contacts_fts WHERE contacts_fts MATCH '\"{needle}\"') ORDER BY id DESC LIMIT 11"
            ),
        ];
        let mut text = String::new();
        for (i, sql) in steps.iter().enumerate() {
            text.push_str(&format!(
                "step {}:\n{}\n",
                i + 1,
                sqlite_plan(&mut conn, sql).await?
            ));
        }
        println!("\nSQLite search plan for {needle:?} (the store's contact search, each step run alone):\n{text}");
        out.insert(needle.to_owned(), Value::String(text));
    }
    for value in FILTER_VALUES {
        let sql = format!(
            "{} LIMIT 26",
            filter_sql(&format!("'{value}'")).replace("WORKSPACE", workspace)
        );
        let text = sqlite_plan(&mut conn, &sql).await?;
        println!("\nSQLite custom-field filter plan for region={value:?} (the store's list query):\n{text}");
        out.insert(format!("custom_fields.region={value}"), Value::String(text));
    }
    Ok(Value::Object(out))
}

/// `sql`'s `EXPLAIN QUERY PLAN`, then how many rows it returned and how long it took.
pub(super) async fn sqlite_plan(conn: &mut sqlx::SqliteConnection, sql: &str) -> Result<String> {
    use sqlx::Row as _;
    let plan = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .fetch_all(&mut *conn)
        .await?;
    let lines: Vec<String> = plan
        .iter()
        .map(|r| r.try_get::<String, _>("detail").unwrap_or_default())
        .collect();
    let t0 = std::time::Instant::now();
    let n = sqlx::query(sql).fetch_all(&mut *conn).await?.len();
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    Ok(format!("{}\n({n} rows in {ms:.1} ms)", lines.join("\n")))
}
