//! The retention job (decisions §25): once a day, audit entries older than 400 days, and history
//! entries and emails older than each workspace's settings, are deleted
//! (`App::enforce_retention`), and ended console sessions are swept. Every `serve` process runs it; a run deletes only what is due, so
//! two processes running it at once do the same work once. `crm-server retention run` runs it
//! now (or as of `--at`), for operators and tests.

use std::time::Duration;

use crm_app::App;

/// Before the first run: the server settles first.
const FIRST_RUN_AFTER: Duration = Duration::from_secs(60);

/// Runs until aborted.
pub async fn enforce_forever(app: App, every: Duration) {
    tokio::time::sleep(FIRST_RUN_AFTER.min(every)).await;
    loop {
        match app.enforce_retention(app.clock.now()).await {
            Ok(r) => tracing::info!(
                audit_entries = r.audit_entries,
                history_entries = r.history_entries,
                emails = r.emails,
                "retention job ran"
            ),
            Err(e) => tracing::error!(error = %e, "retention job failed"),
        }
        // Ended console sessions and sign-in failures past every throttling window.
        if let Err(e) = app.sweep_sessions().await {
            tracing::error!(error = %e, "sweeping console sessions failed");
        }
        tokio::time::sleep(every).await;
    }
}
