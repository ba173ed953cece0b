//! Work that outlives the request that started it, and waiting between its attempts. The use
//! cases only say what to run; the runtime (a tokio task, in crm-runtime) is the adapter's.

use std::{future::Future, pin::Pin, time::Duration};

/// A future the port runs or hands back, owned and sendable.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// CPU-bound work that answers yes or no (a password's check), to run off the threads that serve
/// requests.
pub type Check = Box<dyn FnOnce() -> bool + Send + 'static>;

/// The answer of a [`Check`] once it ran.
pub type Checked = Pin<Box<dyn Future<Output = bool> + Send + 'static>>;

/// Runs tasks beside the requests.
pub trait Background: Send + Sync {
    /// Starts `task` and returns at once: the caller MUST NOT wait for it. A task MAY be
    /// dropped unfinished when the process stops.
    fn spawn(&self, task: Task);

    /// A future that completes once `period` has passed.
    fn sleep(&self, period: Duration) -> Task;

    /// Runs `check` where it holds up no request (an Argon2 check takes tens of milliseconds
    /// of one core) and answers its result.
    fn off_thread(&self, check: Check) -> Checked;
}

/// Runs nothing: for a process that starts no background work (tests of one use case). A task
/// handed to it is dropped, as it would be by a process stopping.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBackground;

impl Background for NoBackground {
    fn spawn(&self, _task: Task) {}

    fn sleep(&self, _period: Duration) -> Task {
        Box::pin(std::future::ready(()))
    }

    fn off_thread(&self, check: Check) -> Checked {
        Box::pin(std::future::ready(check()))
    }
}
