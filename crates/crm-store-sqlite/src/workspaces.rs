//! Workspaces and the API keys that authenticate into them (`WorkspaceRepo`).

use async_trait::async_trait;
use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    ports::WorkspaceRepo,
    StoreError,
};
use crm_domain::{ApiKeyId, Tenant, Timestamp, WorkspaceId};
use sqlx::Row;

use crate::{
    backend, rows,
    tx::{is_unique_violation, SqliteTx},
};

#[async_trait]
impl WorkspaceRepo for SqliteTx {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO workspaces (id, name, plan, created_at, overage_cap_usd, rate_limit_override, included_requests_override)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ws.id.as_str())
        .bind(&ws.name)
        .bind(ws.plan.as_str())
        .bind(ws.created_at.millis())
        .bind(ws.overage_cap_usd)
        .bind(ws.rate_limit_override.map(i64::from))
        .bind(ws.included_requests_override.map(|v| v as i64))
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError> {
        let sql = format!(
            "SELECT {} FROM workspaces w WHERE w.id = $1",
            rows::WORKSPACE_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::workspace).transpose()
    }

    async fn has_workspaces(&mut self) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM workspaces)")
            .fetch_one(self.conn())
            .await
            .map_err(backend)?;
        row.try_get::<bool, _>(0).map_err(backend)
    }

    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (workspace_id, mode, id, name, scopes, key_hash, created_at, last_used_at, revoked_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(key.workspace_id.as_str())
        .bind(key.mode.as_str())
        .bind(key.id.as_str())
        .bind(&key.name)
        .bind(serde_json::to_string(&key.scopes).unwrap_or_else(|_| "[]".into()))
        .bind(&key.key_hash)
        .bind(key.created_at.millis())
        .bind(key.last_used_at.map(Timestamp::millis))
        .bind(key.revoked_at.map(Timestamp::millis))
        .bind(key.expires_at.map(Timestamp::millis))
        .execute(self.conn())
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Duplicate } else { backend(e) })?;
        Ok(())
    }

    async fn find_api_key(
        &mut self,
        hash: &str,
    ) -> Result<Option<(ApiKeyRecord, Workspace)>, StoreError> {
        let sql = format!(
            "SELECT {}, {} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.key_hash = $1",
            rows::KEY_COLUMNS,
            rows::WORKSPACE_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(hash)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.map(|r| Ok((rows::api_key(&r)?, rows::workspace(&r)?)))
            .transpose()
    }

    async fn get_api_key(
        &mut self,
        tenant: &Tenant,
        id: &ApiKeyId,
    ) -> Result<Option<ApiKeyRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM api_keys k WHERE k.workspace_id = $1 AND k.mode = $2 AND k.id = $3",
            rows::KEY_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::api_key).transpose()
    }
}
