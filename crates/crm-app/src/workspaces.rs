//! Creating workspaces (an operator's job) with their seeded registry and first keys.

use crm_domain::{ApiKeyId, Mode, Pipeline, PipelineId, Plan, StageId, Tenant, WorkspaceId};

use crate::{
    auth::{generate_key, hash_key, ApiKeyRecord, Workspace},
    error::AppError,
    ports::Tx,
    App,
};

/// Enum groups every new workspace has in each mode, with the default pipeline (decisions §6).
pub const SEEDED_ENUMS: [(&str, &[&str]); 2] = [
    ("contact.type", &[]),
    ("activity.type", &["note", "call", "email", "task"]),
];

#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub rate_limit_per_minute: Option<u32>,
    pub included_requests: Option<u64>,
}

/// A new workspace and its two full-scope keys, shown once.
#[derive(Debug)]
pub struct CreatedWorkspace {
    pub workspace: Workspace,
    pub test_key: String,
    pub live_key: String,
}

impl App {
    pub async fn create_workspace(
        &self,
        name: &str,
        plan: Plan,
        overrides: Overrides,
    ) -> Result<CreatedWorkspace, AppError> {
        let mut tx = self.store.begin_write().await?;
        let created = self
            .create_workspace_in(&mut *tx, name, plan, overrides)
            .await?;
        tx.commit().await?;
        Ok(created)
    }

    /// First start: creates workspace `default` on the free plan when the database has none.
    pub async fn bootstrap(&self) -> Result<Option<CreatedWorkspace>, AppError> {
        let mut tx = self.store.begin_write().await?;
        if tx.has_workspaces().await? {
            return Ok(None);
        }
        let created = self
            .create_workspace_in(&mut *tx, "default", Plan::Free, Overrides::default())
            .await?;
        tx.commit().await?;
        Ok(Some(created))
    }

    async fn create_workspace_in(
        &self,
        tx: &mut dyn Tx,
        name: &str,
        plan: Plan,
        overrides: Overrides,
    ) -> Result<CreatedWorkspace, AppError> {
        let now = self.clock.now();
        let workspace = Workspace {
            id: WorkspaceId::from_uuid(self.ids.new_uuid()),
            name: name.to_owned(),
            plan,
            created_at: now,
            overage_cap_usd: None,
            rate_limit_override: overrides.rate_limit_per_minute,
            included_requests_override: overrides.included_requests,
            history_retention_days: None,
            email_retention_days: None,
        };
        tx.insert_workspace(&workspace).await?;
        let mut keys = Vec::new();
        for mode in [Mode::Test, Mode::Live] {
            let tenant = Tenant {
                workspace_id: workspace.id.clone(),
                mode,
            };
            for (group, values) in SEEDED_ENUMS {
                tx.insert_enum_group(&tenant, group, now).await?;
                for value in values {
                    tx.insert_enum_value(&tenant, group, value, None, now)
                        .await?;
                }
            }
            let pipeline = Pipeline::default_for_workspace(
                PipelineId::from_uuid(self.ids.new_uuid()),
                now,
                || StageId::from_uuid(self.ids.new_uuid()),
            );
            tx.insert_pipeline(&tenant, &pipeline).await?;
            let secret = generate_key(mode);
            tx.insert_api_key(&ApiKeyRecord {
                id: ApiKeyId::from_uuid(self.ids.new_uuid()),
                workspace_id: workspace.id.clone(),
                mode,
                name: format!("{} key", mode.as_str()),
                scopes: vec!["*".to_owned()],
                key_hash: hash_key(&secret),
                created_at: now,
                last_used_at: None,
                revoked_at: None,
                expires_at: None,
            })
            .await?;
            keys.push(secret);
        }
        let live_key = keys.pop().unwrap_or_default();
        let test_key = keys.pop().unwrap_or_default();
        Ok(CreatedWorkspace {
            workspace,
            test_key,
            live_key,
        })
    }
}
