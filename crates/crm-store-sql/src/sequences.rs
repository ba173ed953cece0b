//! Sequences and their enrollments (`SequenceRepo`): the statements both backends take alike,
//! the row decoding, and the definition's columns (trigger, exit conditions and steps, encoded by
//! [`crate::stored::sequence`]). The bulk updates of enrollments and the claims of due ones differ
//! per backend and stay in each store.

use crm_app::{
    ports::{RowLock, Slice},
    StoreError,
};
use crm_domain::{
    sequence::{Enrollment, EnrollmentState, ExitReason, Sequence, SourceObject},
    Contact, ContactId, Deal, DealId, EnrollmentId, EventType, SequenceId, Tenant, Timestamp,
};
use sqlx::{QueryBuilder, Row};

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    corrupt,
    rows::{self, json_value, opt_ts, tenant_of, ts},
    sql::{Col, PushArg},
    stored::sequence as stored,
    Arg, Sql, SqlQuery, Unit,
};

pub const SEQUENCE_COLUMNS: &str = "id, name, CAST(trigger_def AS TEXT) AS trigger_def, \
     CAST(exit_when AS TEXT) AS exit_when, CAST(steps AS TEXT) AS steps, enabled, \
     enroll_existing, created_at, updated_at, version";

pub const ENROLLMENT_COLUMNS: &str = "id, sequence_id, contact_id, source_object, source_id, \
     state, exit_reason, steps_sent, next_send_at, enrolled_at, updated_at, ended_at";

pub fn sequence<R: Row>(row: &R) -> Result<Sequence, StoreError>
where
    R::Database: Sql,
{
    let def = crate::stored::sequence::sequence_def(
        row.col("name")?,
        &json_value(row, "trigger_def")?,
        &json_value(row, "exit_when")?,
        &json_value(row, "steps")?,
    )
    .ok_or_else(|| corrupt("sequence"))?;
    Ok(Sequence {
        id: SequenceId::from_trusted(row.col("id")?),
        def,
        enabled: row.col("enabled")?,
        enroll_existing: row.col("enroll_existing")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        version: row.col("version")?,
    })
}

pub fn enrollment<R: Row>(row: &R) -> Result<Enrollment, StoreError>
where
    R::Database: Sql,
{
    let exit_reason = match row.col::<Option<String>>("exit_reason")? {
        Some(r) => Some(ExitReason::parse(&r).ok_or_else(|| corrupt("exit_reason"))?),
        None => None,
    };
    Ok(Enrollment {
        id: EnrollmentId::from_trusted(row.col("id")?),
        sequence_id: SequenceId::from_trusted(row.col("sequence_id")?),
        contact_id: ContactId::from_trusted(row.col("contact_id")?),
        source_object: SourceObject::parse(&row.col::<String>("source_object")?)
            .ok_or_else(|| corrupt("source_object"))?,
        source_id: row.col("source_id")?,
        state: EnrollmentState::parse(&row.col::<String>("state")?)
            .ok_or_else(|| corrupt("state"))?,
        exit_reason,
        steps_sent: u32::try_from(row.col::<i32>("steps_sent")?)
            .map_err(|_| corrupt("steps_sent"))?,
        next_send_at: opt_ts(row, "next_send_at")?,
        enrolled_at: ts(row, "enrolled_at")?,
        updated_at: ts(row, "updated_at")?,
        ended_at: opt_ts(row, "ended_at")?,
    })
}

/// A due enrollment a worker claimed, with its tenant.
pub fn claimed<R: Row>(row: &R) -> Result<crm_app::ports::ClaimedEnrollment, StoreError>
where
    R::Database: Sql,
{
    Ok(crm_app::ports::ClaimedEnrollment {
        tenant: tenant_of(row)?,
        enrollment: enrollment(row)?,
    })
}

fn trigger_event(s: &Sequence) -> Option<&'static str> {
    s.def.trigger.as_ref().map(|t| t.event.as_str())
}

/// A sequence's id and definition, `$3` to `$10`, as its insert and its update take them.
fn bind_sequence<'q, DB: Sql>(q: SqlQuery<'q, DB>, s: &'q Sequence) -> SqlQuery<'q, DB> {
    q.arg(s.id.as_str())
        .arg(s.def.name.as_str())
        .arg(trigger_event(s))
        .arg(stored::trigger_json(s.def.trigger.as_ref()))
        .arg(stored::exit_when_json(&s.def))
        .arg(stored::steps_json(&s.def))
        .arg(s.enabled)
        .arg(s.enroll_existing)
}

pub async fn insert_sequence<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    s: &Sequence,
) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO sequences (workspace_id, mode, id, name, trigger_event, trigger_def, exit_when, steps, enabled, enroll_existing,
                                created_at, updated_at, version)
         VALUES ($1, $2, $3, $4, $5, $6{json}, $7{json}, $8{json}, $9, $10, $11, $12, $13)",
        json = U::JSON
    );
    let q = bind_sequence(tenant_query::<U::Db>(&sql, tenant), s)
        .arg(s.created_at.millis())
        .arg(s.updated_at.millis())
        .arg(s.version);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_sequence<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &SequenceId,
) -> Result<Option<Sequence>, StoreError> {
    let sql = format!(
        "SELECT {SEQUENCE_COLUMNS} FROM sequences WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(RowLock::Update)
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id.as_str());
    tx.optional(q, sequence).await
}

pub async fn get_sequences<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    ids: &[SequenceId],
) -> Result<Vec<Sequence>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().map(SequenceId::as_str));
    tx.all_built(&mut qb, sequence).await
}

pub async fn update_sequence<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    s: &Sequence,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE sequences SET name = $4, trigger_event = $5, trigger_def = $6{json}, exit_when = $7{json}, steps = $8{json},
                enabled = $9, enroll_existing = $10, updated_at = $11, version = $12
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12 - 1",
        json = U::JSON
    );
    let q = bind_sequence(tenant_query::<U::Db>(&sql, tenant), s)
        .arg(s.updated_at.millis())
        .arg(s.version);
    match tx.execute(q).await? {
        1 => Ok(()),
        _ => Err(StoreError::Stale),
    }
}

pub async fn delete_sequence<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &SequenceId,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM sequences WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn list_sequences<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<Sequence>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, sequence).await
}

/// The enabled sequences triggered by any of `events`, oldest first.
pub async fn triggered_sequences<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    events: &[EventType],
) -> Result<Vec<Sequence>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {SEQUENCE_COLUMNS} FROM sequences"));
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "trigger_event", events.iter().map(|e| e.as_str()));
    qb.push(" AND enabled = TRUE ORDER BY id");
    tx.all_built(&mut qb, sequence).await
}

pub async fn count_sequences<U: Unit>(tx: &mut U, tenant: &Tenant) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT COUNT(*) AS n FROM sequences WHERE workspace_id = $1 AND mode = $2",
        tenant,
    );
    let n = tx.optional(q, |r| r.col::<i64>("n")).await?.unwrap_or(0);
    Ok(n.max(0) as u64)
}

pub async fn get_enrollment<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    seq: &SequenceId,
    id: &EnrollmentId,
) -> Result<Option<Enrollment>, StoreError> {
    let sql = format!(
        "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND sequence_id = $4{}",
        tx.locking(RowLock::Update)
    );
    let q = tenant_query::<U::Db>(&sql, tenant)
        .arg(id.as_str())
        .arg(seq.as_str());
    tx.optional(q, enrollment).await
}

pub async fn list_enrollments<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    seq: &SequenceId,
    slice: &Slice,
) -> Result<Vec<Enrollment>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments"
    ));
    tenant_where(&mut qb, tenant);
    qb.push(" AND sequence_id = ").push_arg(seq.as_str());
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, enrollment).await
}

/// The active enrollments of any of `source_ids`, locked where the backend locks rows.
pub async fn active_enrollments_by_source<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    source_ids: &[String],
) -> Result<Vec<Enrollment>, StoreError> {
    if source_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments"
    ));
    tenant_where(&mut qb, tenant);
    qb.push(" AND state = 'active'");
    U::push_in(&mut qb, "source_id", source_ids.iter().map(String::as_str));
    qb.push(" ORDER BY id").push(tx.locking(RowLock::Update));
    tx.all_built(&mut qb, enrollment).await
}

pub async fn enrolled_contacts<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    seq: &SequenceId,
    contacts: &[ContactId],
) -> Result<Vec<ContactId>, StoreError> {
    if contacts.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new("SELECT contact_id FROM sequence_enrollments");
    tenant_where(&mut qb, tenant);
    qb.push(" AND sequence_id = ").push_arg(seq.as_str());
    U::push_in(
        &mut qb,
        "contact_id",
        contacts.iter().map(ContactId::as_str),
    );
    tx.all_built(&mut qb, |r| {
        Ok(ContactId::from_trusted(r.col("contact_id")?))
    })
    .await
}

pub async fn contacts_by_ids<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    ids: &[ContactId],
) -> Result<Vec<Contact>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb =
        QueryBuilder::<U::Db>::new(format!("SELECT {} FROM contacts", rows::CONTACT_COLUMNS));
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().map(ContactId::as_str));
    tx.all_built(&mut qb, rows::contact).await
}

pub async fn deals_by_ids<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    ids: &[DealId],
) -> Result<Vec<Deal>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {} FROM deals", rows::DEAL_COLUMNS));
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().map(DealId::as_str));
    tx.all_built(&mut qb, rows::deal).await
}

/// Inserts the enrollments not already there (a contact is enrolled once per sequence and
/// source); answers the ids of those inserted. 1,000 rows a statement (14 parameters each, under
/// both backends' limits).
pub async fn insert_enrollments<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    enrollments: &[Enrollment],
) -> Result<Vec<EnrollmentId>, StoreError> {
    let mut inserted = Vec::new();
    for chunk in enrollments.chunks(1000) {
        let mut qb = QueryBuilder::<U::Db>::new(
            "INSERT INTO sequence_enrollments (workspace_id, mode, id, sequence_id, contact_id, source_object, source_id, state, exit_reason,
             steps_sent, next_send_at, enrolled_at, updated_at, ended_at) ",
        );
        qb.push_values(chunk, |mut b, e| {
            b.push_arg(tenant.workspace_id.as_str())
                .push_arg(tenant.mode.as_str())
                .push_arg(e.id.as_str())
                .push_arg(e.sequence_id.as_str())
                .push_arg(e.contact_id.as_str())
                .push_arg(e.source_object.as_str())
                .push_arg(e.source_id.as_str())
                .push_arg(e.state.as_str())
                .push_arg(e.exit_reason.map(ExitReason::as_str))
                .push_arg(e.steps_sent as i32)
                .push_arg(e.next_send_at.map(Timestamp::millis))
                .push_arg(e.enrolled_at.millis())
                .push_arg(e.updated_at.millis())
                .push_arg(e.ended_at.map(Timestamp::millis));
        });
        qb.push(" ON CONFLICT DO NOTHING RETURNING id");
        let ids = tx
            .all_built(&mut qb, |r| Ok(EnrollmentId::from_trusted(r.col("id")?)))
            .await?;
        inserted.extend(ids);
    }
    Ok(inserted)
}

/// `impl SequenceRepo for $tx` with the statements above, and the store's own methods (the
/// bulk updates and claims of enrollments, the step emails) in the braces.
#[macro_export]
macro_rules! impl_sequence_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::SequenceRepo, $tx, sequences, [
            fn insert_sequence(tenant: &$crate::reexport::Tenant, s: &$crate::reexport::sequence::Sequence) -> Result<(), $crate::reexport::StoreError>;
            fn get_sequence(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::SequenceId) -> Result<Option<$crate::reexport::sequence::Sequence>, $crate::reexport::StoreError>;
            fn get_sequences(tenant: &$crate::reexport::Tenant, ids: &[$crate::reexport::SequenceId]) -> Result<Vec<$crate::reexport::sequence::Sequence>, $crate::reexport::StoreError>;
            fn update_sequence(tenant: &$crate::reexport::Tenant, s: &$crate::reexport::sequence::Sequence) -> Result<(), $crate::reexport::StoreError>;
            fn delete_sequence(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::SequenceId) -> Result<bool, $crate::reexport::StoreError>;
            fn list_sequences(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::sequence::Sequence>, $crate::reexport::StoreError>;
            fn triggered_sequences(tenant: &$crate::reexport::Tenant, events: &[$crate::reexport::EventType]) -> Result<Vec<$crate::reexport::sequence::Sequence>, $crate::reexport::StoreError>;
            fn count_sequences(tenant: &$crate::reexport::Tenant) -> Result<u64, $crate::reexport::StoreError>;
            fn insert_enrollments(tenant: &$crate::reexport::Tenant, enrollments: &[$crate::reexport::sequence::Enrollment]) -> Result<Vec<$crate::reexport::EnrollmentId>, $crate::reexport::StoreError>;
            fn get_enrollment(tenant: &$crate::reexport::Tenant, seq: &$crate::reexport::SequenceId, id: &$crate::reexport::EnrollmentId) -> Result<Option<$crate::reexport::sequence::Enrollment>, $crate::reexport::StoreError>;
            fn list_enrollments(tenant: &$crate::reexport::Tenant, seq: &$crate::reexport::SequenceId, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::sequence::Enrollment>, $crate::reexport::StoreError>;
            fn active_enrollments_by_source(tenant: &$crate::reexport::Tenant, source_ids: &[String]) -> Result<Vec<$crate::reexport::sequence::Enrollment>, $crate::reexport::StoreError>;
            fn enrolled_contacts(tenant: &$crate::reexport::Tenant, seq: &$crate::reexport::SequenceId, contacts: &[$crate::reexport::ContactId]) -> Result<Vec<$crate::reexport::ContactId>, $crate::reexport::StoreError>;
            fn contacts_by_ids(tenant: &$crate::reexport::Tenant, ids: &[$crate::reexport::ContactId]) -> Result<Vec<$crate::reexport::Contact>, $crate::reexport::StoreError>;
            fn deals_by_ids(tenant: &$crate::reexport::Tenant, ids: &[$crate::reexport::DealId]) -> Result<Vec<$crate::reexport::Deal>, $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
