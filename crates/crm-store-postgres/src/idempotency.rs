//! Idempotency claims and their stored replies (`IdempotencyRepo`).

use crm_app::{idempotency::IdemRecord, StoreError};
use crm_domain::Tenant;

use crm_store_sql::Unit;

use crate::{
    rows::{self, get},
    tx::tenant_query,
};

crm_store_sql::impl_idempotency_repo!(crate::PostgresTx, {
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<bool, StoreError> {
        let owner = self.owner();
        let q = tenant_query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.as_slice()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner);
        Ok(self.execute(q).await? == 1)
    }

    /// Locked `FOR UPDATE` in a write. An unfinished claim of another owner is alive while that
    /// owner's session holds its lock: trying the lock for this transaction tells (and, when it
    /// is free, keeps it until this transaction ends, which is harmless: the owner is gone).
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3{}",
            rows::IDEM_COLUMNS,
            self.for_update()
        );
        let found = self
            .optional(tenant_query(&sql, tenant).bind(key), |row| {
                Ok((
                    rows::idem_record(row, true)?,
                    get::<Option<i64>>(row, "owner")?,
                ))
            })
            .await?;
        let Some((mut record, owner)) = found else {
            return Ok(None);
        };
        if let (None, Some(owner)) = (&record.reply, owner) {
            if Some(owner) != self.owner() {
                let q = sqlx::query("SELECT pg_try_advisory_xact_lock($1, $2)")
                    .bind(crate::owner::OWNER_LOCK_CLASS)
                    .bind(crate::owner::lock_key(owner));
                let free = self.exists(q).await?;
                record.owner_alive = !free;
            }
        }
        Ok(Some(record))
    }

    /// In place, so that a writer waiting on the row's lock reads the new claim once this
    /// transaction commits.
    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        rec: &IdemRecord,
    ) -> Result<(), StoreError> {
        let owner = self.owner();
        let q = tenant_query(
            "INSERT INTO idempotency_keys (workspace_id, mode, key, fingerprint, reply_status, reply_body, created_at, locked_until, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (workspace_id, mode, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
               reply_status = EXCLUDED.reply_status, reply_body = EXCLUDED.reply_body,
               created_at = EXCLUDED.created_at, locked_until = EXCLUDED.locked_until, owner = EXCLUDED.owner",
            tenant,
        )
        .bind(&rec.key)
        .bind(&rec.fingerprint)
        .bind(rec.reply.as_ref().map(|r| i64::from(r.status)))
        .bind(rec.reply.as_ref().map(|r| r.body.as_slice()))
        .bind(rec.created_at.millis())
        .bind(rec.locked_until.millis())
        .bind(owner);
        self.execute(q).await?;
        Ok(())
    }
});
