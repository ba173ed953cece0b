//! Custom fields, enum groups and object types (`RegistryRepo`): the same statements on both
//! backends. Fields, enum values and object types are appended at their list's highest
//! position + 1, which is safe only while no other transaction appends to the same list; how a
//! store makes sure of that is its [`PositionLocks`].

use std::future::Future;

use crm_app::StoreError;
use crm_domain::{registry::FieldDef, ObjectKind, ObjectType, Registry, Tenant, Timestamp};

use crate::{
    clauses::tenant_query,
    corrupt,
    rows::{enum_value, field_def},
    sql::Col,
    Arg, Unit,
};

/// A list whose entries are appended at its highest position + 1.
#[derive(Clone, Copy, Debug)]
pub enum PositionList {
    /// An object's custom fields.
    Fields(ObjectKind),
    /// The tenant's object types.
    ObjectTypes,
}

/// How a store keeps two transactions from appending at the same position (a single writer
/// needs nothing; Postgres takes locks).
pub trait PositionLocks: Unit {
    /// Locks a list that has no parent row to lock, until the transaction ends.
    fn lock_position_list(
        &mut self,
        tenant: &Tenant,
        list: PositionList,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Locks an enum group's row (which exists) until the transaction ends, for its values.
    fn lock_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// An object's custom fields, and every enum group with its values.
pub async fn load_registry<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
) -> Result<Registry, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT key, label, data_type, enum_group, required, is_unique FROM custom_fields
         WHERE workspace_id = $1 AND mode = $2 AND object = $3 ORDER BY position, key",
        tenant,
    )
    .arg(object.as_str());
    let fields = tx.all(q, |r| field_def(r, object)).await?;
    let q = tenant_query::<U::Db>(
        "SELECT grp FROM enum_groups WHERE workspace_id = $1 AND mode = $2",
        tenant,
    );
    let groups = tx.all(q, |r| r.col::<String>("grp")).await?;
    let q = tenant_query::<U::Db>(
        "SELECT grp, value, label FROM enum_values WHERE workspace_id = $1 AND mode = $2 ORDER BY grp, position",
        tenant,
    );
    let values = tx.all(q, enum_value).await?;

    let mut registry = Registry {
        fields,
        ..Registry::default()
    };
    for group in groups {
        registry.enums.insert(group, Vec::new());
    }
    for (group, value) in values {
        registry.enums.entry(group).or_default().push(value);
    }
    Ok(registry)
}

/// Whether the group was new.
pub async fn insert_enum_group<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    group: &str,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let q = tenant_query::<U::Db>(
        "INSERT INTO enum_groups (workspace_id, mode, grp, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        tenant,
    )
    .arg(group)
    .arg(now.millis());
    Ok(tx.execute(q).await? == 1)
}

/// Whether the value was new; its group is created if need be.
pub async fn insert_enum_value<U: PositionLocks>(
    tx: &mut U,
    tenant: &Tenant,
    group: &str,
    value: &str,
    label: Option<&str>,
    now: Timestamp,
) -> Result<bool, StoreError> {
    insert_enum_group(tx, tenant, group, now).await?;
    tx.lock_enum_group(tenant, group).await?;
    let q = tenant_query::<U::Db>(
        "INSERT INTO enum_values (workspace_id, mode, grp, value, label, created_at, position)
         SELECT $1, $2, $3, $4, $5, $6, COALESCE(MAX(position), 0) + 1 FROM enum_values
         WHERE workspace_id = $1 AND mode = $2 AND grp = $3
         ON CONFLICT DO NOTHING",
        tenant,
    )
    .arg(group)
    .arg(value)
    .arg(label)
    .arg(now.millis());
    Ok(tx.execute(q).await? == 1)
}

/// Whether the field was new.
pub async fn insert_field<U: PositionLocks>(
    tx: &mut U,
    tenant: &Tenant,
    field: &FieldDef,
    now: Timestamp,
) -> Result<bool, StoreError> {
    tx.lock_position_list(tenant, PositionList::Fields(field.object))
        .await?;
    let q = tenant_query::<U::Db>(
        "INSERT INTO custom_fields (workspace_id, mode, object, key, label, data_type, enum_group, required, created_at, is_unique, position)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE(MAX(position), 0) + 1 FROM custom_fields
         WHERE workspace_id = $1 AND mode = $2 AND object = $3
         ON CONFLICT DO NOTHING",
        tenant,
    )
    .arg(field.object.as_str())
    .arg(field.key.as_str())
    .arg(field.label.as_deref())
    .arg(field.data_type.as_str())
    .arg(field.enum_group.as_deref())
    .arg(field.required)
    .arg(now.millis())
    .arg(field.unique);
    Ok(tx.execute(q).await? == 1)
}

/// Every custom field of the tenant, by object.
pub async fn list_fields<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Vec<FieldDef>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT object, key, label, data_type, enum_group, required, is_unique FROM custom_fields
         WHERE workspace_id = $1 AND mode = $2 ORDER BY object, position, key",
        tenant,
    );
    tx.all(q, |r| {
        let object: String = r.col("object")?;
        field_def(
            r,
            ObjectKind::parse(&object).ok_or_else(|| corrupt("object"))?,
        )
    })
    .await
}

/// Whether the object type was new.
pub async fn insert_object_type<U: PositionLocks>(
    tx: &mut U,
    tenant: &Tenant,
    t: &ObjectType,
    now: Timestamp,
) -> Result<bool, StoreError> {
    tx.lock_position_list(tenant, PositionList::ObjectTypes)
        .await?;
    let q = tenant_query::<U::Db>(
        "INSERT INTO object_types (workspace_id, mode, key, label, created_at, position)
         SELECT $1, $2, $3, $4, $5, COALESCE(MAX(position), 0) + 1 FROM object_types
         WHERE workspace_id = $1 AND mode = $2
         ON CONFLICT DO NOTHING",
        tenant,
    )
    .arg(t.key.as_str())
    .arg(t.label.as_deref())
    .arg(now.millis());
    Ok(tx.execute(q).await? == 1)
}

pub async fn list_object_types<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
) -> Result<Vec<ObjectType>, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT key, label FROM object_types WHERE workspace_id = $1 AND mode = $2 ORDER BY position, key",
        tenant,
    );
    tx.all(q, |r| {
        Ok(ObjectType {
            key: r.col("key")?,
            label: r.col("label")?,
        })
    })
    .await
}

/// `impl RegistryRepo for $tx` with the statements above; `$tx` implements [`PositionLocks`].
#[macro_export]
macro_rules! impl_registry_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::RegistryRepo, $tx, registry, [
            fn load_registry(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind) -> Result<$crate::reexport::Registry, $crate::reexport::StoreError>;
            fn insert_enum_group(tenant: &$crate::reexport::Tenant, group: &str, now: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn insert_enum_value(tenant: &$crate::reexport::Tenant, group: &str, value: &str, label: Option<&str>, now: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn insert_field(tenant: &$crate::reexport::Tenant, field: &$crate::reexport::FieldDef, now: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn list_fields(tenant: &$crate::reexport::Tenant) -> Result<Vec<$crate::reexport::FieldDef>, $crate::reexport::StoreError>;
            fn insert_object_type(tenant: &$crate::reexport::Tenant, t: &$crate::reexport::ObjectType, now: $crate::reexport::Timestamp) -> Result<bool, $crate::reexport::StoreError>;
            fn list_object_types(tenant: &$crate::reexport::Tenant) -> Result<Vec<$crate::reexport::ObjectType>, $crate::reexport::StoreError>;
        ], []);
    };
}
