//! The outbox of events.

use async_trait::async_trait;
use crm_domain::{Event, Tenant};

use super::{Slice, StoreError};

#[async_trait]
pub trait EventRepo {
    async fn insert_event(&mut self, tenant: &Tenant, event: &Event) -> Result<(), StoreError>;
    /// [`EventRepo::insert_event`] for each of `events`; stores override it with one statement.
    async fn insert_events(&mut self, tenant: &Tenant, events: &[Event]) -> Result<(), StoreError> {
        for event in events {
            self.insert_event(tenant, event).await?;
        }
        Ok(())
    }
    /// Newest first, optionally of one type.
    async fn list_events(
        &mut self,
        tenant: &Tenant,
        event_type: Option<&str>,
        slice: &Slice,
    ) -> Result<Vec<Event>, StoreError>;
}
