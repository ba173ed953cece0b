//! Sequences and their enrollments over Postgres.

use crm_app::{ports::ClaimedEnrollment, StoreError};
use crm_domain::{
    mail::EmailMessage,
    sequence::{Enrollment, ExitReason},
    Activity, ContactId, DealId, EnrollmentId, SequenceId, Tenant, Timestamp,
};
use sqlx::{Postgres, QueryBuilder};

use crm_store_sql::Unit;

use crm_store_sql::sequences::{claimed, ENROLLMENT_COLUMNS};

use crate::{
    rows::get,
    tx::{json_text, tenant_query},
};

/// Rows of new enrollment states, as `(VALUES ...) AS v(...)`, for a bulk `UPDATE ... FROM`.
fn push_states<'a>(qb: &mut QueryBuilder<'a, Postgres>, updates: &'a [(Enrollment, u32)]) {
    qb.push("(");
    qb.push_values(updates, |mut b, (e, before)| {
        b.push_bind(e.id.as_str())
            .push_unseparated("::text")
            .push_bind(e.state.as_str())
            .push_unseparated("::text")
            .push_bind(e.exit_reason.map(ExitReason::as_str))
            .push_unseparated("::text")
            .push_bind(e.steps_sent as i32)
            .push_unseparated("::integer")
            .push_bind(e.next_send_at.map(Timestamp::millis))
            .push_unseparated("::bigint")
            .push_bind(e.updated_at.millis())
            .push_unseparated("::bigint")
            .push_bind(e.ended_at.map(Timestamp::millis))
            .push_unseparated("::bigint")
            .push_bind(*before as i32)
            .push_unseparated("::integer");
    });
    qb.push(") AS v(id, state, exit_reason, steps_sent, next_send_at, updated_at, ended_at, sent_before)");
}

const SET_STATES: &str = "UPDATE sequence_enrollments e SET state = v.state, exit_reason = v.exit_reason, steps_sent = v.steps_sent, \
     next_send_at = v.next_send_at, updated_at = v.updated_at, ended_at = v.ended_at, lease_holder = NULL, lease_until = NULL FROM ";

crm_store_sql::impl_sequence_repo!(crate::PostgresTx, {
    async fn update_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<(), StoreError> {
        if enrollments.is_empty() {
            return Ok(());
        }
        let updates: Vec<(Enrollment, u32)> = enrollments.iter().map(|e| (e.clone(), 0)).collect();
        let mut qb = QueryBuilder::<Postgres>::new(SET_STATES);
        push_states(&mut qb, &updates);
        qb.push(" WHERE e.workspace_id = ")
            .push_bind(tenant.workspace_id.as_str());
        qb.push(" AND e.mode = ").push_bind(tenant.mode.as_str());
        qb.push(" AND e.id = v.id");
        self.execute(qb.build()).await?;
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
        // Through `sequence_enrollments_due` in its order, skipping rows another round holds.
        // Locking writes no row version and no index entry: a claim that leased each row cost a
        // round 500 updates of five indexes and a commit of its own (docs/performance-history.md).
        let sql = format!(
            "SELECT workspace_id, mode, {ENROLLMENT_COLUMNS} FROM sequence_enrollments
             WHERE state = 'active' AND next_send_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
             ORDER BY next_send_at LIMIT $2 FOR UPDATE SKIP LOCKED"
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
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = ids.iter().map(EnrollmentId::as_str).collect();
        let q = tenant_query(
            "UPDATE sequence_enrollments SET lease_holder = $4, lease_until = $5 WHERE workspace_id = $1 AND mode = $2 AND id = ANY($3)",
            tenant,
        )
        .bind(ids)
        .bind(holder)
        .bind(until.millis());
        self.execute(q).await.map(drop)
    }

    async fn advance_claimed_enrollments(
        &mut self,
        tenant: &Tenant,
        updates: &[(Enrollment, u32)],
    ) -> Result<Vec<EnrollmentId>, StoreError> {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Postgres>::new(SET_STATES);
        push_states(&mut qb, updates);
        qb.push(" WHERE e.workspace_id = ")
            .push_bind(tenant.workspace_id.as_str());
        qb.push(" AND e.mode = ").push_bind(tenant.mode.as_str());
        qb.push(" AND e.id = v.id AND e.state = 'active' AND e.steps_sent = v.sent_before RETURNING e.id");
        self.all(qb.build(), |r| {
            Ok(EnrollmentId::from_trusted(get(r, "id")?))
        })
        .await
    }

    async fn insert_step_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[EmailMessage],
        activities: &[Activity],
    ) -> Result<(), StoreError> {
        // One statement for both tables, over arrays: its text and plan are the same for any
        // number of rows, and the activities ride in the emails' round trip.
        let email_col =
            |f: fn(&EmailMessage) -> Option<&str>| emails.iter().map(f).collect::<Vec<_>>();
        let activity_col =
            |f: fn(&Activity) -> Option<&str>| activities.iter().map(f).collect::<Vec<_>>();
        let q = tenant_query(
            "WITH sent AS (
                 INSERT INTO emails (workspace_id, mode, id, to_addr, from_addr, subject, html, text, status, error, source, contact_id,
                                     deal_id, attempts, next_attempt_at, claimed_until, provider_message_id, created_at, sent_at)
                 SELECT $1, $2, v.id, v.to_addr, v.from_addr, v.subject, v.html, v.text, v.status, v.error, v.source, v.contact_id,
                        v.deal_id, v.attempts, v.next_attempt_at, NULL, v.provider_message_id, v.created_at, v.sent_at
                 FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                             $11::text[], $12::text[], $13::text[], $14::int4[], $15::int8[], $16::text[], $17::int8[], $18::int8[])
                      AS v(id, to_addr, from_addr, subject, html, text, status, error, source, contact_id, deal_id, attempts,
                           next_attempt_at, provider_message_id, created_at, sent_at)
             )
             INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, custom_fields, updated_at,
                                     version, created_at)
             SELECT $1, $2, a.id, a.type, a.contact_id, a.deal_id, a.body, a.occurred_at, a.custom_fields::jsonb, a.updated_at,
                    a.version, a.created_at
             FROM unnest($19::text[], $20::text[], $21::text[], $22::text[], $23::text[], $24::int8[], $25::text[], $26::int8[],
                         $27::int8[], $28::int8[])
                  AS a(id, type, contact_id, deal_id, body, occurred_at, custom_fields, updated_at, version, created_at)",
            tenant,
        )
        .bind(emails.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.to.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.from.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.subject.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.html.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.text.as_str()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.status.as_str()).collect::<Vec<_>>())
        .bind(email_col(|e| e.error.as_deref()))
        .bind(emails.iter().map(|e| crm_store_sql::stored::mail::source_json(&e.source)).collect::<Vec<_>>())
        .bind(email_col(|e| e.contact_id.as_ref().map(ContactId::as_str)))
        .bind(email_col(|e| e.deal_id.as_ref().map(DealId::as_str)))
        .bind(emails.iter().map(|e| e.attempts as i32).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.next_attempt_at.map(Timestamp::millis)).collect::<Vec<_>>())
        .bind(email_col(|e| e.provider_message_id.as_deref()))
        .bind(emails.iter().map(|e| e.created_at.millis()).collect::<Vec<_>>())
        .bind(emails.iter().map(|e| e.sent_at.map(Timestamp::millis)).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| a.id.as_str()).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| a.activity_type.as_str()).collect::<Vec<_>>())
        .bind(activity_col(|a| a.contact_id.as_ref().map(ContactId::as_str)))
        .bind(activity_col(|a| a.deal_id.as_ref().map(DealId::as_str)))
        .bind(activity_col(|a| a.body.as_deref()))
        .bind(activities.iter().map(|a| a.occurred_at.millis()).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| json_text(&a.custom_fields)).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| a.updated_at.millis()).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| a.version).collect::<Vec<_>>())
        .bind(activities.iter().map(|a| a.created_at.millis()).collect::<Vec<_>>());
        self.execute(q).await?;
        Ok(())
    }
});
