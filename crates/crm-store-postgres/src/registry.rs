//! Custom fields, enum groups and object types (`RegistryRepo`).

use async_trait::async_trait;
use crm_app::{ports::RegistryRepo, StoreError};
use crm_domain::{registry::FieldDef, ObjectKind, ObjectType, Registry, Tenant, Timestamp};

use crm_store_sql::Unit;

use crate::{
    rows::{self, get},
    tx::{tenant_query, PostgresTx},
};

#[async_trait]
impl RegistryRepo for PostgresTx {
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError> {
        let fields = tenant_query(
            "SELECT key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3 ORDER BY position, key",
            tenant,
        )
        .bind(object.as_str());
        let fields = self.all(fields, |r| rows::field_def(r, object)).await?;
        let groups = tenant_query(
            "SELECT grp FROM enum_groups WHERE workspace_id = $1 AND mode = $2",
            tenant,
        );
        let groups = self.all(groups, |r| get::<String>(r, "grp")).await?;
        let values = tenant_query(
            "SELECT grp, value, label FROM enum_values WHERE workspace_id = $1 AND mode = $2 ORDER BY grp, position",
            tenant,
        );
        let values = self.all(values, rows::enum_value).await?;

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

    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let q = tenant_query(
            "INSERT INTO enum_groups (workspace_id, mode, grp, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(group)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn insert_enum_value(
        &mut self,
        tenant: &Tenant,
        group: &str,
        value: &str,
        label: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.insert_enum_group(tenant, group, now).await?;
        self.lock_enum_group(tenant, group).await?;
        let q = tenant_query(
            "INSERT INTO enum_values (workspace_id, mode, grp, value, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, COALESCE(MAX(position), 0) + 1 FROM enum_values
             WHERE workspace_id = $1 AND mode = $2 AND grp = $3
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(group)
        .bind(value)
        .bind(label)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.lock_registry_list(tenant, &format!("custom_fields:{}", field.object.as_str()))
            .await?;
        let q = tenant_query(
            "INSERT INTO custom_fields (workspace_id, mode, object, key, label, data_type, enum_group, required, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE(MAX(position), 0) + 1 FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(field.object.as_str())
        .bind(&field.key)
        .bind(field.label.as_deref())
        .bind(field.data_type.as_str())
        .bind(field.enum_group.as_deref())
        .bind(field.required)
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError> {
        let q = tenant_query(
            "SELECT object, key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 ORDER BY object, position, key",
            tenant,
        );
        self.all(q, |r| {
            let object: String = get(r, "object")?;
            rows::field_def(
                r,
                ObjectKind::parse(&object).ok_or_else(|| rows::corrupt("object"))?,
            )
        })
        .await
    }

    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        t: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.lock_registry_list(tenant, "object_types").await?;
        let q = tenant_query(
            "INSERT INTO object_types (workspace_id, mode, key, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, COALESCE(MAX(position), 0) + 1 FROM object_types
             WHERE workspace_id = $1 AND mode = $2
             ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(&t.key)
        .bind(t.label.as_deref())
        .bind(now.millis());
        Ok(self.execute(q).await? == 1)
    }

    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError> {
        let q = tenant_query("SELECT key, label FROM object_types WHERE workspace_id = $1 AND mode = $2 ORDER BY position, key", tenant);
        self.all(q, |r| {
            Ok(ObjectType {
                key: get(r, "key")?,
                label: get(r, "label")?,
            })
        })
        .await
    }
}

impl PostgresTx {
    /// Custom fields and object types are appended at the highest position + 1, like enum
    /// values, but have no parent row to lock; a transaction-scoped advisory lock on the tenant
    /// and the list stands in for one (taken by its own statement, for the reason given at
    /// `lock_enum_group`). Registrations are rare, so the serialization costs nothing.
    async fn lock_registry_list(&mut self, tenant: &Tenant, list: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2 || ':' || $3, 0))",
            tenant,
        )
        .bind(list);
        q.fetch_one(self.conn()).await.map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Values are appended at the group's highest position + 1. SQLite's single writer makes
    /// that safe; here two transactions appending to one group would read the same highest
    /// position, so the group's row is locked first, by a statement of its own (a READ COMMITTED
    /// statement sees only what had committed when it began, so the locking must be over before
    /// the INSERT reads the highest position).
    async fn lock_enum_group(&mut self, tenant: &Tenant, group: &str) -> Result<(), StoreError> {
        if let PostgresTx::Read(..) = self {
            return Ok(());
        }
        let q = tenant_query("SELECT 1 FROM enum_groups WHERE workspace_id = $1 AND mode = $2 AND grp = $3 FOR UPDATE", tenant)
            .bind(group);
        self.execute(q).await?;
        Ok(())
    }
}
