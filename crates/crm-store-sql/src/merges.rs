//! Merges (`MergeRepo`): what points at merged records, pointing it at the survivor, tombstones
//! and the merged contacts' enrollments. The same statements on both backends but for reading
//! and writing a key of a JSON column ([`Unit::push_json_text`], [`Unit::push_json_set_text`]).

use crm_app::{
    ports::{RefField, Referrer, RowLock},
    StoreError,
};
use crm_domain::{sequence::Enrollment, ContactId, ObjectKind, Tenant, Timestamp};
use sqlx::QueryBuilder;

use crate::{
    clauses::tenant_where,
    record_table,
    sequences::{enrollment, ENROLLMENT_COLUMNS},
    sql::{Col, PushArg},
    Unit,
};

/// The built-in column a field is, or `None` for a custom field.
fn column(field: RefField<'_>) -> Option<&'static str> {
    match field {
        RefField::ContactCompany | RefField::DealCompany => Some("company_id"),
        RefField::DealPrimaryContact => Some("primary_contact_id"),
        RefField::ActivityContact => Some("contact_id"),
        RefField::Custom(..) => None,
    }
}

/// Pushes the text the field holds.
fn push_value<'q, U: Unit>(qb: &mut QueryBuilder<'q, U::Db>, field: RefField<'q>) {
    match (column(field), field) {
        (Some(c), _) => {
            qb.push(c);
        }
        (None, RefField::Custom(_, key)) => U::push_json_text(qb, "custom_fields", key),
        (None, _) => unreachable!("every built-in field has a column"),
    }
}

/// Contacts and companies can be tombstones, which merges leave alone.
fn has_tombstones(object: ObjectKind) -> bool {
    matches!(object, ObjectKind::Contact | ObjectKind::Company)
}

pub async fn referrers<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    field: RefField<'_>,
    targets: &[&str],
) -> Result<Vec<Referrer>, StoreError> {
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let object = field.object();
    let mut qb = QueryBuilder::<U::Db>::new("SELECT id, ");
    push_value::<U>(&mut qb, field);
    qb.push(format!(" AS target FROM {}", record_table(object)));
    tenant_where(&mut qb, tenant);
    qb.push(" AND ");
    push_value::<U>(&mut qb, field);
    qb.push(" IS NOT NULL");
    push_in_values::<U>(&mut qb, field, targets);
    if has_tombstones(object) {
        qb.push(" AND merged_into IS NULL");
    }
    qb.push(" ORDER BY id");
    qb.push(tx.locking(RowLock::Update));
    tx.all_built(&mut qb, |r| {
        Ok(Referrer {
            id: r.col("id")?,
            target: r.col("target")?,
        })
    })
    .await
}

/// ` AND <field> IN (targets)`.
fn push_in_values<'q, U: Unit>(
    qb: &mut QueryBuilder<'q, U::Db>,
    field: RefField<'q>,
    targets: &[&'q str],
) {
    match column(field) {
        Some(c) => U::push_in(qb, c, targets.iter().copied()),
        None => {
            qb.push(" AND ");
            push_value::<U>(qb, field);
            qb.push(" IN (");
            let mut list = qb.separated(", ");
            for t in targets {
                list.push_arg(*t);
            }
            qb.push(")");
        }
    }
}

pub async fn repoint<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    field: RefField<'_>,
    ids: &[&str],
    to: &str,
    now: Timestamp,
) -> Result<u64, StoreError> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut qb =
        QueryBuilder::<U::Db>::new(format!("UPDATE {} SET ", record_table(field.object())));
    match (column(field), field) {
        (Some(c), _) => {
            qb.push(c).push(" = ").push_arg(to);
        }
        (None, RefField::Custom(_, key)) => {
            qb.push("custom_fields = ");
            U::push_json_set_text(&mut qb, "custom_fields", key, to);
        }
        (None, _) => unreachable!("every built-in field has a column"),
    }
    qb.push(", version = version + 1, updated_at = ")
        .push_arg(now.millis());
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().copied());
    tx.execute_built(&mut qb).await
}

pub async fn tombstone<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    ids: &[&str],
    survivor: &str,
    now: Timestamp,
) -> Result<u64, StoreError> {
    if ids.is_empty() || !has_tombstones(object) {
        return Ok(0);
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "UPDATE {} SET merged_into = ",
        record_table(object)
    ));
    qb.push_arg(survivor)
        .push(", deleted_at = ")
        .push_arg(now.millis())
        .push(", updated_at = ")
        .push_arg(now.millis())
        .push(", version = version + 1");
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().copied());
    qb.push(" AND merged_into IS NULL");
    tx.execute_built(&mut qb).await
}

pub async fn enrollments_of_contacts<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    contacts: &[ContactId],
) -> Result<Vec<Enrollment>, StoreError> {
    if contacts.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT {ENROLLMENT_COLUMNS} FROM sequence_enrollments"
    ));
    tenant_where(&mut qb, tenant);
    U::push_in(
        &mut qb,
        "contact_id",
        contacts.iter().map(ContactId::as_str),
    );
    qb.push(" ORDER BY id");
    qb.push(tx.locking(RowLock::Update));
    tx.all_built(&mut qb, enrollment).await
}

pub async fn move_enrollments<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    enrollments: &[Enrollment],
) -> Result<(), StoreError> {
    for e in enrollments {
        let mut qb = QueryBuilder::<U::Db>::new("UPDATE sequence_enrollments SET contact_id = ");
        qb.push_arg(e.contact_id.as_str())
            .push(", source_id = ")
            .push_arg(e.source_id.as_str())
            .push(", updated_at = ")
            .push_arg(e.updated_at.millis());
        tenant_where(&mut qb, tenant);
        qb.push(" AND id = ").push_arg(e.id.as_str());
        tx.execute_built(&mut qb).await?;
    }
    Ok(())
}

/// `impl MergeRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_merge_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::MergeRepo, $tx, merges, [
            fn referrers(tenant: &$crate::reexport::Tenant, field: $crate::reexport::RefField<'_>, targets: &[&str]) -> Result<Vec<$crate::reexport::Referrer>, $crate::reexport::StoreError>;
            fn repoint(tenant: &$crate::reexport::Tenant, field: $crate::reexport::RefField<'_>, ids: &[&str], to: &str, now: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn tombstone(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, ids: &[&str], survivor: &str, now: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
            fn enrollments_of_contacts(tenant: &$crate::reexport::Tenant, contacts: &[$crate::reexport::ContactId]) -> Result<Vec<$crate::reexport::sequence::Enrollment>, $crate::reexport::StoreError>;
            fn move_enrollments(tenant: &$crate::reexport::Tenant, enrollments: &[$crate::reexport::sequence::Enrollment]) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
