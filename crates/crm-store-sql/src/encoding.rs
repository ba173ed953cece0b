//! How records' structured values are kept in a column (JSON text; JSONB on Postgres, cast from
//! this text), and the other small encodings both stores use: cursors, patterns, names.

use crm_app::StoreError;
use crm_domain::{JsonMap, ObjectKind};

use crate::corrupt;

/// Custom fields as the JSON text a `custom_fields` column holds.
pub fn json_text(map: &JsonMap) -> String {
    serde_json::Value::Object(map.clone()).to_string()
}

/// The table holding records of `object`.
pub fn record_table(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

/// `%q%` for `LIKE ... ESCAPE '\'`, with LIKE's wildcards in `q` escaped so they match
/// themselves.
pub fn like_pattern(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 2);
    p.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// An activity cursor, `"<occurred_at ms>:<id>"`, taken apart.
pub fn activity_position(before: &str) -> Result<(i64, &str), StoreError> {
    let (ms, id) = before
        .split_once(':')
        .ok_or_else(|| corrupt("activity cursor"))?;
    Ok((ms.parse().map_err(|_| corrupt("activity cursor"))?, id))
}

/// `verb name` for a savepoint statement. Savepoint names come from our own code, never from
/// input; still, anything but a plain identifier is refused rather than spliced into SQL.
pub fn savepoint_sql(verb: &str, name: &str) -> Result<String, StoreError> {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain {
        return Err(StoreError::Backend(
            format!("invalid savepoint name {name:?}").into(),
        ));
    }
    Ok(format!("{verb} {name}"))
}
