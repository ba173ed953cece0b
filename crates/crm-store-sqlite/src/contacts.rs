//! Contacts (`ContactRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{ContactFilter, ContactRepo, RecordRepo, Reference, Referent, Slice},
    StoreError,
};
use crm_domain::{CompanyId, Contact, ContactId, Email, Tenant, Timestamp, UserId};
use sqlx::{QueryBuilder, Row, Sqlite};

use crm_store_sql::binds::bind_contact;

use crate::{
    backend,
    records::record_table,
    rows,
    search::{push_not_deleted, push_search, search_page, trigram_needle},
    tx::{is_unique_violation, json_text, slice_clause_on, tenant_where, SqliteTx},
};

#[async_trait]
impl ContactRepo for SqliteTx {
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError> {
        // The references are checked by the INSERT itself, as on Postgres: every statement is a
        // round trip to the connection's thread, taken while the write lock is held. (`WHERE
        // true` keeps SQLite from reading `ON CONFLICT` as part of the SELECT.)
        let mut sql = String::from(
            "INSERT INTO contacts (first_name, last_name, email, phone, linkedin_url, company_id, type, owner_id,
                                   custom_fields, updated_at, version, deleted_at, workspace_id, mode, id, created_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 WHERE true",
        );
        for (i, r) in refs.iter().enumerate() {
            let n = 17 + i;
            // An owner is a user of the workspace (users have no mode).
            sql.push_str(&match r.referent {
                Referent::Record(object) => format!(
                    " AND EXISTS (SELECT 1 FROM {} WHERE workspace_id = $13 AND mode = $14 AND id = ${n})",
                    record_table(object)
                ),
                Referent::User => {
                    format!(" AND EXISTS (SELECT 1 FROM users WHERE workspace_id = $13 AND id = ${n})")
                }
            });
        }
        sql.push_str(" ON CONFLICT DO NOTHING");
        let q = bind_contact(sqlx::query(&sql), c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.created_at.millis());
        let done = refs
            .iter()
            .fold(q, |q, r| q.bind(r.id))
            .execute(self.conn())
            .await
            .map_err(backend)?;
        if done.rows_affected() > 0 {
            return Ok(());
        }
        // Only a failed insert pays these reads: the first missing reference, else the
        // uniqueness rule `ON CONFLICT DO NOTHING` hit.
        for (i, r) in refs.iter().enumerate() {
            let exists = match r.referent {
                Referent::Record(object) => self.record_exists(tenant, object, r.id).await?,
                Referent::User => self.owner_exists(tenant, r.id).await?,
            };
            if !exists {
                return Err(StoreError::MissingReference(i));
            }
        }
        Err(StoreError::Duplicate)
    }

    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        // One statement per 500 contacts (16 parameters each, under SQLite's 32,766): every
        // statement is a round trip to the connection's thread under the write lock. In the
        // caller's order (`ORDER BY n`), so of two with one email the first is kept.
        let mut inserted = Vec::with_capacity(contacts.len());
        for chunk in contacts.chunks(500) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "WITH v(n, id, created_at, first_name, last_name, email, phone, linkedin_url, company_id, type, owner_id,
                        custom_fields, updated_at, version, deleted_at) AS (",
            );
            qb.push_values(chunk.iter().enumerate(), |mut b, (n, c)| {
                b.push_bind(n as i64)
                    .push_bind(c.id.as_str())
                    .push_bind(c.created_at.millis())
                    .push_bind(c.first_name.as_deref())
                    .push_bind(c.last_name.as_deref())
                    .push_bind(c.email.as_ref().map(Email::as_str))
                    .push_bind(c.phone.as_deref())
                    .push_bind(c.linkedin_url.as_deref())
                    .push_bind(c.company_id.as_ref().map(CompanyId::as_str))
                    .push_bind(c.contact_type.as_deref())
                    .push_bind(c.owner_id.as_ref().map(UserId::as_str))
                    .push_bind(json_text(&c.custom_fields))
                    .push_bind(c.updated_at.millis())
                    .push_bind(c.version)
                    .push_bind(c.deleted_at.map(Timestamp::millis));
            });
            qb.push(
                ") INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url, company_id,
                                         type, owner_id, custom_fields, updated_at, version, deleted_at)
                  SELECT w.workspace_id, w.mode, v.id, v.created_at, v.first_name, v.last_name, v.email, v.phone, v.linkedin_url,
                         v.company_id, v.type, v.owner_id, v.custom_fields, v.updated_at, v.version, v.deleted_at
                  FROM v, (SELECT ",
            );
            qb.push_bind(tenant.workspace_id.as_str()).push(" AS workspace_id, ").push_bind(tenant.mode.as_str()).push(
                " AS mode) w
                  WHERE v.company_id IS NULL
                     OR EXISTS (SELECT 1 FROM companies c WHERE c.workspace_id = w.workspace_id AND c.mode = w.mode AND c.id = v.company_id)
                  ORDER BY v.n
                  ON CONFLICT DO NOTHING
                  RETURNING id",
            );
            let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
            for row in &rows {
                inserted.push(ContactId::from_trusted(
                    row.try_get::<String, _>("id").map_err(backend)?,
                ));
            }
        }
        Ok(inserted)
    }

    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::CONTACT_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::contact).transpose()
    }

    async fn get_contact_by_email(
        &mut self,
        tenant: &Tenant,
        email: &Email,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND email = $3 AND merged_into IS NULL",
            rows::CONTACT_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(email.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::contact).transpose()
    }

    async fn contacts_by_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[Email],
    ) -> Result<Vec<Contact>, StoreError> {
        let mut found = Vec::with_capacity(emails.len());
        // At most 1,000 emails a statement, within SQLite's bind limit.
        for part in emails.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {} FROM contacts",
                rows::CONTACT_COLUMNS
            ));
            tenant_where(&mut qb, tenant);
            qb.push(" AND merged_into IS NULL AND email IN (");
            let mut list = qb.separated(", ");
            for e in part {
                list.push_bind(e.as_str());
            }
            qb.push(")");
            let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
            for row in &rows {
                found.push(rows::contact(row)?);
            }
        }
        Ok(found)
    }

    async fn update_contacts(
        &mut self,
        tenant: &Tenant,
        updates: &[(&Contact, i64)],
    ) -> Result<Vec<ContactId>, StoreError> {
        // One statement per 500 contacts (13 parameters each), as `insert_contacts`.
        let mut written = Vec::with_capacity(updates.len());
        for part in updates.chunks(500) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "WITH v(id, expected, first_name, last_name, phone, linkedin_url, company_id, type, owner_id,
                        custom_fields, updated_at, version, deleted_at) AS (",
            );
            qb.push_values(part, |mut b, (c, expected)| {
                b.push_bind(c.id.as_str())
                    .push_bind(*expected)
                    .push_bind(c.first_name.as_deref())
                    .push_bind(c.last_name.as_deref())
                    .push_bind(c.phone.as_deref())
                    .push_bind(c.linkedin_url.as_deref())
                    .push_bind(c.company_id.as_ref().map(CompanyId::as_str))
                    .push_bind(c.contact_type.as_deref())
                    .push_bind(c.owner_id.as_ref().map(UserId::as_str))
                    .push_bind(json_text(&c.custom_fields))
                    .push_bind(c.updated_at.millis())
                    .push_bind(c.version)
                    .push_bind(c.deleted_at.map(Timestamp::millis));
            });
            qb.push(
                ") UPDATE contacts SET first_name = v.first_name, last_name = v.last_name, phone = v.phone,
                        linkedin_url = v.linkedin_url, company_id = v.company_id, type = v.type, owner_id = v.owner_id,
                        custom_fields = v.custom_fields, updated_at = v.updated_at, version = v.version,
                        deleted_at = v.deleted_at
                  FROM v WHERE contacts.workspace_id = ",
            );
            qb.push_bind(tenant.workspace_id.as_str())
                .push(" AND contacts.mode = ")
                .push_bind(tenant.mode.as_str())
                .push(" AND contacts.id = v.id AND contacts.version = v.expected RETURNING contacts.id");
            let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
            for row in &rows {
                written.push(ContactId::from_trusted(
                    row.try_get::<String, _>(0).map_err(backend)?,
                ));
            }
        }
        Ok(written)
    }

    async fn update_contact(&mut self, tenant: &Tenant, c: &Contact) -> Result<(), StoreError> {
        let q = sqlx::query(
            "UPDATE contacts SET first_name = $1, last_name = $2, email = $3, phone = $4, linkedin_url = $5, company_id = $6,
                    type = $7, owner_id = $8, custom_fields = $9, updated_at = $10, version = $11, deleted_at = $12
             WHERE workspace_id = $13 AND mode = $14 AND id = $15 AND version = $16",
        );
        let done = bind_contact(q, c)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(c.id.as_str())
            .bind(c.version - 1)
            .execute(self.conn())
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Duplicate
                } else {
                    backend(e)
                }
            })?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn list_contacts(
        &mut self,
        tenant: &Tenant,
        filter: &ContactFilter,
        slice: &Slice,
    ) -> Result<Vec<Contact>, StoreError> {
        let indexed_filter = filter.email.is_some()
            || filter.company_id.is_some()
            || filter.contact_type.is_some()
            || filter.owner_id.is_some();
        if let Some(q) = trigram_needle(filter.q.as_ref())
            .filter(|_| filter.custom_fields.is_empty() && !indexed_filter)
        {
            return search_page(
                self,
                tenant,
                ("contacts", "contacts_fts", rows::CONTACT_COLUMNS),
                q,
                slice,
                filter.include_deleted,
                rows::contact,
                |c| c.id.as_str(),
            )
            .await;
        }
        let (mut qb, id_column) = match filter.custom_fields.split_first() {
            None => {
                let mut qb = QueryBuilder::<Sqlite>::new(format!(
                    "SELECT {} FROM contacts",
                    rows::CONTACT_COLUMNS
                ));
                tenant_where(&mut qb, tenant);
                (qb, "id")
            }
            // Driven by the first custom-field filter's key range, which is in id order: the page
            // is the first `limit` rows of that range that pass the other filters.
            Some((first, rest)) => {
                let mut qb = QueryBuilder::<Sqlite>::new(format!(
                    "SELECT {} FROM contact_field_values v JOIN contacts c \
                     ON c.workspace_id = v.workspace_id AND c.mode = v.mode AND c.id = v.contact_id \
                     WHERE v.workspace_id = ",
                    rows::CONTACT_COLUMNS
                ));
                qb.push_bind(tenant.workspace_id.as_str())
                    .push(" AND v.mode = ")
                    .push_bind(tenant.mode.as_str());
                qb.push(" AND v.field_key = ")
                    .push_bind(first.key.as_str())
                    .push(" AND v.value = ");
                push_field_value(&mut qb, &first.value);
                for f in rest {
                    qb.push(" AND EXISTS (SELECT 1 FROM contact_field_values w WHERE w.workspace_id = v.workspace_id AND w.mode = v.mode AND w.field_key = ")
                        .push_bind(f.key.as_str())
                        .push(" AND w.value = ");
                    push_field_value(&mut qb, &f.value);
                    qb.push(" AND w.contact_id = v.contact_id)");
                }
                for f in &filter.custom_fields {
                    if let Some(full) = f
                        .value
                        .as_str()
                        .filter(|s| s.chars().nth(INDEXED_TEXT_CHARS).is_some())
                    {
                        // json_each of a path yields the value itself, or each element of an array.
                        qb.push(" AND EXISTS (SELECT 1 FROM json_each(c.custom_fields, ")
                            .push_bind(format!("$.{}", f.key))
                            .push(") e WHERE e.value = ")
                            .push_bind(full.to_owned())
                            .push(")");
                    }
                }
                (qb, "v.contact_id")
            }
        };
        push_not_deleted(&mut qb, "contacts", filter.include_deleted);
        if let Some(email) = &filter.email {
            qb.push(" AND email = ").push_bind(email.as_str());
        }
        if let Some(company) = &filter.company_id {
            qb.push(" AND company_id = ").push_bind(company.as_str());
        }
        if let Some(t) = &filter.contact_type {
            qb.push(" AND type = ").push_bind(t.as_str());
        }
        if let Some(owner) = &filter.owner_id {
            qb.push(" AND owner_id = ").push_bind(owner.as_str());
        }
        if let Some(q) = &filter.q {
            push_search(&mut qb, "contacts_fts", q);
        }
        slice_clause_on(&mut qb, id_column, slice);
        let rows = qb.build().fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(rows::contact).collect()
    }
}

/// Text custom-field values are keyed by their first [`INDEXED_TEXT_CHARS`] characters
/// (migration 0010, as on Postgres, so both stores answer alike).
const INDEXED_TEXT_CHARS: usize = 200;

/// Binds a filter value as `contact_field_values.value` holds it: the SQL value `json_each`
/// gives (text, an integer or a real; booleans as 1 and 0), text cut to its indexed prefix.
fn push_field_value(qb: &mut QueryBuilder<'_, Sqlite>, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => qb.push_bind(s.chars().take(INDEXED_TEXT_CHARS).collect::<String>()),
        Value::Bool(b) => qb.push_bind(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => qb.push_bind(i),
            None => qb.push_bind(n.as_f64().unwrap_or(f64::NAN)),
        },
        // The registry only yields strings, numbers and booleans; nothing is stored as null.
        _ => qb.push("NULL"),
    };
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    /// The DELETE of each trigger that removes a contact's old custom-field values, with the
    /// trigger's `old.<column>` references as parameters.
    fn trigger_delete(trigger_sql: &str) -> String {
        let start = trigger_sql
            .find("DELETE FROM")
            .expect("the trigger deletes");
        let end = start + trigger_sql[start..].find(");").expect("the DELETE ends") + 1;
        ["workspace_id", "mode", "id", "custom_fields"]
            .iter()
            .fold(trigger_sql[start..end].to_owned(), |sql, column| {
                sql.replace(&format!("old.{column}"), "?")
            })
    }

    /// A contact's update or delete finds its old values by their whole key: one primary-key
    /// lookup each, not a walk of the workspace's values. (Fails with the triggers of migration
    /// 0010, whose DELETE searched by workspace and mode only.)
    #[tokio::test]
    async fn old_custom_field_values_are_deleted_by_their_key() {
        let temp = crate::TempStore::migrated("fv").await;
        let store = &temp.store;
        let mut conn = store.writer.acquire().await.unwrap();
        for trigger in ["contact_field_values_au", "contact_field_values_ad"] {
            let sql: String = sqlx::query("SELECT sql FROM sqlite_master WHERE name = $1")
                .bind(trigger)
                .fetch_one(&mut *conn)
                .await
                .unwrap()
                .get(0);
            let delete = trigger_delete(&sql);
            let explain = format!("EXPLAIN QUERY PLAN {delete}");
            let mut q = sqlx::query(&explain);
            for _ in 0..delete.matches('?').count() {
                q = q.bind("{}");
            }
            let plan: Vec<String> = q
                .fetch_all(&mut *conn)
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<String, _>("detail"))
                .collect();
            assert!(
                plan.iter().any(|d| d == "SEARCH contact_field_values USING PRIMARY KEY (workspace_id=? AND mode=? AND field_key=? AND value=? AND contact_id=?)"),
                "{trigger}: {plan:?}"
            );
        }
        drop(conn);
        temp.remove().await;
    }
}
