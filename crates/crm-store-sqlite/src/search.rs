//! Text search over the FTS5 trigram indexes, and the list conditions it shares.

use crm_app::{ports::Slice, StoreError};
use crm_domain::Tenant;
use sqlx::{sqlite::SqliteRow, QueryBuilder, Row, Sqlite};

use crate::{
    backend,
    tx::{tenant_where, SqliteTx},
};

/// `%q%` with LIKE's wildcards escaped (with `\`).
pub(crate) fn like_pattern(q: &str) -> String {
    crm_store_sql::like_pattern(&q.to_lowercase())
}

/// The FTS5 query for the substring `q`: one phrase, quoted.
fn fts_phrase(q: &str) -> String {
    format!("\"{}\"", q.to_lowercase().replace('"', "\"\""))
}

/// A case-insensitive substring condition on the table's `search_text`: through its FTS5 trigram
/// index when the needle has at least three characters (the shortest a trigram can match),
/// else a LIKE over the column.
pub(crate) fn push_search(qb: &mut QueryBuilder<'_, Sqlite>, fts_table: &'static str, q: &str) {
    // Counted lower-cased, as the index sees it; the helpers lower the needle themselves.
    if q.to_lowercase().chars().count() >= 3 {
        qb.push(" AND rowid IN (SELECT rowid FROM ")
            .push(fts_table)
            .push(" WHERE ")
            .push(fts_table)
            .push(" MATCH ")
            .push_bind(fts_phrase(q))
            .push(")");
    } else {
        qb.push(" AND search_text LIKE ")
            .push_bind(like_pattern(q))
            .push(" ESCAPE '\\'");
    }
}

/// The needle of a text search that [`search_page`] can answer: three characters or more (the
/// trigram index's shortest), all printable ASCII. Its first step filters with `LIKE`, which
/// folds only ASCII letters (as `lower()` does when `search_text` is generated), where the
/// trigram index folds every letter: for "josé" against "JOSÉ" they disagree, so such a needle
/// keeps the one statement, all through the trigram index. (A control character would end
/// `LIKE`'s pattern early: a NUL makes `%ab\0cd%` match text ending in "ab".)
pub(crate) fn trigram_needle(q: Option<&String>) -> Option<&str> {
    q.map(String::as_str)
        .filter(|q| q.len() >= 3 && q.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
}

/// `search_text` as the trigram index sees it for an ASCII needle: of all the letters its case
/// folding takes to another, only these two land in ASCII (the KELVIN SIGN and the long s), so
/// with them replaced `LIKE` and the index agree on every printable ASCII needle.
const SEARCH_TEXT_FOLDED: &str = "replace(replace(search_text, '\u{212A}', 'k'), '\u{17F}', 's')";

/// ` AND deleted_at IS NULL` unless deleted rows are asked for.
pub(crate) fn push_not_deleted(
    qb: &mut QueryBuilder<'_, Sqlite>,
    table: &str,
    include_deleted: bool,
) {
    if !include_deleted {
        qb.push(" AND deleted_at IS NULL");
    } else if matches!(table, "contacts" | "companies") {
        // Merged tombstones are never listed, not even with `include_deleted` (decisions §18).
        qb.push(" AND merged_into IS NULL");
    }
}

/// How many of a tenant's newest rows a text search reads per row of its page before it asks
/// the trigram index for the rest: a needle in one row of 40 or more fills its page there.
const SEARCH_WINDOW_PER_ROW: u32 = 40;

/// How many of the older rows' trigram matches a text search reads, per row of its window,
/// before it takes the needle for a common one after all.
const SEARCH_MATCHES_PER_WINDOW_ROW: u32 = 5;

/// A text search's page (needles of three characters or more), in statements whose cost does not
/// grow with the tenant's rows unless its matches do. In one statement SQLite walks the primary
/// key newest first and checks each row against the needle's trigram matches, which it first
/// reads in full: a common needle read every one of them (3.8 ms at 1,000,000 contacts) and a
/// rare one walked the rows until the page was full (7.3 ms), both in proportion to the table.
/// Here, as on Postgres:
/// 1. the tenant's newest `window` rows (from the cursor on) are walked newest first and filtered
///    by `LIKE`: a page of a needle common among them ends there;
/// 2. if the page is not full, the trigram matches drive: each is looked up by rowid and kept if
///    it is the tenant's, older than the window and passes the filters, up to `5 × window` of
///    them, then sorted and cut to the rest of the page;
/// 3. only if that cap was reached (a needle common among the older rows but rare among the
///    newest, such as an old import's domain) does the one statement read the rest.
///
/// `include_deleted`: the list's one other condition here (lists filtered by an indexed column or
/// a custom field keep one statement: that index serves them better).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn search_page<'a, T>(
    tx: &mut SqliteTx,
    tenant: &'a Tenant,
    (table, fts, columns): (&'static str, &'static str, &'static str),
    q: &'a str,
    slice: &'a Slice,
    include_deleted: bool,
    map: fn(&SqliteRow) -> Result<T, StoreError>,
    id_of: fn(&T) -> &str,
) -> Result<Vec<T>, StoreError> {
    let window = slice.limit.max(25) * SEARCH_WINDOW_PER_ROW;
    let cap = window * SEARCH_MATCHES_PER_WINDOW_ROW;
    let newest = |qb: &mut QueryBuilder<'a, Sqlite>| {
        tenant_where(qb, tenant);
        if let Some(before) = &slice.before {
            qb.push(" AND id < ").push_bind(before.as_str());
        }
    };
    // The window's last row: the tenant's `window`-th newest (from the cursor on), none when it
    // has fewer rows.
    let edge = |qb: &mut QueryBuilder<'a, Sqlite>| {
        qb.push(format!("(SELECT id FROM {table}"));
        newest(qb);
        qb.push(format!(" ORDER BY id DESC LIMIT 1 OFFSET {})", window - 1));
    };
    // The window walked newest first by primary key, stopping at the page's end: a common needle
    // reads a few rows, a rare one at most the window.
    let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM {table}"));
    newest(&mut qb);
    push_not_deleted(&mut qb, table, include_deleted);
    qb.push(" AND id >= coalesce(");
    edge(&mut qb);
    qb.push(format!(", '') AND {SEARCH_TEXT_FOLDED} LIKE "))
        .push_bind(like_pattern(q))
        .push(" ESCAPE '\\' ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(slice.limit));
    let mut page = fetch_all(tx, &mut qb, map).await?;
    if page.len() >= slice.limit as usize {
        return Ok(page);
    }
    // The rows older than the window (a tenant with fewer rows has none: `id < NULL`), and than
    // the page so far (rows written since the first statement move the window, and a row it
    // returned must not come again).
    let oldest = page.last().map(|row| id_of(row).to_owned());
    let older = |qb: &mut QueryBuilder<'a, Sqlite>| {
        tenant_where(qb, tenant);
        push_not_deleted(qb, table, include_deleted);
        qb.push(" AND id < ");
        edge(qb);
        // The same edge again as a term of its own: a constant, which SQLite tests once before
        // its loops, so a tenant smaller than the window skips the read altogether. Inside
        // `id < ...` it is tested per trigram match, of every tenant (1.7 ms against 0.08 ms for
        // a common needle at 50,000 rows).
        qb.push(" AND ");
        edge(qb);
        qb.push(" IS NOT NULL");
        if let Some(oldest) = oldest.clone() {
            qb.push(" AND id < ").push_bind(oldest);
        }
    };
    let rest = i64::from(slice.limit) - page.len() as i64;
    // CROSS JOIN keeps the trigram matches the outer loop: left to itself the planner walks the
    // tenant's older rows by primary key instead, the whole table for a rare needle.
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "WITH hits AS MATERIALIZED (SELECT {columns} FROM (SELECT rowid AS hit FROM {fts} WHERE {fts} MATCH "
    ));
    qb.push_bind(fts_phrase(q))
        .push(format!(") CROSS JOIN {table} ON {table}.rowid = hit"));
    older(&mut qb);
    qb.push(format!(
        " LIMIT {cap}) SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT "
    ))
    .push_bind(rest);
    let hits = fetch_all(tx, &mut qb, |row| {
        Ok((map(row)?, row.try_get::<i64, _>("found").map_err(backend)?))
    })
    .await?;
    if hits
        .first()
        .is_none_or(|(_, found)| *found < i64::from(cap))
    {
        page.extend(hits.into_iter().map(|(row, _)| row));
        return Ok(page);
    }
    let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM {table}"));
    older(&mut qb);
    push_search(&mut qb, fts, q);
    qb.push(" ORDER BY id DESC LIMIT ").push_bind(rest);
    page.extend(fetch_all(tx, &mut qb, map).await?);
    Ok(page)
}

async fn fetch_all<T>(
    tx: &mut SqliteTx,
    qb: &mut QueryBuilder<'_, Sqlite>,
    map: impl Fn(&SqliteRow) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let rows = qb.build().fetch_all(tx.conn()).await.map_err(backend)?;
    rows.iter().map(map).collect()
}
