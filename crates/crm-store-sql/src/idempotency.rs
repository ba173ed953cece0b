//! Idempotency records (`IdempotencyRepo`): removing one and storing its reply are the same on
//! both backends; claiming one and telling whether its owner is alive are each store's own.

use crm_app::{idempotency::StoredReply, StoreError};
use crm_domain::Tenant;

use crate::{clauses::tenant_query, Arg, Unit};

pub async fn delete_idempotency<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    key: &str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM idempotency_keys WHERE workspace_id = $1 AND mode = $2 AND key = $3",
        tenant,
    )
    .arg(key);
    tx.execute(q).await?;
    Ok(())
}

pub async fn finish_idempotency<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    key: &str,
    reply: &StoredReply,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE idempotency_keys SET reply_status = $4, reply_body = $5
         WHERE workspace_id = $1 AND mode = $2 AND key = $3",
        tenant,
    )
    .arg(key)
    .arg(i64::from(reply.status))
    .arg(reply.body.as_slice());
    tx.execute(q).await?;
    Ok(())
}

/// `impl IdempotencyRepo for $tx` with the statements above, and the store's own claims and
/// reads in the braces.
#[macro_export]
macro_rules! impl_idempotency_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::IdempotencyRepo, $tx, idempotency, [
            fn delete_idempotency(tenant: &$crate::reexport::Tenant, key: &str) -> Result<(), $crate::reexport::StoreError>;
            fn finish_idempotency(tenant: &$crate::reexport::Tenant, key: &str, reply: &$crate::reexport::StoredReply) -> Result<(), $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
