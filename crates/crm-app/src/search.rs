//! Cross-object search: a case-insensitive substring over contacts, companies and deals, one
//! section per object. Each section needs the read scope of its object; sections the key may
//! not read are left out.

use crm_domain::{Company, Contact, Deal};

use crate::{
    auth::{Caller, Scope},
    error::AppError,
    ports::{CompanyFilter, ContactFilter, DealFilter, Slice},
    App,
};

/// One section: the first `limit` matches, newest first, and whether more were cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Section<T> {
    pub data: Vec<T>,
    pub has_more: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchResults {
    pub contacts: Option<Section<Contact>>,
    pub companies: Option<Section<Company>>,
    pub deals: Option<Section<Deal>>,
}

fn section<T>(mut rows: Vec<T>, limit: u32) -> Section<T> {
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    Section {
        data: rows,
        has_more,
    }
}

impl App {
    pub async fn search(
        &self,
        caller: &Caller,
        q: &str,
        limit: u32,
    ) -> Result<SearchResults, AppError> {
        let (contacts, companies, deals) = (
            Scope::read("contacts"),
            Scope::read("companies"),
            Scope::read("deals"),
        );
        if ![contacts, companies, deals]
            .iter()
            .any(|s| caller.scopes.allows(*s))
        {
            return Err(AppError::Forbidden {
                scope: contacts.to_string(),
            });
        }
        let tenant = &caller.tenant;
        let slice = Slice {
            before: None,
            limit: limit + 1,
        };
        let q = Some(q.to_owned());
        let mut tx = self.store.begin_read().await?;
        let mut results = SearchResults::default();
        if caller.scopes.allows(contacts) {
            let filter = ContactFilter {
                q: q.clone(),
                ..Default::default()
            };
            results.contacts = Some(section(
                tx.list_contacts(tenant, &filter, &slice).await?,
                limit,
            ));
        }
        if caller.scopes.allows(companies) {
            let filter = CompanyFilter {
                q: q.clone(),
                ..Default::default()
            };
            results.companies = Some(section(
                tx.list_companies(tenant, &filter, &slice).await?,
                limit,
            ));
        }
        if caller.scopes.allows(deals) {
            let filter = DealFilter {
                q,
                ..Default::default()
            };
            results.deals = Some(section(
                tx.list_deals(tenant, &filter, &slice).await?,
                limit,
            ));
        }
        Ok(results)
    }
}
