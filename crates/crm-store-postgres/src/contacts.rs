//! Contacts (`ContactRepo`), and the contact written outside a transaction
//! (`Store::insert_contact_alone`).

use async_trait::async_trait;
use crm_app::{
    ports::{ContactFilter, ContactRepo, RecordRepo, Reference, Referent, Slice},
    StoreError,
};
use crm_domain::{
    history::Change, CompanyId, Contact, ContactId, Email, Event, Tenant, Timestamp, UserId,
};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::binds::bind_contact;

use crate::{
    records::push_reference_guard,
    rows::{self, get},
    search::{planned_per_needle, search_filter, search_page},
    tx::{and_equals, json_text, slice_clause_on, tenant_query, tenant_where, PostgresTx},
};

impl PostgresTx {
    /// `Store::insert_contact_alone`, on a connection outside any transaction: the contact's
    /// INSERT (guarded by its references, as in `insert_contact`), its event's and the event's
    /// queue row and its history entry as one statement, which Postgres runs atomically on its
    /// own. The event and the entry are written only when the contact was (`EXISTS (SELECT 1
    /// FROM c)`), so a contact skipped by its guard or its email writes nothing at all.
    pub(crate) async fn insert_contact_alone(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
        event: &Event,
        change: &Change,
    ) -> Result<(), StoreError> {
        let mut sql = format!("WITH c AS ({INSERT_CONTACT}");
        push_reference_guard(&mut sql, refs, 23);
        sql.push_str(
            " ON CONFLICT DO NOTHING RETURNING 1),
              e AS (INSERT INTO events (workspace_id, mode, id, type, created_at, body)
                    SELECT $1, $2, $17, $18, $19, $20::json WHERE EXISTS (SELECT 1 FROM c)
                    RETURNING workspace_id, mode, id, type, created_at),
              h AS (INSERT INTO record_changes (workspace_id, mode, record_id, id, object, body)
                    SELECT $1, $2, $3, $21, 'contact', $22::jsonb WHERE EXISTS (SELECT 1 FROM c))
             INSERT INTO event_dispatch_queue (workspace_id, mode, id, type, created_at) SELECT * FROM e",
        );
        let q = bind_contact(
            tenant_query(&sql, tenant)
                .bind(c.id.as_str())
                .bind(c.created_at.millis()),
            c,
        )
        .bind(event.id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.created_at.millis())
        .bind(crm_store_sql::stored::event::event_json(event))
        .bind(change.id.as_str())
        .bind(crm_store_sql::stored::history::change_json(change).to_string());
        let q = refs.iter().fold(q, |q, r| q.bind(r.id));
        match self.execute(q).await? {
            0 => Err(self.why_not_inserted(tenant, refs).await?),
            _ => Ok(()),
        }
    }

    /// Why an insert guarded by `refs` wrote nothing: the first missing reference, else the
    /// uniqueness rule its `ON CONFLICT DO NOTHING` hit. Only failed inserts pay these reads.
    async fn why_not_inserted(
        &mut self,
        tenant: &Tenant,
        refs: &[Reference<'_>],
    ) -> Result<StoreError, StoreError> {
        for (i, r) in refs.iter().enumerate() {
            let exists = match r.referent {
                Referent::Record(object) => self.record_exists(tenant, object, r.id).await?,
                Referent::User => self.owner_exists(tenant, r.id).await?,
            };
            if !exists {
                return Ok(StoreError::MissingReference(i));
            }
        }
        Ok(StoreError::Duplicate)
    }
}

/// One contact's INSERT, its values bound by `tenant_query`, the id and `created_at`, then
/// [`bind_contact`]; a reference guard (`push_reference_guard`) may follow.
const INSERT_CONTACT: &str = "INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url,
                                   company_id, type, owner_id, custom_fields, updated_at, version, deleted_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16";

#[async_trait]
impl ContactRepo for PostgresTx {
    async fn insert_contact(
        &mut self,
        tenant: &Tenant,
        c: &Contact,
        refs: &[Reference<'_>],
    ) -> Result<(), StoreError> {
        // The references are checked by the INSERT itself (one round trip for both); ON
        // CONFLICT, unlike a failed INSERT, leaves the transaction usable.
        let mut sql = String::from(INSERT_CONTACT);
        push_reference_guard(&mut sql, refs, 17);
        sql.push_str(" ON CONFLICT DO NOTHING");
        let q = tenant_query(&sql, tenant)
            .bind(c.id.as_str())
            .bind(c.created_at.millis());
        let q = refs.iter().fold(bind_contact(q, c), |q, r| q.bind(r.id));
        match self.execute(q).await? {
            0 => Err(self.why_not_inserted(tenant, refs).await?),
            _ => Ok(()),
        }
    }

    async fn insert_contacts(
        &mut self,
        tenant: &Tenant,
        contacts: &[&Contact],
    ) -> Result<Vec<ContactId>, StoreError> {
        // One statement over arrays, so that its text (and its prepared plan) is the same for
        // any number of contacts. `ORDER BY n` inserts them in the caller's order, so of two
        // with one email the first is kept; `ON CONFLICT DO NOTHING` skips the later one and any
        // whose email is taken, the guard any whose company does not exist.
        let col =
            |f: fn(&Contact) -> Option<&str>| contacts.iter().map(|c| f(c)).collect::<Vec<_>>();
        let q = tenant_query(
            "INSERT INTO contacts (workspace_id, mode, id, created_at, first_name, last_name, email, phone, linkedin_url,
                                   company_id, type, owner_id, custom_fields, updated_at, version, deleted_at)
             SELECT $1, $2, v.id, v.created_at, v.first_name, v.last_name, v.email, v.phone, v.linkedin_url,
                    v.company_id, v.type, v.owner_id, v.custom_fields::jsonb, v.updated_at, v.version, v.deleted_at
             FROM unnest($3::text[], $4::int8[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                         $12::text[], $13::text[], $14::int8[], $15::int8[], $16::int8[])
                  WITH ORDINALITY AS v(id, created_at, first_name, last_name, email, phone, linkedin_url, company_id, type,
                                       owner_id, custom_fields, updated_at, version, deleted_at, n)
             WHERE v.company_id IS NULL
                OR EXISTS (SELECT 1 FROM companies c WHERE c.workspace_id = $1 AND c.mode = $2 AND c.id = v.company_id COLLATE \"C\")
             ORDER BY v.n
             ON CONFLICT DO NOTHING
             RETURNING id",
            tenant,
        )
        .bind(contacts.iter().map(|c| c.id.as_str()).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.created_at.millis()).collect::<Vec<_>>())
        .bind(col(|c| c.first_name.as_deref()))
        .bind(col(|c| c.last_name.as_deref()))
        .bind(col(|c| c.email.as_ref().map(Email::as_str)))
        .bind(col(|c| c.phone.as_deref()))
        .bind(col(|c| c.linkedin_url.as_deref()))
        .bind(col(|c| c.company_id.as_ref().map(CompanyId::as_str)))
        .bind(col(|c| c.contact_type.as_deref()))
        .bind(col(|c| c.owner_id.as_ref().map(UserId::as_str)))
        .bind(contacts.iter().map(|c| json_text(&c.custom_fields)).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.updated_at.millis()).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.version).collect::<Vec<_>>())
        .bind(contacts.iter().map(|c| c.deleted_at.map(Timestamp::millis)).collect::<Vec<_>>());
        self.all(q, |r| Ok(ContactId::from_trusted(get(r, "id")?)))
            .await
    }

    async fn get_contact(
        &mut self,
        tenant: &Tenant,
        id: &ContactId,
    ) -> Result<Option<Contact>, StoreError> {
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::CONTACT_COLUMNS,
            self.for_update()
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::contact)
            .await
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
        self.optional(
            tenant_query(&sql, tenant).bind(email.as_str()),
            rows::contact,
        )
        .await
    }

    async fn contacts_by_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[Email],
    ) -> Result<Vec<Contact>, StoreError> {
        if emails.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {} FROM contacts WHERE workspace_id = $1 AND mode = $2 AND email = ANY($3) AND merged_into IS NULL",
            rows::CONTACT_COLUMNS
        );
        let emails: Vec<&str> = emails.iter().map(Email::as_str).collect();
        self.all(tenant_query(&sql, tenant).bind(emails), rows::contact)
            .await
    }

    async fn update_contacts(
        &mut self,
        tenant: &Tenant,
        updates: &[(&Contact, i64)],
    ) -> Result<Vec<ContactId>, StoreError> {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        // One statement over arrays, as `insert_contacts`: its text is the same for any number.
        let col =
            |f: fn(&Contact) -> Option<&str>| updates.iter().map(|(c, _)| f(c)).collect::<Vec<_>>();
        let q = tenant_query(
            "UPDATE contacts c SET first_name = v.first_name, last_name = v.last_name, phone = v.phone,
                    linkedin_url = v.linkedin_url, company_id = v.company_id, type = v.type, owner_id = v.owner_id,
                    custom_fields = v.custom_fields::jsonb, updated_at = v.updated_at, version = v.version,
                    deleted_at = v.deleted_at
             FROM unnest($3::text[], $4::int8[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                         $11::text[], $12::text[], $13::int8[], $14::int8[], $15::int8[])
                  AS v(id, expected, first_name, last_name, phone, linkedin_url, company_id, type, owner_id, custom_fields,
                       updated_at, version, deleted_at)
             WHERE c.workspace_id = $1 AND c.mode = $2 AND c.id = v.id COLLATE \"C\" AND c.version = v.expected
             RETURNING c.id",
            tenant,
        )
        .bind(updates.iter().map(|(c, _)| c.id.as_str()).collect::<Vec<_>>())
        .bind(updates.iter().map(|(_, v)| *v).collect::<Vec<_>>())
        .bind(col(|c| c.first_name.as_deref()))
        .bind(col(|c| c.last_name.as_deref()))
        .bind(col(|c| c.phone.as_deref()))
        .bind(col(|c| c.linkedin_url.as_deref()))
        .bind(col(|c| c.company_id.as_ref().map(CompanyId::as_str)))
        .bind(col(|c| c.contact_type.as_deref()))
        .bind(col(|c| c.owner_id.as_ref().map(UserId::as_str)))
        .bind(updates.iter().map(|(c, _)| json_text(&c.custom_fields)).collect::<Vec<_>>())
        .bind(updates.iter().map(|(c, _)| c.updated_at.millis()).collect::<Vec<_>>())
        .bind(updates.iter().map(|(c, _)| c.version).collect::<Vec<_>>())
        .bind(updates.iter().map(|(c, _)| c.deleted_at.map(Timestamp::millis)).collect::<Vec<_>>());
        self.all(q, |r| Ok(ContactId::from_trusted(get(r, "id")?)))
            .await
    }

    async fn update_contact(&mut self, tenant: &Tenant, c: &Contact) -> Result<(), StoreError> {
        // Most updates keep the email, and then the UPDATE cannot break its uniqueness (the
        // only unique index on the table's own columns): it is sent without the savepoint that
        // lets the transaction survive a violation, two round trips fewer. One that changes
        // the email, or finds the row stale, is sent again behind it.
        let same_email = tenant_query(
            "UPDATE contacts SET first_name = $5, last_name = $6, email = $7, phone = $8, linkedin_url = $9, company_id = $10,
                    type = $11, owner_id = $12, custom_fields = $13::jsonb, updated_at = $14, version = $15, deleted_at = $16
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4 AND email IS NOT DISTINCT FROM $7",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.version - 1);
        if self.execute(bind_contact(same_email, c)).await? == 1 {
            return Ok(());
        }
        let q = tenant_query(
            "UPDATE contacts SET first_name = $5, last_name = $6, email = $7, phone = $8, linkedin_url = $9, company_id = $10,
                    type = $11, owner_id = $12, custom_fields = $13::jsonb, updated_at = $14, version = $15, deleted_at = $16
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4",
            tenant,
        )
        .bind(c.id.as_str())
        .bind(c.version - 1);
        match self.execute_unique(bind_contact(q, c)).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
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
        if filter.custom_fields.is_empty() && !indexed_filter && filter.q.is_some() {
            let table = ("contacts", rows::CONTACT_COLUMNS);
            return search_page(
                self,
                tenant,
                table,
                slice,
                &|qb| contact_conditions(qb, filter),
                rows::contact,
                |c| c.id.as_str(),
            )
            .await;
        }
        let (mut qb, id_column) = match filter.custom_fields.split_first() {
            None => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
                    "SELECT {} FROM contacts",
                    rows::CONTACT_COLUMNS
                ));
                tenant_where(&mut qb, tenant);
                (qb, "id")
            }
            // Driven by the first custom-field filter's key range, which is in id order: the page
            // is the first `limit` rows of that range that pass the other filters.
            Some((first, rest)) => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
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
                    .push(" AND v.value = ")
                    .push_bind(indexed_value(&first.value))
                    .push("::jsonb");
                for f in rest {
                    qb.push(" AND EXISTS (SELECT 1 FROM contact_field_values w WHERE w.workspace_id = v.workspace_id AND w.mode = v.mode AND w.field_key = ")
                        .push_bind(f.key.as_str())
                        .push(" AND w.value = ")
                        .push_bind(indexed_value(&f.value))
                        .push("::jsonb AND w.contact_id = v.contact_id)");
                }
                for f in &filter.custom_fields {
                    if is_truncated(&f.value) {
                        // `->` then `@>`: equal to a string, or an element of a multiselect array.
                        qb.push(" AND (c.custom_fields -> ")
                            .push_bind(f.key.as_str())
                            .push(") @> ")
                            .push_bind(f.value.to_string())
                            .push("::jsonb");
                    }
                }
                (qb, "v.contact_id")
            }
        };
        contact_conditions(&mut qb, filter);
        slice_clause_on(&mut qb, id_column, slice);
        self.all(
            planned_per_needle(&mut qb, filter.q.is_some()),
            rows::contact,
        )
        .await
    }
}

/// A contact list's conditions but the custom fields', as ` AND ...` clauses.
fn contact_conditions<'a>(qb: &mut QueryBuilder<'a, Postgres>, filter: &'a ContactFilter) {
    // Merged tombstones are never listed, not even with `include_deleted` (decisions §18).
    qb.push(if filter.include_deleted {
        " AND merged_into IS NULL"
    } else {
        " AND deleted_at IS NULL"
    });
    and_equals(qb, "email", filter.email.as_ref().map(Email::as_str));
    and_equals(
        qb,
        "company_id",
        filter.company_id.as_ref().map(CompanyId::as_str),
    );
    and_equals(qb, "type", filter.contact_type.as_deref());
    and_equals(qb, "owner_id", filter.owner_id.as_ref().map(UserId::as_str));
    if let Some(q) = &filter.q {
        search_filter(qb, q);
    }
}

/// Text custom-field values are keyed by their first [`INDEXED_TEXT_CHARS`] characters
/// (migration 0010: B-tree entries are bounded).
const INDEXED_TEXT_CHARS: usize = 200;

/// A filter value as `contact_field_values.value` holds it, as JSON text.
fn indexed_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) if is_truncated(value) => {
            serde_json::Value::String(s.chars().take(INDEXED_TEXT_CHARS).collect()).to_string()
        }
        other => other.to_string(),
    }
}

fn is_truncated(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.chars().nth(INDEXED_TEXT_CHARS).is_some())
}
