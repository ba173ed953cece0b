//! Idempotency claims and their stored replies (`IdempotencyRepo`).

use crm_app::{idempotency::IdemRecord, StoreError};
use crm_domain::Tenant;
use sqlx::Row;

use crate::{backend, owner::Owner, rows, tx::SqliteTx};

impl SqliteTx {
    /// The process writing claims in this transaction; a read unit of work writes none.
    fn owner(&self) -> Option<&Owner> {
        match self {
            SqliteTx::Write(_, _, owner, _) => Some(owner),
            SqliteTx::Read(..) => None,
        }
    }
}

crm_store_sql::impl_idempotency_repo!(crate::SqliteTx, {
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<bool, StoreError> {
        let owner = self.owner().map(|o| o.id);
        let done = sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.clone()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    /// The single writer already keeps other writers out until commit. An owner is looked up
    /// only for an unfinished claim, and only in a write transaction (a read answers alive and
    /// leaves it to the lease).
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT key, fingerprint, reply_status, reply_body, created_at, locked_until, owner FROM idempotency_keys
             WHERE workspace_id = $1 AND mode = $2 AND key = $3",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(key)
        .fetch_optional(self.conn())
        .await
        .map_err(backend)?;
        let Some(row) = row else { return Ok(None) };
        let status: Option<i64> = row.try_get("reply_status").map_err(backend)?;
        let owner: Option<i64> = row.try_get("owner").map_err(backend)?;
        let alive = match (status, owner, self.owner()) {
            (None, Some(id), Some(me)) => me.is_alive(id),
            _ => true,
        };
        rows::idem_record(&row, alive).map(Some)
    }

    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<(), StoreError> {
        self.delete_idempotency(tenant, &rec.key).await?;
        self.insert_idempotency(tenant, rec).await?;
        Ok(())
    }
});
