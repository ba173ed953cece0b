//! Grouping writes into shared transactions (write coalescing). What a write does, alone or with
//! others, is the use case's ([`GroupedWrites`]); when it runs and with which others is the
//! adapter's ([`WriteGrouping`]), which knows nothing of what the writes are.

use std::sync::Arc;

use async_trait::async_trait;

/// A kind of write that can run alone or several in one transaction. `J` is one write's input,
/// `R` its outcome.
#[async_trait]
pub trait GroupedWrites<J, R>: Send + Sync {
    /// Runs `job` in a transaction of its own.
    async fn alone(&self, job: J) -> R;

    /// Runs `jobs` in one transaction, answering each one's outcome, in their order: the one it
    /// would have had alone.
    async fn together(&self, jobs: Vec<J>) -> Vec<R>;

    /// The outcome of a job whose group was lost before it ran (the process is ending).
    fn lost(&self) -> R;

    /// An owned handle on the same writes, for a task that outlives the call.
    fn handle(&self) -> Arc<dyn GroupedWrites<J, R>>;
}

/// Decides when each write runs: alone, or in a group with others.
///
/// [`WriteGrouping::run`] MUST answer `job` with the outcome `writes` gave it (through `alone`, or
/// through `together` at its index), or with [`GroupedWrites::lost`] when no task is left to run
/// it. It MUST NOT make a write wait while no other write of its kind is in flight, and MUST NOT
/// leave a queued write without a task that will run it. A job whose caller went away before its
/// group began MAY be dropped without running.
#[async_trait]
pub trait WriteGrouping<J: Send + 'static, R: Send + 'static>: Send + Sync {
    async fn run(&self, writes: &dyn GroupedWrites<J, R>, job: J) -> R;
}
