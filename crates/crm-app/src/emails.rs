//! Email: what `send_email` actions (and later sequence steps) send.

use crm_domain::{
    rule::{Automation, AutomationDef, EmailAction},
    ContactId, Tenant,
};
use serde_json::Value;

use crate::{
    automations::{fail, ActionError},
    error::AppError,
    ports::Tx,
    write::{PendingEvent, RecordRef},
    App,
};

impl App {
    /// Checks a rule's `send_email` actions when it is created or changed.
    pub(crate) async fn check_email_actions(
        &self,
        _tx: &mut dyn Tx,
        _tenant: &Tenant,
        _def: &AutomationDef,
    ) -> Result<(), AppError> {
        Ok(())
    }

    /// The recipient of a `send_email` without `to`: the triggering contact, or the deal's
    /// primary contact.
    pub(crate) async fn default_recipient(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
    ) -> Result<Option<(ContactId, String)>, AppError> {
        let contact_id = match &event.record {
            RecordRef::Contact(id) => Some(id.clone()),
            RecordRef::Deal(_) => event
                .data
                .get("primary_contact_id")
                .and_then(Value::as_str)
                .and_then(|s| ContactId::parse(s).ok()),
        };
        let Some(id) = contact_id else {
            return Ok(None);
        };
        let contact = tx.get_contact(tenant, &id).await?;
        Ok(contact.and_then(|c| c.email.map(|e| (c.id, e.as_str().to_owned()))))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send_email_action(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
        _rule: &Automation,
        to: Option<String>,
        _email: EmailAction,
        _company: Option<&Value>,
    ) -> Result<Value, ActionError> {
        let recipient = match to {
            Some(to) => Some(to),
            None => self
                .default_recipient(tx, tenant, event)
                .await?
                .map(|(_, e)| e),
        };
        if recipient.is_none() {
            return Err(fail(
                "no_recipient",
                "no `to`, and the triggering record has no contact with an email",
            ));
        }
        Err(fail("internal_error", "sending email is not built yet"))
    }
}
