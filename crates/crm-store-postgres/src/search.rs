//! Text search over the trigram indexes.

use crm_app::{ports::Slice, StoreError};
use crm_domain::Tenant;
use sqlx::{postgres::PgRow, Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crate::{
    rows::{self},
    tx::{tenant_where, PgQuery, PostgresTx},
};

/// `%q%` with LIKE's wildcards escaped; not lower-cased: see `search_filter`.
pub(crate) use crm_store_sql::like_pattern;

/// ` AND search_text LIKE lower(p)`: `q` as a case-insensitive, literal substring of the row's
/// `search_text`, a generated column holding the searchable fields lower-cased, with a trigram
/// GIN index (pg_trgm) that serves LIKE with any pattern, bound parameters included.
///
/// The needle is lower-cased by Postgres, not by Rust: `lower()` built `search_text`, and the
/// two disagree at the edges (Rust turns a word-final `Σ` into `ς`, Postgres into `σ`), so only
/// the same function on both sides guarantees that any stored text finds itself.
///
/// A list with this filter must run unprepared ([`planned_per_needle`]).
pub(crate) fn search_filter(qb: &mut QueryBuilder<'_, Postgres>, q: &str) {
    qb.push(" AND search_text LIKE lower(")
        .push_bind(like_pattern(q))
        .push(r") ESCAPE '\'");
}

/// A list query, kept out of the connection's statement cache when it searches text, so that
/// every search is planned for its needle. Cached, a statement switches to a generic plan once
/// five custom ones cost more on average, and the generic plan for `search_text LIKE $n` is
/// always the trigram index: right for a rare needle, but for a common one ("e", "example")
/// it reads every row of the tenant and sorts them, where the plan for the actual needle walks
/// the primary key newest first and stops at the limit (5,000 contacts: about 100 ms against
/// under 1 ms). A burst of selective searches (phone numbers) is enough to make the switch.
pub(crate) fn planned_per_needle<'q>(
    qb: &'q mut QueryBuilder<'_, Postgres>,
    searches_text: bool,
) -> PgQuery<'q> {
    qb.build().persistent(!searches_text)
}

/// How many of a tenant's newest rows a text search reads per row of its page before it asks
/// the trigram index for the rest: a needle in one row of 40 or more fills its page there.
const SEARCH_WINDOW_PER_ROW: u32 = 40;

/// How many of the older rows' trigram matches a text search reads, per row of its window,
/// before it takes the needle for a common one after all.
const SEARCH_MATCHES_PER_WINDOW_ROW: u32 = 5;

/// A text search's page, in plans that rest as little as they can on the planner's guess of how
/// common the needle is. Left to the planner, one statement walks the primary key newest first
/// when it takes the needle for a common one, and reads the needle's trigram matches and sorts
/// them when it takes it for a rare one; that guess comes from a sample, and at 1,000,000
/// contacts a rare needle taken for a common one cost a search over a second
/// (docs/performance.md). Here:
/// 1. the tenant's newest `window` rows (from the cursor on), walked by primary key, are
///    filtered: a page of a needle common among them ends there, whatever the statistics say;
/// 2. if the page is not full, up to `5 × window` matches among the older rows are read into a
///    materialized CTE (no order inside: the trigram index, unless the planner takes the needle
///    for one in about 30 rows or more), sorted and cut to the rest of the page;
/// 3. only if that cap was reached (a needle common among the older rows but rare among the
///    newest, such as an old import's domain) does the planner's own statement read the rest.
///
/// `filters` pushes the list's conditions, the text search among them, as ` AND ...` clauses
/// over `table`'s unqualified columns. Lists filtered by an indexed column as well keep one
/// statement: that column's index serves them better than the newest rows.
pub(crate) async fn search_page<'a, T: Send>(
    tx: &mut PostgresTx,
    tenant: &'a Tenant,
    (table, columns): (&str, &str),
    slice: &'a Slice,
    filters: &(dyn Fn(&mut QueryBuilder<'a, Postgres>) + Sync),
    map: fn(&PgRow) -> Result<T, StoreError>,
    id_of: fn(&T) -> &str,
) -> Result<Vec<T>, StoreError> {
    let window = slice.limit.max(25) * SEARCH_WINDOW_PER_ROW;
    let cap = window * SEARCH_MATCHES_PER_WINDOW_ROW;
    let newest = |qb: &mut QueryBuilder<'a, Postgres>| {
        tenant_where(qb, tenant);
        if let Some(before) = &slice.before {
            qb.push(" AND id < ").push_bind(before.as_str());
        }
    };
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM (SELECT * FROM {table}"));
    newest(&mut qb);
    qb.push(format!(" ORDER BY id DESC LIMIT {window}) r WHERE TRUE"));
    filters(&mut qb);
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(slice.limit));
    let mut page = tx.all(planned_per_needle(&mut qb, true), map).await?;
    if page.len() >= slice.limit as usize {
        return Ok(page);
    }
    // The rows older than the window: older than its last row, read again (a tenant with fewer
    // rows has none, and then nothing is older), and than the page so far (rows created since
    // the first statement move the window, and a row it returned must not come again).
    let oldest = page.last().map(|row| id_of(row).to_owned());
    let older = |qb: &mut QueryBuilder<'a, Postgres>| {
        tenant_where(qb, tenant);
        filters(qb);
        qb.push(format!(" AND id < (SELECT id FROM {table}"));
        newest(qb);
        qb.push(format!(" ORDER BY id DESC OFFSET {} LIMIT 1)", window - 1));
        if let Some(oldest) = oldest.clone() {
            qb.push(" AND id < ").push_bind(oldest);
        }
    };
    let rest = i64::from(slice.limit) - page.len() as i64;
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "WITH hits AS MATERIALIZED (SELECT {columns} FROM {table}"
    ));
    older(&mut qb);
    qb.push(format!(" LIMIT {cap}) SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT "));
    qb.push_bind(rest);
    let hits = tx
        .all(planned_per_needle(&mut qb, true), |row| {
            Ok((map(row)?, rows::get::<i64>(row, "found")?))
        })
        .await?;
    if hits
        .first()
        .is_none_or(|(_, found)| *found < i64::from(cap))
    {
        page.extend(hits.into_iter().map(|(row, _)| row));
        return Ok(page);
    }
    let mut qb = QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM {table}"));
    older(&mut qb);
    qb.push(" ORDER BY id DESC LIMIT ").push_bind(rest);
    page.extend(tx.all(planned_per_needle(&mut qb, true), map).await?);
    Ok(page)
}
