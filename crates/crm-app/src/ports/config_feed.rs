//! The feed of configuration changes a store reports ([`super::Store::follow_config_changes`]),
//! which lets a process keep configuration in memory (see [`super::ConfigCache`]).

use std::sync::Arc;

use crm_domain::WorkspaceId;

/// Where a store reports changes to what processes cache about a workspace (its API keys, plan
/// and settings, registry, automations and sequences): see [`super::ConfigCache`].
pub trait ConfigEvents: Send + Sync {
    /// A transaction that changed `workspace`'s configuration committed.
    fn changed(&self, workspace: &WorkspaceId);
    /// Some workspace's configuration changed; which is not known.
    fn changed_unknown(&self);
    /// From now on every change is reported.
    fn connected(&self);
    /// Changes may be missed until the next `connected`.
    fn disconnected(&self);
}

/// What a write transaction marked with [`super::Tx::mark_config_changed`], for stores to announce at
/// commit: to other processes by their own means, to this one through [`ConfigMarks::committed`].
#[derive(Default)]
pub struct ConfigMarks {
    workspaces: Vec<WorkspaceId>,
    local: Option<Arc<dyn ConfigEvents>>,
    /// A dry run's transaction ([`super::Tx::roll_back_at_commit`]): `commit` rolls it back.
    roll_back: bool,
}

impl ConfigMarks {
    /// `local`: this process's listener, once [`super::Store::follow_config_changes`] runs.
    pub fn new(local: Option<Arc<dyn ConfigEvents>>) -> ConfigMarks {
        ConfigMarks {
            workspaces: Vec::new(),
            local,
            roll_back: false,
        }
    }

    /// Makes the transaction's `commit` a rollback that announces nothing (a dry run).
    pub fn roll_back_at_commit(&mut self) {
        self.roll_back = true;
    }

    /// Whether `commit` must roll back instead (see [`ConfigMarks::roll_back_at_commit`]).
    pub fn rolls_back(&self) -> bool {
        self.roll_back
    }

    pub fn mark(&mut self, workspace: &WorkspaceId) {
        if !self.workspaces.contains(workspace) {
            self.workspaces.push(workspace.clone());
        }
    }

    pub fn workspaces(&self) -> &[WorkspaceId] {
        &self.workspaces
    }

    /// Tells this process, after the transaction committed.
    pub fn committed(self) {
        if let Some(local) = self.local {
            for ws in &self.workspaces {
                local.changed(ws);
            }
        }
    }
}
