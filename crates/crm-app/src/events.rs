//! Reading the outbox: `GET /events`.

use crate::{
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    App,
};

impl App {
    /// The events of the caller's mode, newest first.
    pub async fn list_events(
        &self,
        caller: &Caller,
        event_type: Option<&str>,
        page: PageParams,
    ) -> Result<Page<crm_domain::Event>, AppError> {
        const EVENTS: &str = "events";
        let fingerprint = event_type.unwrap_or_default().to_owned();
        let slice = slice_for(&page, &caller.tenant, EVENTS, &fingerprint)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_events(&caller.tenant, event_type, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            EVENTS,
            &fingerprint,
            |e| e.id.to_string(),
        ))
    }
}
