//! Sequences and their enrollments over SQLite.

use crm_app::{ports::ClaimedEnrollment, StoreError};
use crm_domain::{
    mail::EmailMessage,
    sequence::{Enrollment, ExitReason},
    Activity, ContactId, DealId, EnrollmentId, SequenceId, Tenant, Timestamp,
};
use serde_json::Value;
use sqlx::{QueryBuilder, Sqlite};

use crate::tx::tenant_query;
use crm_store_sql::{
    sequences::{claimed, ENROLLMENT_COLUMNS},
    Unit,
};

use crate::{rows::get, tx::tenant_where};

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

fn bind_state<'q>(q: crate::tx::Query<'q>, e: &'q Enrollment) -> crate::tx::Query<'q> {
    q.bind(e.id.as_str())
        .bind(e.state.as_str())
        .bind(e.exit_reason.map(ExitReason::as_str))
        .bind(e.steps_sent as i32)
        .bind(e.next_send_at.map(Timestamp::millis))
        .bind(e.updated_at.millis())
        .bind(e.ended_at.map(Timestamp::millis))
}

crm_store_sql::impl_sequence_repo!(crate::SqliteTx, {
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
                    .push_bind(crm_store_sql::stored::mail::source_json(&e.source))
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
});

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
    use crm_domain::{
        sequence::SourceObject, ContactId, EnrollmentId, Mode, Tenant, Timestamp, WorkspaceId,
    };
    use crm_store_conformance::sequence_cases::sequence;
    use sqlx::Row;

    use super::*;

    /// The advance is driven from its CTE: one primary-key lookup per row, whatever the size of
    /// the tenant's enrollments. (Fails with the tenant bound once, as the advance was first
    /// written.)
    #[tokio::test]
    async fn the_advance_looks_each_enrollment_up_by_its_key() {
        let temp = crate::TempStore::migrated("plan").await;
        let store = &temp.store;
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
        temp.remove().await;
    }
}
