//! A record's columns bound in the order both stores' statements list them, so an insert or an
//! update binds its record with one call whatever the backend.

use crm_domain::{
    Activity, Company, CompanyId, Contact, ContactId, Deal, DealId, Email, Timestamp, UserId,
};

use crate::{json_text, Arg, Sql, SqlQuery};

/// A contact's writable fields, first name to `deleted_at` (twelve arguments).
#[inline]
pub fn bind_contact<'q, DB: Sql>(q: SqlQuery<'q, DB>, c: &'q Contact) -> SqlQuery<'q, DB> {
    q.arg(c.first_name.as_deref())
        .arg(c.last_name.as_deref())
        .arg(c.email.as_ref().map(Email::as_str))
        .arg(c.phone.as_deref())
        .arg(c.linkedin_url.as_deref())
        .arg(c.company_id.as_ref().map(CompanyId::as_str))
        .arg(c.contact_type.as_deref())
        .arg(c.owner_id.as_ref().map(UserId::as_str))
        .arg(json_text(&c.custom_fields))
        .arg(c.updated_at.millis())
        .arg(c.version)
        .arg(c.deleted_at.map(Timestamp::millis))
}

/// A company's writable fields, name to `deleted_at` (seven arguments).
#[inline]
pub fn bind_company<'q, DB: Sql>(q: SqlQuery<'q, DB>, c: &'q Company) -> SqlQuery<'q, DB> {
    q.arg(c.name.as_str())
        .arg(c.domain.as_deref())
        .arg(c.owner_id.as_ref().map(UserId::as_str))
        .arg(json_text(&c.custom_fields))
        .arg(c.updated_at.millis())
        .arg(c.version)
        .arg(c.deleted_at.map(Timestamp::millis))
}

/// A deal's id and writable fields, id to `deleted_at` (sixteen arguments).
#[inline]
pub fn bind_deal<'q, DB: Sql>(q: SqlQuery<'q, DB>, d: &'q Deal) -> SqlQuery<'q, DB> {
    q.arg(d.id.as_str())
        .arg(d.title.as_str())
        .arg(d.pipeline_id.as_str())
        .arg(d.pipeline_key.as_str())
        .arg(d.stage.as_str())
        .arg(d.stage_type.as_str())
        .arg(d.primary_contact_id.as_ref().map(ContactId::as_str))
        .arg(d.company_id.as_ref().map(CompanyId::as_str))
        .arg(d.value_cents)
        .arg(d.currency.as_deref())
        .arg(d.close_date.map(|c| c.to_string()))
        .arg(d.owner_id.as_ref().map(UserId::as_str))
        .arg(json_text(&d.custom_fields))
        .arg(d.updated_at.millis())
        .arg(d.version)
        .arg(d.deleted_at.map(Timestamp::millis))
}

/// An activity's id and writable fields, id to version (nine arguments).
#[inline]
pub fn bind_activity<'q, DB: Sql>(q: SqlQuery<'q, DB>, a: &'q Activity) -> SqlQuery<'q, DB> {
    q.arg(a.id.as_str())
        .arg(a.activity_type.as_str())
        .arg(a.contact_id.as_ref().map(ContactId::as_str))
        .arg(a.deal_id.as_ref().map(DealId::as_str))
        .arg(a.body.as_deref())
        .arg(a.occurred_at.millis())
        .arg(json_text(&a.custom_fields))
        .arg(a.updated_at.millis())
        .arg(a.version)
}
