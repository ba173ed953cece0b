//! [`crm_app::ports::Background`] on the tokio runtime the process runs on.

use std::time::Duration;

use crm_app::ports::{Background, Check, Checked, Task};

/// Spawns tasks on the current tokio runtime. Outside one (a synchronous caller) a task is
/// dropped, as it would be by the process stopping.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioBackground;

impl Background for TokioBackground {
    fn spawn(&self, task: Task) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(task));
        }
    }

    fn sleep(&self, period: Duration) -> Task {
        Box::pin(tokio::time::sleep(period))
    }

    /// On tokio's blocking pool; outside a runtime, here and now.
    fn off_thread(&self, check: Check) -> Checked {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let job = runtime.spawn_blocking(check);
                // A check that panicked answers no.
                Box::pin(async move { job.await.unwrap_or(false) })
            }
            Err(_) => Box::pin(std::future::ready(check())),
        }
    }
}
