//! Registry use cases: custom fields, enum values and custom object types (spec, "Custom field
//! definition", "Enum value", "Custom object type"; decisions §6). Every registration is
//! idempotent: registering what exists changes nothing and says so (`created: false`), and the
//! answer is always the whole current set.

use std::collections::BTreeMap;

use crm_domain::{
    registry::check_group_name, EnumValue, FieldDef, FieldRegistration, ObjectKind, ObjectType,
    Tenant,
};

use crm_domain::audit::changes;
use serde_json::json;

use crate::{audit::Audited, auth::Caller, error::AppError, ports::Tx, App};

/// The fields of one object after a registration.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSet {
    pub object: ObjectKind,
    pub created: bool,
    pub fields: Vec<FieldDef>,
}

/// The values of one enum group after a registration.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumGroupSet {
    pub group: String,
    pub created: bool,
    pub values: Vec<EnumValue>,
}

/// The custom object types after a registration.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSet {
    pub created: bool,
    pub types: Vec<ObjectType>,
}

/// Everything registered in a tenant, as `GET /schema` shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RegistryView {
    /// Custom fields of every object, each object's in registration order.
    pub fields: Vec<FieldDef>,
    pub enums: BTreeMap<String, Vec<EnumValue>>,
    pub types: Vec<ObjectType>,
}

/// All enum groups with their values. Any object's registry snapshot carries every group.
async fn enums(
    tx: &mut dyn Tx,
    tenant: &Tenant,
) -> Result<BTreeMap<String, Vec<EnumValue>>, AppError> {
    Ok(tx.load_registry(tenant, ObjectKind::Contact).await?.enums)
}

impl App {
    /// Registers a custom field. A select or multiselect field's enum group (by default
    /// `<object>.<key>`) is created, empty, if it does not exist yet. Registering a key its
    /// object already has changes nothing.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_field(
        &self,
        caller: &Caller,
        request: FieldRegistration,
    ) -> Result<FieldSet, AppError> {
        let tenant = &caller.tenant;
        let def = FieldDef::register(request)?;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        tx.mark_config_changed(&tenant.workspace_id);
        let created = tx.insert_field(tenant, &def, now).await?;
        if let (true, Some(group)) = (created, &def.enum_group) {
            tx.insert_enum_group(tenant, group, now).await?;
        }
        if def.unique && !created {
            self.make_unique(&mut *tx, tenant, &def).await?;
        }
        let fields = tx.load_registry(tenant, def.object).await?.fields;
        if created {
            crm_domain::text::check_field_count(fields.len())?;
            let shape = json!({"object": def.object.as_str(), "key": def.key, "label": def.label,
                "data_type": def.data_type.as_str(), "enum_group": def.enum_group, "required": def.required});
            let id = format!("{}.{}", def.object.as_str(), def.key);
            let what = Audited::new("field.created", "field", id, changes(None, Some(&shape)));
            self.audit(&mut tx, caller, what).await?;
        }
        tx.commit().await?;
        Ok(FieldSet {
            object: def.object,
            created,
            fields,
        })
    }

    /// Registering `unique` on an existing field (decisions §24): its type must allow it (422),
    /// and the values records hold must not collide (409); otherwise the field becomes unique.
    async fn make_unique(
        &self,
        tx: &mut dyn crate::ports::Tx,
        tenant: &crm_domain::Tenant,
        def: &FieldDef,
    ) -> Result<(), AppError> {
        let registry = tx.load_registry(tenant, def.object).await?;
        let Some(current) = registry.field(&def.key).filter(|f| !f.unique) else {
            return Ok(());
        };
        if !current.data_type.can_be_unique() {
            return Err(crm_domain::ValidationError::invalid(
                "unique",
                "only text, email, url and number fields can be unique",
            )
            .into());
        }
        if tx.values_collide(tenant, def.object, &def.key).await? {
            return Err(AppError::Conflict {
                detail: format!(
                    "several {} records hold one value of custom_fields.{}; make them distinct first",
                    def.object.as_str(),
                    def.key
                ),
                existing: None,
            });
        }
        tx.make_field_unique(tenant, def.object, &def.key).await?;
        Ok(())
    }

    /// Every enum group with its values, each group's in the order they were added.
    pub async fn list_enums(
        &self,
        caller: &Caller,
    ) -> Result<BTreeMap<String, Vec<EnumValue>>, AppError> {
        let mut tx = self.store.begin_read().await?;
        enums(&mut *tx, &caller.tenant).await
    }

    /// Adds a value to an enum group, creating the group if needed. Adding a value the group
    /// already has changes nothing (its label stays).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_enum_value(
        &self,
        caller: &Caller,
        group: &str,
        value: &str,
        label: Option<String>,
    ) -> Result<EnumGroupSet, AppError> {
        let tenant = &caller.tenant;
        check_group_name("group", group)?;
        let value = EnumValue::new(value, label)?;
        let mut tx = self.store.begin_write().await?;
        tx.mark_config_changed(&tenant.workspace_id);
        let created = tx
            .insert_enum_value(
                tenant,
                group,
                &value.value,
                value.label.as_deref(),
                self.clock.now(),
            )
            .await?;
        let values = enums(&mut *tx, tenant)
            .await?
            .remove(group)
            .unwrap_or_default();
        if created {
            crm_domain::text::check_enum_value_count(values.len())?;
            let shape = json!({"group": group, "value": value.value, "label": value.label});
            let id = format!("{group}.{}", value.value);
            let what = Audited::new(
                "enum_value.created",
                "enum_value",
                id,
                changes(None, Some(&shape)),
            );
            self.audit(&mut tx, caller, what).await?;
        }
        tx.commit().await?;
        Ok(EnumGroupSet {
            group: group.to_owned(),
            created,
            values,
        })
    }

    /// Registers a custom object type (a schema grouping only); an existing key changes nothing.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_object_type(
        &self,
        caller: &Caller,
        key: &str,
        label: Option<String>,
    ) -> Result<TypeSet, AppError> {
        let tenant = &caller.tenant;
        let object_type = ObjectType::new(key, label)?;
        let mut tx = self.store.begin_write().await?;
        tx.mark_config_changed(&tenant.workspace_id);
        let created = tx
            .insert_object_type(tenant, &object_type, self.clock.now())
            .await?;
        let types = tx.list_object_types(tenant).await?;
        if created {
            let shape = json!({"key": object_type.key, "label": object_type.label});
            let what = Audited::new(
                "type.created",
                "type",
                object_type.key.clone(),
                changes(None, Some(&shape)),
            );
            self.audit(&mut tx, caller, what).await?;
        }
        tx.commit().await?;
        Ok(TypeSet { created, types })
    }

    /// The live registry: custom fields of every object, enum groups, custom object types.
    pub async fn describe_registry(&self, caller: &Caller) -> Result<RegistryView, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_read().await?;
        Ok(RegistryView {
            fields: tx.list_fields(tenant).await?,
            enums: enums(&mut *tx, tenant).await?,
            types: tx.list_object_types(tenant).await?,
        })
    }
}
