//! The audit log (decisions §25): every change to configuration and access leaves one entry,
//! written by the use case in the transaction of the change ([`App::audit_entry`], then
//! [`crate::ports::AuditRepo::insert_audit`]); `GET /audit` lists them ([`App::list_audit`]).
//!
//! Entries belong to a workspace and mode, as what they record does. What belongs to the
//! workspace as a whole (settings, the plan) is recorded in both modes, so that either mode's
//! auditor sees it. The operator's CLI acts as actor `system` named `operator`, channel `cli`.

use crm_domain::{
    audit::{AuditEntry, Target},
    history::{Actor, ActorType, Channel, FieldChange, Via},
    AuditId, Mode, Tenant, WorkspaceId,
};

use crate::{
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{AuditFilter, Tx},
    App,
};

const LIST: &str = "audit";

/// The actor of a change the operator made with the CLI.
pub fn operator() -> Actor {
    Actor {
        kind: ActorType::System,
        id: None,
        name: Some("operator".into()),
    }
}

/// What one audited change is: its action (`<object>.<verb>`), its target and what changed.
#[derive(Debug, Clone)]
pub struct Audited {
    pub action: &'static str,
    pub object: &'static str,
    pub id: String,
    pub changes: Vec<FieldChange>,
}

impl Audited {
    pub fn new(
        action: &'static str,
        object: &'static str,
        id: impl Into<String>,
        changes: Vec<FieldChange>,
    ) -> Audited {
        Audited {
            action,
            object,
            id: id.into(),
            changes,
        }
    }
}

impl App {
    /// The entry of `what`, made by `caller` now.
    pub(crate) fn audit_entry(&self, caller: &Caller, what: Audited) -> AuditEntry {
        let author = caller.author(Via::Direct);
        AuditEntry {
            id: AuditId::from_uuid(self.ids.new_uuid()),
            at: self.clock.now(),
            actor: author.actor,
            channel: author.channel,
            request_id: author.request_id,
            action: what.action.to_owned(),
            target: Target {
                object: what.object.to_owned(),
                id: what.id,
            },
            changes: what.changes,
        }
    }

    /// Writes the entry of `what` by `caller` in `tx`, in the caller's tenant.
    pub(crate) async fn audit(
        &self,
        tx: &mut Box<dyn Tx>,
        caller: &Caller,
        what: Audited,
    ) -> Result<(), AppError> {
        let entry = self.audit_entry(caller, what);
        tx.insert_audit(&caller.tenant, std::slice::from_ref(&entry))
            .await?;
        Ok(())
    }

    /// Writes an entry of a change to the workspace as a whole in both its modes.
    pub(crate) async fn audit_workspace(
        &self,
        tx: &mut Box<dyn Tx>,
        workspace: &WorkspaceId,
        actor: Actor,
        channel: Channel,
        request_id: Option<String>,
        what: Audited,
    ) -> Result<(), AppError> {
        for mode in [Mode::Test, Mode::Live] {
            let entry = AuditEntry {
                id: AuditId::from_uuid(self.ids.new_uuid()),
                at: self.clock.now(),
                actor: actor.clone(),
                channel,
                request_id: request_id.clone(),
                action: what.action.to_owned(),
                target: Target {
                    object: what.object.to_owned(),
                    id: what.id.clone(),
                },
                changes: what.changes.clone(),
            };
            let tenant = Tenant {
                workspace_id: workspace.clone(),
                mode,
            };
            tx.insert_audit(&tenant, std::slice::from_ref(&entry))
                .await?;
        }
        Ok(())
    }

    /// The caller's audit entries matching `filter`, newest first.
    pub async fn list_audit(
        &self,
        caller: &Caller,
        filter: AuditFilter,
        page: PageParams,
    ) -> Result<Page<AuditEntry>, AppError> {
        let filters = format!(
            "{}\u{1f}{}\u{1f}{}",
            filter.action.as_deref().unwrap_or(""),
            filter.target_id.as_deref().unwrap_or(""),
            filter.actor_id.as_deref().unwrap_or("")
        );
        let slice = slice_for(&page, &caller.tenant, LIST, &filters)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_audit(&caller.tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            LIST,
            &filters,
            |e| e.id.to_string(),
        ))
    }
}

/// What one run of the retention job deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub audit_entries: u64,
    pub history_entries: u64,
    pub emails: u64,
}

impl App {
    /// The daily retention job (decisions §25), as of `now`: audit entries older than
    /// [`crm_domain::audit::RETENTION_DAYS`], and in each workspace with a setting, history
    /// entries and emails (not still queued) older than its `history_retention_days` and
    /// `email_retention_days`. One transaction; running it again deletes nothing more, so
    /// several processes may run it.
    pub async fn enforce_retention(
        &self,
        now: crm_domain::Timestamp,
    ) -> Result<RetentionReport, AppError> {
        use crm_domain::audit::{cutoff, RETENTION_DAYS};
        let mut report = RetentionReport::default();
        let mut tx = self.store.begin_write().await?;
        report.audit_entries = tx.delete_audit_before(cutoff(now, RETENTION_DAYS)).await?;
        for ws in tx.retention_settings().await? {
            if let Some(days) = ws.history_days {
                report.history_entries += tx
                    .delete_changes_before(&ws.workspace_id, cutoff(now, i64::from(days)))
                    .await?;
            }
            if let Some(days) = ws.email_days {
                report.emails += tx
                    .delete_emails_before(&ws.workspace_id, cutoff(now, i64::from(days)))
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(report)
    }
}
