//! Reading field history: a contact's, company's or deal's entries, newest first, also once the
//! record is soft-deleted (decisions §18). The entries are written by the writes themselves
//! ([`crate::write::Effects`]).

use crm_domain::{history::Change, ObjectKind};

use crate::{
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    App,
};

impl App {
    /// The history of the record `id` of `object` (contact, company or deal); 404 when no such
    /// record exists in the caller's workspace and mode, soft-deleted ones included.
    pub async fn list_history(
        &self,
        caller: &Caller,
        object: ObjectKind,
        id: &str,
        page: PageParams,
    ) -> Result<Page<Change>, AppError> {
        let list = format!("{}_history", object.as_str());
        let slice = slice_for(&page, &caller.tenant, &list, id)?;
        let mut tx = self.store.begin_read().await?;
        if !tx.record_exists(&caller.tenant, object, id).await? {
            return Err(AppError::not_found(object.as_str(), id));
        }
        let rows = tx.list_changes(&caller.tenant, id, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, &list, id, |c| {
            c.id.to_string()
        }))
    }
}
