//! The signal a process gives when it writes events to the outbox, so that a fan-out loop idling
//! in the same process looks again at once instead of after its idle wait.

/// Woken when this process writes events, possibly before they commit (inside a transaction)
/// or for a transaction that then rolls back: a waiter looks again, and finds what committed.
/// Events other processes write are found by polling.
pub trait OutboxSignal: Send + Sync {
    /// Wakes whoever waits now; MUST return at once, and stores nothing for a later waiter.
    fn notify_waiters(&self);
}

/// No one waits: for a process without a fan-out loop (an operator's command) and for tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoOutboxSignal;

impl OutboxSignal for NoOutboxSignal {
    fn notify_waiters(&self) {}
}
