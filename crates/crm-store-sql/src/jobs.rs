//! What every background job table (`imports`, `exports`) shares: a claim under a lease. A job
//! row holds `status`, `claim_token` and `lease_until`; a worker claims one that is `queued`, or
//! `running` under a lease that ended (its worker stopped), and renews the lease with each step
//! it commits. The claim ends with the backend's `SKIP LOCKED` clause where it has one, so two
//! workers never take the same job.

use crm_app::StoreError;
use crm_domain::{Tenant, Timestamp};
use sqlx::Database;

use crate::{clauses::tenant_query, rows::tenant_of, Arg, Unit};

/// Claims one due job of any tenant in `table` for `claim_token` until `lease_until`, answering
/// its `columns` decoded by `decode`.
pub async fn claim_next<U: Unit, T: Send>(
    tx: &mut U,
    table: &'static str,
    columns: &'static str,
    now: Timestamp,
    lease_until: Timestamp,
    claim_token: &str,
    decode: impl Fn(&<U::Db as Database>::Row) -> Result<T, StoreError> + Send + Sync,
) -> Result<Option<(Tenant, T)>, StoreError> {
    let sql = format!(
        "UPDATE {table} SET status = 'running', claim_token = $1, lease_until = $2
         WHERE (workspace_id, mode, id) IN (
             SELECT workspace_id, mode, id FROM {table}
             WHERE status IN ('queued', 'running') AND lease_until <= $3
             ORDER BY lease_until LIMIT 1{})
         RETURNING {columns}",
        tx.skip_locked()
    );
    let q = sqlx::query::<U::Db>(&sql)
        .arg(claim_token)
        .arg(lease_until.millis())
        .arg(now.millis());
    tx.optional(q, |r| Ok((tenant_of(r)?, decode(r)?))).await
}

/// Extends the claim `claim_token` on the job `id` of `table` to `lease_until`; `false` when
/// the job is no longer running under that token.
pub async fn renew_claim<U: Unit>(
    tx: &mut U,
    table: &'static str,
    tenant: &Tenant,
    id: &str,
    claim_token: &str,
    lease_until: Timestamp,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE {table} SET lease_until = $5 \
         WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND claim_token = $4 AND status = 'running'"
    );
    let q = tenant_query::<U::Db>(&sql, tenant)
        .arg(id)
        .arg(claim_token)
        .arg(lease_until.millis());
    Ok(tx.execute(q).await? == 1)
}
