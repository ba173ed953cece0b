//! What an export lists: one object's list filters, checked as the list checks them, kept with
//! the export as JSON (so a worker in any process can resume it), and read back page by page in
//! the list's own order (newest first, keyset by id; activities by `(occurred_at, id)`).

use crm_domain::{
    email::Email, Activity, ActivityId, Company, CompanyId, Contact, ContactId, Deal, DealId,
    ObjectKind, PipelineId, Tenant, UserId,
};
use serde_json::{json, Value};

use crate::{
    deals::DealQuery,
    error::AppError,
    ports::{ActivityFilter, CompanyFilter, ContactFilter, DealFilter, FieldFilter, Slice, Tx},
    App,
};

/// The filters of an export as the client sent them (the list operations' own parsing).
#[derive(Debug, Clone)]
pub enum ExportQuery {
    /// Its registry-bound filters already checked (`App::check_contact_filters`).
    Contact(ContactFilter),
    Company(CompanyFilter),
    Deal(DealQuery),
    Activity(ActivityFilter),
}

/// The filters of an export once checked: what its pages are read with.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportFilter {
    Contact(ContactFilter),
    Company(CompanyFilter),
    Deal(DealFilter),
    Activity(ActivityFilter),
}

/// One page of an export's records, as the list reads them.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportPage {
    Contacts(Vec<Contact>),
    Companies(Vec<Company>),
    Deals(Vec<Deal>),
    Activities(Vec<Activity>),
}

impl ExportPage {
    pub fn len(&self) -> usize {
        match self {
            ExportPage::Contacts(r) => r.len(),
            ExportPage::Companies(r) => r.len(),
            ExportPage::Deals(r) => r.len(),
            ExportPage::Activities(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The list position after the page's last record: where the next page starts.
    pub fn last_position(&self) -> Option<String> {
        match self {
            ExportPage::Contacts(r) => r.last().map(|c| c.id.to_string()),
            ExportPage::Companies(r) => r.last().map(|c| c.id.to_string()),
            ExportPage::Deals(r) => r.last().map(|d| d.id.to_string()),
            ExportPage::Activities(r) => r.last().map(|a| activity_position(a.occurred_at, &a.id)),
        }
    }
}

impl ExportQuery {
    pub fn object(&self) -> ObjectKind {
        match self {
            ExportQuery::Contact(_) => ObjectKind::Contact,
            ExportQuery::Company(_) => ObjectKind::Company,
            ExportQuery::Deal(_) => ObjectKind::Deal,
            ExportQuery::Activity(_) => ObjectKind::Activity,
        }
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

fn id<T>(v: &Value, parse: fn(&str) -> Result<T, crm_domain::ids::IdError>) -> Option<T> {
    v.as_str().and_then(|s| parse(s).ok())
}

impl ExportFilter {
    /// The JSON kept with the export.
    pub fn to_json(&self) -> Value {
        match self {
            ExportFilter::Contact(f) => json!({
                "q": f.q,
                "email": f.email.as_ref().map(|e| e.as_str().to_owned()),
                "company_id": f.company_id.as_ref().map(|c| c.to_string()),
                "type": f.contact_type,
                "owner_id": f.owner_id.as_ref().map(|u| u.to_string()),
                "custom_fields": f.custom_fields.iter()
                    .map(|c| json!({"key": c.key, "value": c.value}))
                    .collect::<Vec<_>>(),
                "include_deleted": f.include_deleted,
            }),
            ExportFilter::Company(f) => json!({
                "q": f.q,
                "domain": f.domain,
                "owner_id": f.owner_id.as_ref().map(|u| u.to_string()),
                "include_deleted": f.include_deleted,
            }),
            ExportFilter::Deal(f) => json!({
                "q": f.q,
                "pipeline_id": f.pipeline_id.as_ref().map(|p| p.to_string()),
                "stage": f.stage,
                "company_id": f.company_id.as_ref().map(|c| c.to_string()),
                "primary_contact_id": f.primary_contact_id.as_ref().map(|c| c.to_string()),
                "owner_id": f.owner_id.as_ref().map(|u| u.to_string()),
                "include_deleted": f.include_deleted,
            }),
            ExportFilter::Activity(f) => json!({
                "contact_id": f.contact_id.as_ref().map(|c| c.to_string()),
                "deal_id": f.deal_id.as_ref().map(|d| d.to_string()),
                "type": f.activity_type,
            }),
        }
    }

    /// Reads [`ExportFilter::to_json`] back; `None` for JSON it did not write.
    pub fn from_json(object: ObjectKind, v: &Value) -> Option<ExportFilter> {
        let deleted = v["include_deleted"].as_bool().unwrap_or(false);
        Some(match object {
            ObjectKind::Contact => ExportFilter::Contact(ContactFilter {
                q: text(&v["q"]),
                email: match v["email"].as_str() {
                    Some(e) => Some(Email::parse(e)?),
                    None => None,
                },
                company_id: id(&v["company_id"], CompanyId::parse),
                contact_type: text(&v["type"]),
                owner_id: id(&v["owner_id"], UserId::parse),
                custom_fields: v["custom_fields"]
                    .as_array()?
                    .iter()
                    .map(|c| {
                        Some(FieldFilter {
                            key: text(&c["key"])?,
                            value: c["value"].clone(),
                        })
                    })
                    .collect::<Option<_>>()?,
                include_deleted: deleted,
            }),
            ObjectKind::Company => ExportFilter::Company(CompanyFilter {
                q: text(&v["q"]),
                domain: text(&v["domain"]),
                owner_id: id(&v["owner_id"], UserId::parse),
                include_deleted: deleted,
            }),
            ObjectKind::Deal => ExportFilter::Deal(DealFilter {
                q: text(&v["q"]),
                pipeline_id: id(&v["pipeline_id"], PipelineId::parse),
                stage: text(&v["stage"]),
                company_id: id(&v["company_id"], CompanyId::parse),
                primary_contact_id: id(&v["primary_contact_id"], ContactId::parse),
                owner_id: id(&v["owner_id"], UserId::parse),
                include_deleted: deleted,
            }),
            ObjectKind::Activity => ExportFilter::Activity(ActivityFilter {
                contact_id: id(&v["contact_id"], ContactId::parse),
                deal_id: id(&v["deal_id"], DealId::parse),
                activity_type: text(&v["type"]),
            }),
        })
    }
}

impl App {
    /// Checks `query` as its list does (a deal pipeline named by key resolves to its id; an
    /// activity `type` must be registered).
    pub(crate) async fn check_export_query(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        query: ExportQuery,
    ) -> Result<ExportFilter, AppError> {
        Ok(match query {
            ExportQuery::Contact(f) => ExportFilter::Contact(f),
            ExportQuery::Company(f) => ExportFilter::Company(f),
            ExportQuery::Deal(q) => {
                ExportFilter::Deal(crate::deals::resolve_query(tx, tenant, q).await?)
            }
            ExportQuery::Activity(f) => {
                self.check_activity_filter(tx, tenant, &f).await?;
                ExportFilter::Activity(f)
            }
        })
    }

    /// The next `limit` records of `filter` after the list position `after`, in the list's
    /// order.
    pub(crate) async fn export_page(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        filter: &ExportFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<ExportPage, AppError> {
        let slice = Slice {
            before: after,
            limit,
        };
        Ok(match filter {
            ExportFilter::Contact(f) => {
                ExportPage::Contacts(tx.list_contacts(tenant, f, &slice).await?)
            }
            ExportFilter::Company(f) => {
                ExportPage::Companies(tx.list_companies(tenant, f, &slice).await?)
            }
            ExportFilter::Deal(f) => ExportPage::Deals(tx.list_deals(tenant, f, &slice).await?),
            ExportFilter::Activity(f) => {
                ExportPage::Activities(tx.list_activities(tenant, f, &slice).await?)
            }
        })
    }
}

/// An activity's list position, as the activity list's cursor holds it.
pub(crate) fn activity_position(occurred_at: crm_domain::Timestamp, id: &ActivityId) -> String {
    format!("{}:{}", occurred_at.millis(), id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filter_reads_back_from_its_json() {
        let filters = [
            ExportFilter::Contact(ContactFilter {
                q: Some("ada".into()),
                email: Email::parse("ada@example.com"),
                company_id: None,
                contact_type: Some("lead".into()),
                owner_id: Some(UserId::from_uuid(uuid::Uuid::from_u128(7))),
                custom_fields: vec![FieldFilter {
                    key: "tier".into(),
                    value: json!("gold"),
                }],
                include_deleted: true,
            }),
            ExportFilter::Company(CompanyFilter {
                q: None,
                domain: Some("example.com".into()),
                owner_id: None,
                include_deleted: false,
            }),
            ExportFilter::Deal(DealFilter {
                stage: Some("won".into()),
                ..DealFilter::default()
            }),
            ExportFilter::Activity(ActivityFilter {
                activity_type: Some("call".into()),
                ..ActivityFilter::default()
            }),
        ];
        for (filter, object) in filters.into_iter().zip([
            ObjectKind::Contact,
            ObjectKind::Company,
            ObjectKind::Deal,
            ObjectKind::Activity,
        ]) {
            assert_eq!(
                ExportFilter::from_json(object, &filter.to_json()),
                Some(filter)
            );
        }
    }
}
