//! Custom fields, enum groups and object types (`RegistryRepo`).

use async_trait::async_trait;
use crm_app::{ports::RegistryRepo, StoreError};
use crm_domain::{
    registry::{EnumValue, FieldDef},
    ObjectKind, ObjectType, Registry, Tenant, Timestamp,
};
use sqlx::Row;

use crate::{backend, rows, tx::SqliteTx};

#[async_trait]
impl RegistryRepo for SqliteTx {
    async fn load_registry(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Registry, StoreError> {
        let (ws, mode) = (tenant.workspace_id.as_str(), tenant.mode.as_str());
        let field_rows = sqlx::query(
            "SELECT key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3 ORDER BY position, key",
        )
        .bind(ws)
        .bind(mode)
        .bind(object.as_str())
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        let mut registry = Registry::default();
        for r in &field_rows {
            registry.fields.push(rows::field_def(r, object)?);
        }
        let groups =
            sqlx::query("SELECT grp FROM enum_groups WHERE workspace_id = $1 AND mode = $2")
                .bind(ws)
                .bind(mode)
                .fetch_all(self.conn())
                .await
                .map_err(backend)?;
        for g in &groups {
            registry
                .enums
                .insert(g.try_get("grp").map_err(backend)?, Vec::new());
        }
        let values = sqlx::query(
            "SELECT grp, value, label FROM enum_values WHERE workspace_id = $1 AND mode = $2 ORDER BY grp, position",
        )
        .bind(ws)
        .bind(mode)
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        for v in &values {
            let group: String = v.try_get("grp").map_err(backend)?;
            registry.enums.entry(group).or_default().push(EnumValue {
                value: v.try_get("value").map_err(backend)?,
                label: v.try_get("label").map_err(backend)?,
            });
        }
        Ok(registry)
    }

    async fn insert_enum_group(
        &mut self,
        tenant: &Tenant,
        group: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO enum_groups (workspace_id, mode, grp, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(group)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
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
        let done = sqlx::query(
            "INSERT INTO enum_values (workspace_id, mode, grp, value, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, COALESCE(MAX(position), 0) + 1 FROM enum_values
             WHERE workspace_id = $1 AND mode = $2 AND grp = $3
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(group)
        .bind(value)
        .bind(label)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    // The single writer connection serializes write transactions, so reading the highest
    // position and inserting after it cannot interleave with another registration.
    async fn insert_field(
        &mut self,
        tenant: &Tenant,
        field: &FieldDef,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO custom_fields (workspace_id, mode, object, key, label, data_type, enum_group, required, created_at, position)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE(MAX(position), 0) + 1 FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 AND object = $3
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(field.object.as_str())
        .bind(&field.key)
        .bind(field.label.as_deref())
        .bind(field.data_type.as_str())
        .bind(field.enum_group.as_deref())
        .bind(field.required)
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_fields(&mut self, tenant: &Tenant) -> Result<Vec<FieldDef>, StoreError> {
        let rows = sqlx::query(
            "SELECT object, key, label, data_type, enum_group, required FROM custom_fields
             WHERE workspace_id = $1 AND mode = $2 ORDER BY object, position, key",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .fetch_all(self.conn())
        .await
        .map_err(backend)?;
        rows.iter()
            .map(|r| {
                let object: String = r.try_get("object").map_err(backend)?;
                rows::field_def(
                    r,
                    ObjectKind::parse(&object).ok_or_else(|| rows::corrupt("object"))?,
                )
            })
            .collect()
    }

    async fn insert_object_type(
        &mut self,
        tenant: &Tenant,
        t: &ObjectType,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO object_types (workspace_id, mode, key, label, created_at, position)
             SELECT $1, $2, $3, $4, $5, COALESCE(MAX(position), 0) + 1 FROM object_types
             WHERE workspace_id = $1 AND mode = $2
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.workspace_id.as_str())
        .bind(tenant.mode.as_str())
        .bind(&t.key)
        .bind(t.label.as_deref())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_object_types(&mut self, tenant: &Tenant) -> Result<Vec<ObjectType>, StoreError> {
        let rows = sqlx::query("SELECT key, label FROM object_types WHERE workspace_id = $1 AND mode = $2 ORDER BY position, key")
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .fetch_all(self.conn())
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|r| {
                Ok(ObjectType {
                    key: r.try_get("key").map_err(backend)?,
                    label: r.try_get("label").map_err(backend)?,
                })
            })
            .collect()
    }
}
