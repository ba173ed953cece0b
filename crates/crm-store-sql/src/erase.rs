//! Erasure (`EraseRepo`, decisions §25): the same statements on both backends. Where a value
//! to scrub sits inside stored JSON (history bodies, event snapshots, custom fields) or bytes
//! (idempotency replays), the candidate rows are found by the record's id as text and rewritten
//! here, so that no statement depends on a backend's JSON functions.

use crm_app::{
    ports::{ClearedReference, Erasure},
    StoreError,
};
use crm_domain::{ObjectKind, Tenant, Timestamp};
use serde_json::{json, Map, Value};

use crate::{
    clauses::tenant_query, corrupt, like_pattern, record_table, sql::Col, stored, Arg, Unit,
};

pub async fn erase_record<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    id: &str,
    now: Timestamp,
) -> Result<Option<Erasure>, StoreError> {
    let table = record_table(object);
    let sql =
        format!("SELECT 1 AS found FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = $3");
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id);
    if tx.optional(q, |r| r.col::<i32>("found")).await?.is_none() {
        return Ok(None);
    }
    let mut out = Erasure {
        history_entries: scrub_history(tx, tenant, id).await?,
        ..Erasure::default()
    };
    let at = now.millis();
    // Activities: deleted when attached to it alone, unlinked when also to another record.
    let columns = match object {
        ObjectKind::Contact => Some(("contact_id", "deal_id")),
        ObjectKind::Deal => Some(("deal_id", "contact_id")),
        _ => None,
    };
    if let Some((own, other)) = columns {
        let sql = format!("DELETE FROM activities WHERE workspace_id = $1 AND mode = $2 AND {own} = $3 AND {other} IS NULL");
        out.activities_deleted = tx
            .execute(tenant_query::<U::Db>(&sql, tenant).arg(id))
            .await?;
        let sql = format!("UPDATE activities SET {own} = NULL, version = version + 1, updated_at = $4 WHERE workspace_id = $1 AND mode = $2 AND {own} = $3");
        out.activities_unlinked = tx
            .execute(tenant_query::<U::Db>(&sql, tenant).arg(id).arg(at))
            .await?;
    }
    match object {
        ObjectKind::Contact => {
            // Emails to it keep their status and dates; one still queued is not sent.
            let sql = "UPDATE emails SET to_addr = '', subject = '', html = '', text = '', contact_id = NULL,
                 error = CASE WHEN status = 'queued' THEN 'the recipient was erased' ELSE error END,
                 next_attempt_at = CASE WHEN status = 'queued' THEN NULL ELSE next_attempt_at END,
                 status = CASE WHEN status = 'queued' THEN 'failed' ELSE status END
                 WHERE workspace_id = $1 AND mode = $2 AND contact_id = $3";
            out.emails_scrubbed = tx
                .execute(tenant_query::<U::Db>(sql, tenant).arg(id))
                .await?;
            let sql = "DELETE FROM email_normalisation_conflicts WHERE workspace_id = $1 AND mode = $2 AND contact_id = $3";
            tx.execute(tenant_query::<U::Db>(sql, tenant).arg(id))
                .await?;
        }
        ObjectKind::Deal => {
            let sql = "UPDATE emails SET deal_id = NULL WHERE workspace_id = $1 AND mode = $2 AND deal_id = $3";
            tx.execute(tenant_query::<U::Db>(sql, tenant).arg(id))
                .await?;
        }
        _ => {}
    }
    out.events_scrubbed = scrub_events(tx, tenant, object, id).await?;
    out.idempotency_replays = drop_replays(tx, tenant, id).await?;
    out.import_errors = drop_import_errors(tx, tenant, object, id).await?;
    let sql = "UPDATE sequence_enrollments SET state = 'exited', exit_reason = 'erased', next_send_at = NULL,
         lease_holder = NULL, lease_until = NULL, updated_at = $4, ended_at = $4
         WHERE workspace_id = $1 AND mode = $2 AND state = 'active' AND (contact_id = $3 OR source_id = $3)";
    out.enrollments_ended = tx
        .execute(tenant_query::<U::Db>(sql, tenant).arg(id).arg(at))
        .await?;
    let sql =
        "DELETE FROM automation_runs WHERE workspace_id = $1 AND mode = $2 AND record_id = $3";
    out.automation_runs = tx
        .execute(tenant_query::<U::Db>(sql, tenant).arg(id))
        .await?;

    // References from other records.
    let columns: &[(ObjectKind, &str)] = match object {
        ObjectKind::Contact => &[(ObjectKind::Deal, "primary_contact_id")],
        ObjectKind::Company => &[
            (ObjectKind::Contact, "company_id"),
            (ObjectKind::Deal, "company_id"),
        ],
        _ => &[],
    };
    for (holder, column) in columns {
        let t = record_table(*holder);
        let sql = format!("UPDATE {t} SET {column} = NULL, version = version + 1, updated_at = $4 WHERE workspace_id = $1 AND mode = $2 AND {column} = $3 RETURNING id, version");
        let q = tenant_query::<U::Db>(&sql, tenant).arg(id).arg(at);
        let rows = tx
            .all(q, |r| {
                Ok((r.col::<String>("id")?, r.col::<i64>("version")?))
            })
            .await?;
        out.references
            .extend(rows.into_iter().map(|(rid, version)| ClearedReference {
                object: *holder,
                id: rid,
                field: (*column).to_owned(),
                version,
            }));
    }
    for holder in [ObjectKind::Contact, ObjectKind::Company, ObjectKind::Deal] {
        clear_custom_references(tx, tenant, holder, id, at, &mut out.references).await?;
    }

    let sql = format!("DELETE FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = $3");
    tx.execute(tenant_query::<U::Db>(&sql, tenant).arg(id))
        .await?;
    Ok(Some(out))
}

/// The record's history entries, each rewritten as [`stored::history::erased_body`].
async fn scrub_history<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    record_id: &str,
) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT id, CAST(body AS TEXT) AS body FROM record_changes WHERE workspace_id = $1 AND mode = $2 AND record_id = $3",
        tenant,
    )
    .arg(record_id);
    let rows = tx
        .all(q, |r| {
            Ok((r.col::<String>("id")?, r.col::<String>("body")?))
        })
        .await?;
    let sql = format!(
        "UPDATE record_changes SET body = $4{} WHERE workspace_id = $1 AND mode = $2 AND record_id = $3 AND id = $5",
        U::JSON
    );
    for (change_id, body) in &rows {
        let body: Value = serde_json::from_str(body).map_err(|_| corrupt("history entry body"))?;
        let q = tenant_query::<U::Db>(&sql, tenant)
            .arg(record_id)
            .arg(stored::history::erased_body(body).to_string())
            .arg(change_id.as_str());
        tx.execute(q).await?;
    }
    Ok(rows.len() as u64)
}

/// Stored events whose snapshot is the record: `data` becomes `{"id", "object", "erased": true}`.
async fn scrub_events<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    id: &str,
) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT id, CAST(body AS TEXT) AS body FROM events WHERE workspace_id = $1 AND mode = $2 AND CAST(body AS TEXT) LIKE $3 ESCAPE '\\'",
        tenant,
    )
    .arg(like_pattern(id));
    let rows = tx
        .all(q, |r| {
            Ok((r.col::<String>("id")?, r.col::<String>("body")?))
        })
        .await?;
    let sql = format!(
        "UPDATE events SET body = $4{} WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        U::JSON
    );
    let mut n = 0;
    for (event_id, body) in rows {
        let mut body: Value = serde_json::from_str(&body).map_err(|_| corrupt("event body"))?;
        if body["object"] != object.as_str() || body["data"]["id"] != id {
            continue;
        }
        body["data"] = json!({"id": id, "object": object.as_str(), "erased": true});
        let q = tenant_query::<U::Db>(&sql, tenant)
            .arg(event_id.as_str())
            .arg(body.to_string());
        tx.execute(q).await?;
        n += 1;
    }
    Ok(n)
}

/// Idempotency records whose stored answer holds the id: dropped (a retry then runs afresh).
async fn drop_replays<U: Unit>(tx: &mut U, tenant: &Tenant, id: &str) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT key, reply_body FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND reply_body IS NOT NULL",
        tenant,
    );
    let rows = tx
        .all(q, |r| {
            Ok((r.col::<String>("key")?, r.col::<Vec<u8>>("reply_body")?))
        })
        .await?;
    let needle = id.as_bytes();
    let mut n = 0;
    for (key, body) in rows {
        if !body.windows(needle.len()).any(|w| w == needle) {
            continue;
        }
        let q = tenant_query::<U::Db>(
            "DELETE FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3",
            tenant,
        )
        .arg(key.as_str());
        n += tx.execute(q).await?;
    }
    Ok(n)
}

/// Import row errors that quote the record (its id, or a contact's email, read before the record
/// row goes): dropped, as replays are.
async fn drop_import_errors<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    id: &str,
) -> Result<u64, StoreError> {
    let mut needles = vec![id.to_owned()];
    if object == ObjectKind::Contact {
        let q = tenant_query::<U::Db>(
            "SELECT email FROM contacts WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .arg(id);
        if let Some(Some(email)) = tx.optional(q, |r| r.col::<Option<String>>("email")).await? {
            needles.push(email);
        }
    }
    let mut n = 0;
    for needle in needles {
        let q = tenant_query::<U::Db>(
            "DELETE FROM import_errors WHERE workspace_id = $1 AND mode = $2 AND problem LIKE $3 ESCAPE '\\'",
            tenant,
        )
        .arg(like_pattern(&needle));
        n += tx.execute(q).await?;
    }
    Ok(n)
}

/// Custom fields of `holder` records whose value is the id: removed (a reference to nothing).
async fn clear_custom_references<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    holder: ObjectKind,
    id: &str,
    at: i64,
    out: &mut Vec<ClearedReference>,
) -> Result<(), StoreError> {
    let table = record_table(holder);
    let sql = format!("SELECT id, CAST(custom_fields AS TEXT) AS cf FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id <> $3 AND CAST(custom_fields AS TEXT) LIKE $4 ESCAPE '\\'");
    let q = tenant_query::<U::Db>(&sql, tenant)
        .arg(id)
        .arg(like_pattern(id));
    let rows = tx
        .all(q, |r| Ok((r.col::<String>("id")?, r.col::<String>("cf")?)))
        .await?;
    let update = format!(
        "UPDATE {table} SET custom_fields = $4{}, version = version + 1, updated_at = $5 WHERE workspace_id = $1 AND mode = $2 AND id = $3 RETURNING version",
        U::JSON
    );
    for (record_id, cf) in rows {
        let mut map: Map<String, Value> =
            serde_json::from_str(&cf).map_err(|_| corrupt("custom_fields"))?;
        let keys: Vec<String> = map
            .iter()
            .filter(|(_, v)| v.as_str() == Some(id))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            continue;
        }
        for k in &keys {
            map.remove(k);
        }
        let q = tenant_query::<U::Db>(&update, tenant)
            .arg(record_id.as_str())
            .arg(Value::Object(map).to_string())
            .arg(at);
        let version = tx
            .optional(q, |r| r.col::<i64>("version"))
            .await?
            .unwrap_or_default();
        out.extend(keys.into_iter().map(|k| ClearedReference {
            object: holder,
            id: record_id.clone(),
            field: format!("custom_fields.{k}"),
            version,
        }));
    }
    Ok(())
}

/// `impl EraseRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_erase_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::EraseRepo, $tx, erase, [
            fn erase_record(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, id: &str, now: $crate::reexport::Timestamp) -> Result<Option<$crate::reexport::Erasure>, $crate::reexport::StoreError>;
        ], []);
    };
}
