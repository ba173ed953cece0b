//! Workspaces and the API keys that authenticate into them (`WorkspaceRepo`).

use async_trait::async_trait;
use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    ports::WorkspaceRepo,
    StoreError,
};
use crm_domain::{ApiKeyId, Tenant, Timestamp, WorkspaceId};

use crm_store_sql::Unit;

use crate::{
    rows::{self},
    tx::{out_of_range, tenant_query, PostgresTx},
};

#[async_trait]
impl WorkspaceRepo for PostgresTx {
    async fn insert_workspace(&mut self, ws: &Workspace) -> Result<(), StoreError> {
        let included = ws
            .included_requests_override
            .map(i64::try_from)
            .transpose()
            .map_err(|_| out_of_range("included_requests_override"))?;
        let q = sqlx::query(
            "INSERT INTO workspaces (id, name, plan, created_at, overage_cap_usd, rate_limit_override, included_requests_override)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ws.id.as_str())
        .bind(&ws.name)
        .bind(ws.plan.as_str())
        .bind(ws.created_at.millis())
        .bind(ws.overage_cap_usd)
        .bind(ws.rate_limit_override.map(i64::from))
        .bind(included);
        self.execute(q).await?;
        Ok(())
    }

    async fn get_workspace(&mut self, id: &WorkspaceId) -> Result<Option<Workspace>, StoreError> {
        let sql = format!(
            "SELECT {} FROM workspaces w WHERE w.id = $1",
            rows::WORKSPACE_COLUMNS
        );
        self.optional(sqlx::query(&sql).bind(id.as_str()), rows::workspace)
            .await
    }

    async fn has_workspaces(&mut self) -> Result<bool, StoreError> {
        self.exists(sqlx::query("SELECT EXISTS (SELECT 1 FROM workspaces)"))
            .await
    }

    async fn insert_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        let scopes =
            serde_json::to_string(&key.scopes).map_err(|e| StoreError::Backend(Box::new(e)))?;
        // The id and the hash are unique; ON CONFLICT reports a clash without aborting the transaction.
        let q = sqlx::query(
            "INSERT INTO api_keys (workspace_id, mode, id, name, scopes, key_hash, created_at, last_used_at, revoked_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
        )
        .bind(key.workspace_id.as_str())
        .bind(key.mode.as_str())
        .bind(key.id.as_str())
        .bind(&key.name)
        .bind(scopes)
        .bind(&key.key_hash)
        .bind(key.created_at.millis())
        .bind(key.last_used_at.map(Timestamp::millis))
        .bind(key.revoked_at.map(Timestamp::millis))
        .bind(key.expires_at.map(Timestamp::millis));
        match self.execute(q).await? {
            0 => Err(StoreError::Duplicate),
            _ => Ok(()),
        }
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
        self.optional(sqlx::query(&sql).bind(hash), |r| {
            Ok((rows::api_key(r)?, rows::workspace(r)?))
        })
        .await
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
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::api_key)
            .await
    }
}
