//! [`crm_app::ports::Background`] on the tokio runtime the process runs on.

use std::time::Duration;

use crm_app::ports::{Background, Check, Checked, Task};

/// The turns of [`Background::off_thread`]: one per core.
fn checks() -> &'static tokio::sync::Semaphore {
    static CHECKS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    CHECKS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        tokio::sync::Semaphore::new(cores)
    })
}

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

    /// On tokio's blocking pool, as many at once as the machine has cores (each Argon2 check
    /// takes 19 MiB: a burst of sign-ins waits its turn rather than taking the memory of
    /// hundreds); outside a runtime, here and now.
    fn off_thread(&self, check: Check) -> Checked {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Box::pin(async move {
                let Ok(_turn) = checks().acquire().await else {
                    return false;
                };
                // A check that panicked answers no.
                runtime.spawn_blocking(check).await.unwrap_or(false)
            }),
            Err(_) => Box::pin(std::future::ready(check())),
        }
    }
}
