//! What every write shares: reference checks, events, and the idempotency result stored inside
//! the write's own transaction.

use crm_domain::{registry::ReferenceCheck, Event, EventId, EventType, Tenant, Timestamp, ValidationError};
use serde_json::Value;

use crate::{
    error::AppError,
    idempotency::{IdemClaim, StoredReply},
    ports::Tx,
    App,
};

/// Whether a write tells the world. API writes emit events; batch writes and automation actions
/// are event-silent (spec, Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    Events,
    Silent,
}

/// Fails with `invalid_reference` when a referenced record does not exist in the tenant.
pub(crate) async fn check_references(tx: &mut dyn Tx, tenant: &Tenant, refs: &[ReferenceCheck]) -> Result<(), AppError> {
    for r in refs {
        let exists = match r.object() {
            Some(object) => tx.record_exists(tenant, object, &r.id).await?,
            None => false,
        };
        if !exists {
            return Err(ValidationError::InvalidReference { field: r.field.clone(), value: r.id.clone() }.into());
        }
    }
    Ok(())
}

/// Writes the reply of a create to its idempotency record, inside the create's transaction.
pub(crate) async fn finish_in_tx(tx: &mut dyn Tx, tenant: &Tenant, idem: Option<&IdemClaim>, status: u16, body: &Value) -> Result<(), AppError> {
    if let Some(claim) = idem {
        let reply = StoredReply { status, body: serde_json::to_vec(body).map_err(|e| AppError::Internal(e.to_string()))? };
        tx.finish_idempotency(tenant, &claim.key, &reply).await?;
    }
    Ok(())
}

impl App {
    /// Writes an event to the outbox, unless the write is silent.
    pub(crate) async fn emit(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        emit: Emit,
        event_type: EventType,
        now: Timestamp,
        data: Value,
        changed_fields: Option<Vec<String>>,
        previous_stage: Option<Option<String>>,
    ) -> Result<(), AppError> {
        if emit == Emit::Silent {
            return Ok(());
        }
        let event = Event {
            id: EventId::from_uuid(self.ids.new_uuid()),
            event_type,
            mode: tenant.mode,
            created_at: now,
            data,
            changed_fields,
            previous_stage,
        };
        Ok(tx.insert_event(tenant, &event).await?)
    }
}
