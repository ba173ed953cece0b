//! The records a page refers to, read for `expand=` (decisions §19): each kind in one statement
//! for the whole page, never one per row, and the custom-field keys `fields=` may name.

use crm_domain::{Company, CompanyId, Contact, ContactId, Deal, DealId, ObjectKind};

use crate::{auth::Caller, error::AppError, App, Scope};

/// The ids of the related records to read, by kind; each kind is read only when it holds any.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RelatedIds {
    pub contacts: Vec<ContactId>,
    pub companies: Vec<CompanyId>,
    pub deals: Vec<DealId>,
}

/// The related records found, soft-deleted ones included; an id of no record is absent.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Related {
    pub contacts: Vec<Contact>,
    pub companies: Vec<Company>,
    pub deals: Vec<Deal>,
}

impl App {
    /// Reads the records of `ids`, one statement per kind asked for, in one read transaction of
    /// the caller's tenant. Each kind read needs that object's `:read` scope.
    pub async fn read_related(
        &self,
        caller: &Caller,
        ids: RelatedIds,
    ) -> Result<Related, AppError> {
        let mut related = Related::default();
        if ids.contacts.is_empty() && ids.companies.is_empty() && ids.deals.is_empty() {
            return Ok(related);
        }
        for (ids_empty, resource) in [
            (ids.contacts.is_empty(), "contacts"),
            (ids.companies.is_empty(), "companies"),
            (ids.deals.is_empty(), "deals"),
        ] {
            if !ids_empty {
                caller.require(Scope::read(resource))?;
            }
        }
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_read().await?;
        if !ids.contacts.is_empty() {
            related.contacts = tx.contacts_by_ids(tenant, &ids.contacts).await?;
        }
        if !ids.companies.is_empty() {
            related.companies = tx.companies_by_ids(tenant, &ids.companies).await?;
        }
        if !ids.deals.is_empty() {
            related.deals = tx.deals_by_ids(tenant, &ids.deals).await?;
        }
        Ok(related)
    }

    /// The registered custom-field keys of `object`, from the configuration cache when it has
    /// them: what `fields=custom_fields.<key>` may name.
    pub async fn custom_field_keys(
        &self,
        caller: &Caller,
        object: ObjectKind,
    ) -> Result<Vec<String>, AppError> {
        let registry = self.read_registry(&caller.tenant, object).await?;
        Ok(registry.fields.iter().map(|f| f.key.clone()).collect())
    }
}
