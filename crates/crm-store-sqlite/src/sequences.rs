//! Sequences and their enrollments over SQLite.

use async_trait::async_trait;
use crm_app::{
    ports::{ClaimedEnrollment, SequenceRepo, Slice},
    StoreError,
};
use crm_domain::{
    mail::EmailMessage,
    sequence::{Enrollment, EnrollmentState, ExitReason, Sequence, SequenceDef, SourceObject},
    Activity, Contact, ContactId, Deal, DealId, EnrollmentId, EventType, Mode, SequenceId, Tenant,
    Timestamp, WorkspaceId,
};
use serde_json::Value;
use sqlx::{sqlite::SqliteRow, QueryBuilder, Sqlite};

use crate::{
    backend,
    rows::{self, corrupt, get, json_value},
    tx::{slice_clause, tenant_where},
    SqliteTx,
};

const SEQUENCE_COLUMNS: &str = "id, name, trigger_def, exit_when, steps, enabled, \
     enroll_existing, created_at, updated_at, version";

const ENROLLMENT_COLUMNS: &str =
    "id, sequence_id, contact_id, source_object, source_id, state, exit_reason, steps_sent, next_send_at, enrolled_at, updated_at, ended_at";

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

fn tenant_query<'q>(sql: &'q str, tenant: &'q Tenant) -> SqliteQuery<'q> {
    sqlx::query(sql)
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
}

impl SqliteTx {
    fn for_update(&self) -> &'static str {
        ""
    }

    async fn optional<T>(
        &mut self,
        q: SqliteQuery<'_>,
        map: impl Fn(&SqliteRow) -> Result<T, StoreError> + Send,
    ) -> Result<Option<T>, StoreError> {
        let row = q.fetch_optional(self.conn()).await.map_err(backend)?;
        row.as_ref().map(map).transpose()
    }

    async fn all<T>(
        &mut self,
        q: SqliteQuery<'_>,
        map: impl Fn(&SqliteRow) -> Result<T, StoreError> + Send,
    ) -> Result<Vec<T>, StoreError> {
        let rows = q.fetch_all(self.conn()).await.map_err(backend)?;
        rows.iter().map(map).collect()
    }

    async fn execute(&mut self, q: SqliteQuery<'_>) -> Result<u64, StoreError> {
        Ok(q.execute(self.conn())
            .await
            .map_err(backend)?
            .rows_affected())
    }
}

/// `WHERE <tenant> AND <column> IN (<values>)`.
fn tenant_in<'a>(
    qb: &mut QueryBuilder<'a, Sqlite>,
    tenant: &'a Tenant,
    column: &str,
    values: impl IntoIterator<Item = &'a str>,
) {
    tenant_where(qb, tenant);
    qb.push(format!(" AND {column} IN ("));
    let mut list = qb.separated(", ");
    for v in values {
        list.push_bind(v);
    }
    qb.push(")");
}

fn sequence(row: &SqliteRow) -> Result<Sequence, StoreError> {
    let def = SequenceDef::from_stored(
        get(row, "name")?,
        &json_value(row, "trigger_def")?,
        &json_value(row, "exit_when")?,
        &json_value(row, "steps")?,
    )
    .ok_or_else(|| corrupt("sequence"))?;
    Ok(Sequence {
        id: SequenceId::from_trusted(get(row, "id")?),
        def,
        enabled: get(row, "enabled")?,
        enroll_existing: get(row, "enroll_existing")?,
        created_at: Timestamp::from_millis(get(row, "created_at")?),
        updated_at: Timestamp::from_millis(get(row, "updated_at")?),
        version: get(row, "version")?,
    })
}

fn enrollment(row: &SqliteRow) -> Result<Enrollment, StoreError> {
    let ts = |c: &str| -> Result<Option<Timestamp>, StoreError> {
        Ok(get::<Option<i64>>(row, c)?.map(Timestamp::from_millis))
    };
    let exit_reason = match get::<Option<String>>(row, "exit_reason")? {
        Some(r) => Some(ExitReason::parse(&r).ok_or_else(|| corrupt("exit_reason"))?),
        None => None,
    };
    Ok(Enrollment {
        id: EnrollmentId::from_trusted(get(row, "id")?),
        sequence_id: SequenceId::from_trusted(get(row, "sequence_id")?),
        contact_id: ContactId::from_trusted(get(row, "contact_id")?),
        source_object: SourceObject::parse(&get::<String>(row, "source_object")?)
            .ok_or_else(|| corrupt("source_object"))?,
        source_id: get(row, "source_id")?,
        state: EnrollmentState::parse(&get::<String>(row, "state")?)
            .ok_or_else(|| corrupt("state"))?,
        exit_reason,
        steps_sent: u32::try_from(get::<i32>(row, "steps_sent")?)
            .map_err(|_| corrupt("steps_sent"))?,
        next_send_at: ts("next_send_at")?,
        enrolled_at: Timestamp::from_millis(get(row, "enrolled_at")?),
        updated_at: Timestamp::from_millis(get(row, "updated_at")?),
        ended_at: ts("ended_at")?,
    })
}

fn claimed(row: &SqliteRow) -> Result<ClaimedEnrollment, StoreError> {
    let mode = Mode::parse(&get::<String>(row, "mode")?).ok_or_else(|| corrupt("mode"))?;
    Ok(ClaimedEnrollment {
        tenant: Tenant {
            workspace_id: WorkspaceId::from_trusted(get(row, "workspace_id")?),
            mode,
        },
        enrollment: enrollment(row)?,
    })
}

fn trigger_event(s: &Sequence) -> Option<&'static str> {
    s.def.trigger.as_ref().map(|t| t.event.as_str())
}

fn bind_state<'q>(q: SqliteQuery<'q>, e: &'q Enrollment) -> SqliteQuery<'q> {
    q.bind(e.id.as_str())
        .bind(e.state.as_str())
        .bind(e.exit_reason.map(ExitReason::as_str))
        .bind(e.steps_sent as i32)
        .bind(e.next_send_at.map(Timestamp::millis))
        .bind(e.updated_at.millis())
        .bind(e.ended_at.map(Timestamp::millis))
}

#[async_trait]
impl SequenceRepo for SqliteTx {
    async fn insert_sequence(&mut self, tenant: &Tenant, s: &Sequence) -> Result<(), StoreError> {
        let q = tenant_query(
            "INSERT INTO sequences (workspace_id, mode, id, name, trigger_event, trigger_def, exit_when, steps, enabled, enroll_existing,
                                    created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            tenant,
        )
        .bind(s.id.as_str())
        .bind(&s.def.name)
        .bind(trigger_event(s))
        .bind(s.def.trigger_snapshot().to_string())
        .bind(s.def.exit_when_snapshot().to_string())
        .bind(s.def.steps_snapshot().to_string())
        .bind(s.enabled)
        .bind(s.enroll_existing)
        .bind(s.created_at.millis())
        .bind(s.updated_at.millis())
        .bind(s.version);
        self.execute(q).await?;
        Ok(())
    }

    async fn get_sequence(
        &mut self,
        tenant: &Tenant,
        id: &SequenceId,
    ) -> Result<Option<Sequence>, StoreError> {
        let sql = format!(
            "SELECT {SEQUENCE_COLUMNS} FROM sequences WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            self.for_update()
        );
        let q = tenant_query(&sql, tenant).bind(id.as_str());
        self.optional(q, sequence).await
    }

    async fn get_sequences(
        &mut self,
        tenant: &Tenant,
        ids: &[SequenceId],
    ) -> Result<Vec<Sequence>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
        tenant_in(&mut qb, tenant, "id", ids.iter().map(SequenceId::as_str));
        self.all(qb.build(), sequence).await
    }

    async fn update_sequence(&mut self, tenant: &Tenant, s: &Sequence) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE sequences SET name = $4, trigger_event = $5, trigger_def = $6, exit_when = $7, steps = $8, enabled = $9,
                    enroll_existing = $10, updated_at = $11, version = $12
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12 - 1",
            tenant,
        )
        .bind(s.id.as_str())
        .bind(&s.def.name)
        .bind(trigger_event(s))
        .bind(s.def.trigger_snapshot().to_string())
        .bind(s.def.exit_when_snapshot().to_string())
        .bind(s.def.steps_snapshot().to_string())
        .bind(s.enabled)
        .bind(s.enroll_existing)
        .bind(s.updated_at.millis())
        .bind(s.version);
        match self.execute(q).await? {
            1 => Ok(()),
            _ => Err(StoreError::Stale),
        }
    }

    async fn delete_sequence(
        &mut self,
        tenant: &Tenant,
        id: &SequenceId,
    ) -> Result<bool, StoreError> {
        let q = tenant_query(
            "DELETE FROM sequences WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_sequences(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Sequence>, StoreError> {
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
        tenant_where(&mut qb, tenant);
        slice_clause(&mut qb, slice);
        self.all(qb.build(), sequence).await
    }

    async fn triggered_sequences(
        &mut self,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Sequence>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb =
            QueryBuilder::<Sqlite>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
        tenant_in(
            &mut qb,
            tenant,
            "trigger_event",
            events.iter().map(|e| e.as_str()),
        );
        qb.push(" AND enabled = 1 ORDER BY id");
        self.all(qb.build(), sequence).await
    }

    async fn count_sequences(&mut self, tenant: &Tenant) -> Result<u64, StoreError> {
        let q = tenant_query(
            "SELECT COUNT(*) AS n FROM sequences WHERE workspace_id = $1 AND mode = $2",
            tenant,
        );
        let n = self.optional(q, |r| get::<i64>(r, "n")).await?.unwrap_or(0);
        Ok(n.max(0) as u64)
    }

    async fn insert_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<Vec<EnrollmentId>, StoreError> {
        let mut inserted = Vec::new();
        for chunk in enrollments.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO sequence_enrollments (workspace_id, mode, id, sequence_id, contact_id, source_object, source_id, state, exit_reason,
                 steps_sent, next_send_at, enrolled_at, updated_at, ended_at) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.sequence_id.as_str())
                    .push_bind(e.contact_id.as_str())
                    .push_bind(e.source_object.as_str())
                    .push_bind(e.source_id.as_str())
                    .push_bind(e.state.as_str())
                    .push_bind(e.exit_reason.map(ExitReason::as_str))
                    .push_bind(e.steps_sent as i32)
                    .push_bind(e.next_send_at.map(Timestamp::millis))
                    .push_bind(e.enrolled_at.millis())
                    .push_bind(e.updated_at.millis())
                    .push_bind(e.ended_at.map(Timestamp::millis));
            });
            qb.push(" ON CONFLICT DO NOTHING RETURNING id");
            let ids = self
                .all(qb.build(), |r| {
                    Ok(EnrollmentId::from_trusted(get(r, "id")?))
                })
                .await?;
            inserted.extend(ids);
        }
        Ok(inserted)
    }

    async fn get_enrollment(
        &mut self,
        tenant: &Tenant,
        seq: &SequenceId,
        id: &EnrollmentId,
    ) -> Result<Option<Enrollment>, StoreError> {
        let sql = format!(
            "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND sequence_id = $4{}",
            self.for_update()
        );
        self.optional(
            tenant_query(&sql, tenant)
                .bind(id.as_str())
                .bind(seq.as_str()),
            enrollment,
        )
        .await
    }

    async fn list_enrollments(
        &mut self,
        tenant: &Tenant,
        seq: &SequenceId,
        slice: &Slice,
    ) -> Result<Vec<Enrollment>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments"
        ));
        tenant_where(&mut qb, tenant);
        qb.push(" AND sequence_id = ").push_bind(seq.as_str());
        slice_clause(&mut qb, slice);
        self.all(qb.build(), enrollment).await
    }

    async fn active_enrollments_by_source(
        &mut self,
        tenant: &Tenant,
        source_ids: &[String],
    ) -> Result<Vec<Enrollment>, StoreError> {
        if source_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments"
        ));
        tenant_in(
            &mut qb,
            tenant,
            "source_id",
            source_ids.iter().map(String::as_str),
        );
        qb.push(" AND state = 'active' ORDER BY id");
        self.all(qb.build(), enrollment).await
    }

    async fn enrolled_contacts(
        &mut self,
        tenant: &Tenant,
        seq: &SequenceId,
        contacts: &[ContactId],
    ) -> Result<Vec<ContactId>, StoreError> {
        if contacts.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT contact_id FROM sequence_enrollments");
        tenant_in(
            &mut qb,
            tenant,
            "contact_id",
            contacts.iter().map(ContactId::as_str),
        );
        qb.push(" AND sequence_id = ").push_bind(seq.as_str());
        self.all(qb.build(), |r| {
            Ok(ContactId::from_trusted(get(r, "contact_id")?))
        })
        .await
    }

    async fn update_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<(), StoreError> {
        for e in enrollments {
            let q = tenant_query(
                "UPDATE sequence_enrollments SET state = $4, exit_reason = $5, steps_sent = $6, next_send_at = $7, updated_at = $8, ended_at = $9,
                        lease_holder = NULL, lease_until = NULL
                 WHERE workspace_id = $1 AND mode = $2 AND id = $3",
                tenant,
            );
            self.execute(bind_state(q, e)).await?;
        }
        Ok(())
    }

    async fn end_sequence_enrollments(
        &mut self,
        tenant: &Tenant,
        seq: &SequenceId,
        reason: ExitReason,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let q = tenant_query(
            "UPDATE sequence_enrollments SET state = 'exited', exit_reason = $4, next_send_at = NULL, updated_at = $5, ended_at = $5,
                    lease_holder = NULL, lease_until = NULL
             WHERE workspace_id = $1 AND mode = $2 AND sequence_id = $3 AND state = 'active'",
            tenant,
        )
        .bind(seq.as_str())
        .bind(reason.as_str())
        .bind(now.millis());
        self.execute(q).await
    }

    async fn lock_due_enrollments(
        &mut self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ClaimedEnrollment>, StoreError> {
        // The single writer is the lock: no other write transaction runs until this one ends.
        let sql = format!(
            "SELECT workspace_id, mode, {ENROLLMENT_COLUMNS} FROM sequence_enrollments
             WHERE state = 'active' AND next_send_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
             ORDER BY next_send_at LIMIT $2"
        );
        let q = sqlx::query(&sql).bind(now.millis()).bind(i64::from(limit));
        self.all(q, claimed).await
    }

    async fn hold_back_enrollments(
        &mut self,
        tenant: &Tenant,
        ids: &[EnrollmentId],
        holder: &str,
        until: Timestamp,
    ) -> Result<(), StoreError> {
        for chunk in ids.chunks(500) {
            let mut qb =
                QueryBuilder::<Sqlite>::new("UPDATE sequence_enrollments SET lease_holder = ");
            qb.push_bind(holder)
                .push(", lease_until = ")
                .push_bind(until.millis());
            tenant_in(
                &mut qb,
                tenant,
                "id",
                chunk.iter().map(EnrollmentId::as_str),
            );
            self.execute(qb.build()).await?;
        }
        Ok(())
    }

    /// One statement per 1,000 enrollments (see [`advance_query`]) instead of one per
    /// enrollment: each statement is a hand-off to the connection's thread, and a scheduler round
    /// advances hundreds.
    async fn advance_claimed_enrollments(
        &mut self,
        tenant: &Tenant,
        updates: &[(Enrollment, u32)],
    ) -> Result<Vec<EnrollmentId>, StoreError> {
        let mut written = Vec::with_capacity(updates.len());
        for chunk in updates.chunks(1000) {
            let mut qb = advance_query("", tenant, chunk);
            written.extend(
                self.all(qb.build(), |r| {
                    Ok(EnrollmentId::from_trusted(get(r, "id")?))
                })
                .await?,
            );
        }
        Ok(written)
    }

    async fn insert_step_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[EmailMessage],
        activities: &[Activity],
    ) -> Result<(), StoreError> {
        // Chunks keep each statement under the backend's limit of bound parameters.
        for chunk in emails.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO emails (workspace_id, mode, id, to_addr, from_addr, subject, html, text, status, error, source, contact_id, deal_id,
                 attempts, next_attempt_at, claimed_until, provider_message_id, created_at, sent_at) ",
            );
            qb.push_values(chunk, |mut b, e| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(e.id.as_str())
                    .push_bind(e.to.as_str())
                    .push_bind(e.from.as_str())
                    .push_bind(e.subject.as_str())
                    .push_bind(e.html.as_str())
                    .push_bind(e.text.as_str())
                    .push_bind(e.status.as_str())
                    .push_bind(e.error.as_deref())
                    .push_bind(e.source.snapshot().to_string())
                    .push_bind(e.contact_id.as_ref().map(ContactId::as_str))
                    .push_bind(e.deal_id.as_ref().map(DealId::as_str))
                    .push_bind(e.attempts as i32)
                    .push_bind(e.next_attempt_at.map(Timestamp::millis))
                    .push_bind(None::<i64>)
                    .push_bind(e.provider_message_id.as_deref())
                    .push_bind(e.created_at.millis())
                    .push_bind(e.sent_at.map(Timestamp::millis));
            });
            self.execute(qb.build()).await?;
        }
        for chunk in activities.chunks(1000) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, custom_fields, updated_at, version, created_at) ",
            );
            qb.push_values(chunk, |mut b, a| {
                b.push_bind(tenant.workspace_id.as_str())
                    .push_bind(tenant.mode.as_str())
                    .push_bind(a.id.as_str())
                    .push_bind(a.activity_type.as_str())
                    .push_bind(a.contact_id.as_ref().map(ContactId::as_str))
                    .push_bind(a.deal_id.as_ref().map(DealId::as_str))
                    .push_bind(a.body.as_deref())
                    .push_bind(a.occurred_at.millis())
                    .push_bind(Value::Object(a.custom_fields.clone()).to_string())
                    .push_bind(a.updated_at.millis())
                    .push_bind(a.version)
                    .push_bind(a.created_at.millis());
            });
            self.execute(qb.build()).await?;
        }
        Ok(())
    }

    async fn contacts_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[ContactId],
    ) -> Result<Vec<Contact>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut qb = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {} FROM contacts",
                rows::CONTACT_COLUMNS
            ));
            tenant_in(&mut qb, tenant, "id", chunk.iter().map(ContactId::as_str));
            out.extend(self.all(qb.build(), rows::contact).await?);
        }
        Ok(out)
    }

    async fn deals_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[DealId],
    ) -> Result<Vec<Deal>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut qb =
                QueryBuilder::<Sqlite>::new(format!("SELECT {} FROM deals", rows::DEAL_COLUMNS));
            tenant_in(&mut qb, tenant, "id", chunk.iter().map(DealId::as_str));
            out.extend(self.all(qb.build(), rows::deal).await?);
        }
        Ok(out)
    }
}

/// The advance of claimed enrollments to their new states, `prefix` put before it (`EXPLAIN
/// QUERY PLAN ` in the test of its plan): a CTE of the new states joined to the table by key,
/// written only while the enrollment is still active at the step it was claimed at. Each row of the CTE carries the whole primary key so that the join can only be
/// driven from the CTE, one key lookup per row. With the tenant bound once instead, SQLite (no
/// statistics) takes the tenant's key range for a few rows, walks every enrollment of the tenant
/// and looks each up in the CTE: a scan per round that grows with the table (at 10,000
/// enrollments the statement was 3 times slower, and the whole round twice).
fn advance_query<'a>(
    prefix: &str,
    tenant: &'a Tenant,
    chunk: &'a [(Enrollment, u32)],
) -> QueryBuilder<'a, Sqlite> {
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "{prefix}WITH v(workspace_id, mode, id, state, exit_reason, steps_sent, next_send_at, updated_at, ended_at, sent_before) AS ("
    ));
    qb.push_values(chunk, |mut b, (e, before)| {
        b.push_bind(tenant.workspace_id.as_str())
            .push_bind(tenant.mode.as_str())
            .push_bind(e.id.as_str())
            .push_bind(e.state.as_str())
            .push_bind(e.exit_reason.map(ExitReason::as_str))
            .push_bind(e.steps_sent as i32)
            .push_bind(e.next_send_at.map(Timestamp::millis))
            .push_bind(e.updated_at.millis())
            .push_bind(e.ended_at.map(Timestamp::millis))
            .push_bind(*before as i32);
    });
    // RETURNING sees only the updated table, and not through its alias.
    qb.push(
        ") UPDATE sequence_enrollments AS e SET state = v.state, exit_reason = v.exit_reason, steps_sent = v.steps_sent, \
         next_send_at = v.next_send_at, updated_at = v.updated_at, ended_at = v.ended_at, lease_holder = NULL, lease_until = NULL \
         FROM v WHERE e.workspace_id = v.workspace_id AND e.mode = v.mode AND e.id = v.id \
         AND e.state = 'active' AND e.steps_sent = v.sent_before \
         RETURNING id",
    );
    qb
}

#[cfg(test)]
mod tests {
    use crm_domain::{ContactId, EnrollmentId, Mode, Tenant, Timestamp, WorkspaceId};
    use crm_store_conformance::sequence_cases::sequence;
    use sqlx::Row;

    use super::*;

    /// The advance is driven from its CTE: one primary-key lookup per row, whatever the size of
    /// the tenant's enrollments. (Fails with the tenant bound once, as the advance was first
    /// written.)
    #[tokio::test]
    async fn the_advance_looks_each_enrollment_up_by_its_key() {
        let path =
            std::env::temp_dir().join(format!("crm-plan-{}.db", uuid::Uuid::now_v7().simple()));
        let store = crate::SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let tenant = Tenant {
            workspace_id: WorkspaceId::from_uuid(uuid::Uuid::now_v7()),
            mode: Mode::Test,
        };
        let seq = sequence(None, true);
        let now = Timestamp::from_millis(1_700_000_000_000);
        let updates: Vec<(Enrollment, u32)> = (0..500)
            .map(|_| {
                let contact = ContactId::from_uuid(uuid::Uuid::now_v7());
                let e = Enrollment::start(
                    EnrollmentId::from_uuid(uuid::Uuid::now_v7()),
                    &seq,
                    contact.clone(),
                    SourceObject::Contact,
                    contact.to_string(),
                    now,
                );
                (e, 0)
            })
            .collect();
        let mut conn = store.writer.acquire().await.unwrap();
        // The plan depends on the sizes the planner sees: a tenant with as many enrollments as the
        // benchmark's, and a scheduler round's 500 (the tenant-first form passes with 2).
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
             INSERT INTO sequence_enrollments (workspace_id, mode, id, sequence_id, contact_id, source_object, source_id, state,
                 steps_sent, next_send_at, enrolled_at, updated_at)
             SELECT $1, $2, printf('enr_%026d', i), 'seq_1', printf('con_%026d', i), 'contact', printf('con_%026d', i), 'active', 0, 0, 0, 0 FROM n",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .execute(&mut *conn)
        .await
        .unwrap();
        let mut qb = advance_query("EXPLAIN QUERY PLAN ", &tenant, &updates);
        let plan: Vec<String> = qb
            .build()
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("detail"))
            .collect();
        let scan_v = plan.iter().position(|d| d == "SCAN v");
        let lookup = plan.iter().position(|d| {
            d.starts_with("SEARCH e USING PRIMARY KEY (workspace_id=? AND mode=? AND id=?)")
        });
        assert!(
            matches!((scan_v, lookup), (Some(v), Some(e)) if v < e),
            "plan: {plan:?}"
        );
        drop(conn);
        store.close().await;
        let _ = std::fs::remove_file(&path);
    }
}
