//! The outbox signal ([`crm_app::ports::OutboxSignal`]) as a tokio [`Notify`], which the
//! webhook fan-out loop waits on.

use std::sync::Arc;

use crm_app::ports::OutboxSignal;
use tokio::sync::Notify;

/// Wakes the tasks waiting on the [`Notify`] it shares.
pub struct OutboxNotify(pub Arc<Notify>);

impl OutboxSignal for OutboxNotify {
    fn notify_waiters(&self) {
        self.0.notify_waiters();
    }
}
