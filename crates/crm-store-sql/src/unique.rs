//! Unique custom fields (`UniqueRepo`): the same statements on both backends but for reading a
//! key of a JSON column ([`Unit::push_json_member`]).

use crm_app::StoreError;
use crm_domain::{ObjectKind, Tenant};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::{
    clauses::{tenant_query, tenant_where},
    record_table,
    sql::{Col, PushArg},
    Arg, Unit,
};

/// Contacts and companies can be merged tombstones, which hold no value for uniqueness.
fn push_not_merged<DB: sqlx::Database>(qb: &mut QueryBuilder<'_, DB>, object: ObjectKind) {
    if matches!(object, ObjectKind::Contact | ObjectKind::Company) {
        qb.push(" AND merged_into IS NULL");
    }
}

pub async fn holder_of_value<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    key: &str,
    value: &Value,
    except: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let json = value.to_string();
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT id FROM {}", record_table(object)));
    tenant_where(&mut qb, tenant);
    qb.push(" AND ");
    U::push_json_member(&mut qb, "custom_fields", key);
    qb.push(" = ").push_arg(json.as_str()).push(U::JSON);
    if let Some(id) = except {
        qb.push(" AND id <> ").push_arg(id);
    }
    push_not_merged(&mut qb, object);
    qb.push(" LIMIT 1");
    Ok(tx
        .all_built(&mut qb, |r| r.col::<String>("id"))
        .await?
        .into_iter()
        .next())
}

pub async fn values_collide<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    key: &str,
) -> Result<bool, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!(
        "SELECT COUNT(*) AS n FROM {}",
        record_table(object)
    ));
    tenant_where(&mut qb, tenant);
    qb.push(" AND ");
    U::push_json_member(&mut qb, "custom_fields", key);
    qb.push(" IS NOT NULL");
    push_not_merged(&mut qb, object);
    qb.push(" GROUP BY ");
    U::push_json_member(&mut qb, "custom_fields", key);
    qb.push(" HAVING COUNT(*) > 1 LIMIT 1");
    Ok(!tx
        .all_built(&mut qb, |r| r.col::<i64>("n"))
        .await?
        .is_empty())
}

pub async fn make_field_unique<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    key: &str,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "UPDATE custom_fields SET is_unique = $5 WHERE workspace_id = $1 AND mode = $2 AND object = $3 AND key = $4",
        tenant,
    )
    .arg(object.as_str())
    .arg(key)
    .arg(true);
    tx.execute(q).await?;
    Ok(())
}

/// `impl UniqueRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_unique_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::UniqueRepo, $tx, unique, [
            fn holder_of_value(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, key: &str, value: &serde_json::Value, except: Option<&str>) -> Result<Option<String>, $crate::reexport::StoreError>;
            fn values_collide(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, key: &str) -> Result<bool, $crate::reexport::StoreError>;
            fn make_field_unique(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, key: &str) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
