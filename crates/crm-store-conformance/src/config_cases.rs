//! The configuration change feed (`Store::follow_config_changes`): what lets a process cache keys,
//! plans, registries and rules without ever serving a change that committed before the request.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crm_app::{ports::ConfigEvents, Store};
use crm_domain::WorkspaceId;

use crate::fixtures::workspace;

/// Records what a store reports.
#[derive(Default)]
pub struct Recorded {
    log: Mutex<Vec<Heard>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    Changed(WorkspaceId),
    Unknown,
    Connected,
    Disconnected,
}

impl Recorded {
    fn push(&self, h: Heard) {
        self.log.lock().unwrap().push(h);
    }

    pub fn heard(&self) -> Vec<Heard> {
        self.log.lock().unwrap().clone()
    }

    /// Whether `ws`'s change was reported, by name or as an unknown change after the first connect.
    pub fn knows_of(&self, ws: &WorkspaceId) -> bool {
        let log = self.heard();
        let connected = log.iter().position(|h| *h == Heard::Connected);
        log.iter().enumerate().any(|(i, h)| match h {
            Heard::Changed(w) => w == ws,
            Heard::Unknown => connected.is_some_and(|c| i > c),
            _ => false,
        })
    }
}

impl ConfigEvents for Recorded {
    fn changed(&self, workspace: &WorkspaceId) {
        self.push(Heard::Changed(workspace.clone()));
    }
    fn changed_unknown(&self) {
        self.push(Heard::Unknown);
    }
    fn connected(&self) {
        self.push(Heard::Connected);
    }
    fn disconnected(&self) {
        self.push(Heard::Disconnected);
    }
}

/// Starts `store`'s feed into a fresh recorder and waits until it is connected.
pub async fn follow(store: &Arc<dyn Store>) -> (Arc<Recorded>, tokio::task::JoinHandle<()>) {
    let recorded = Arc::new(Recorded::default());
    let task = tokio::spawn({
        let (store, recorded) = (store.clone(), recorded.clone());
        async move { store.follow_config_changes(recorded).await }
    });
    assert!(
        eventually(|| recorded.heard().contains(&Heard::Connected)).await,
        "the feed never connected"
    );
    (recorded, task)
}

/// Polls `f` for up to five seconds.
pub async fn eventually(f: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

async fn commit_marked(store: &Arc<dyn Store>, ws: &WorkspaceId) {
    let mut tx = store.begin_write().await.unwrap();
    assert!(!tx.config_changed());
    tx.mark_config_changed(ws);
    assert!(tx.config_changed());
    tx.commit().await.unwrap();
}

/// This process hears of its own change before `commit` returns; a change rolled back is never
/// heard of; a transaction that marked nothing reports nothing.
pub async fn config_changes_reach_this_process_at_commit(store: Arc<dyn Store>) {
    let (recorded, task) = follow(&store).await;
    let (changed, rolled_back) = (workspace().id, workspace().id);

    commit_marked(&store, &changed).await;
    assert!(
        recorded.heard().contains(&Heard::Changed(changed.clone())),
        "{:?}",
        recorded.heard()
    );

    let mut tx = store.begin_write().await.unwrap();
    tx.mark_config_changed(&rolled_back);
    drop(tx);
    let before = recorded.heard().len();
    store.begin_write().await.unwrap().commit().await.unwrap();
    // Room for a remote path (NOTIFY, polling) to deliver what it would.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = recorded.heard();
    assert!(!after.contains(&Heard::Changed(rolled_back)), "{after:?}");
    assert!(
        after[before..]
            .iter()
            .all(|h| matches!(h, Heard::Changed(w) if *w == changed) || *h == Heard::Unknown),
        "{after:?}"
    );
    task.abort();
}

/// A change committed through `writer` reaches a follower of `other`, another handle on the same
/// database (another process).
pub async fn config_changes_reach_another_process(writer: Arc<dyn Store>, other: Arc<dyn Store>) {
    let (recorded, task) = follow(&other).await;
    let ws = workspace().id;
    commit_marked(&writer, &ws).await;
    assert!(
        eventually(|| recorded.knows_of(&ws)).await,
        "{:?}",
        recorded.heard()
    );
    task.abort();
}
