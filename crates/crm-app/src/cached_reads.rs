//! The cached reads of the write path: a tenant's registries and rules, from the process's
//! configuration cache ([`ConfigCache`]) when it has them, else from the store (and then kept,
//! unless the configuration changed while they were read). Inside a transaction that changed
//! configuration itself they read through the transaction, which sees its own uncommitted
//! changes.

use std::{future::Future, sync::Arc};

use crm_domain::{rule::Automation, sequence::Sequence, EventType, ObjectKind, Registry, Tenant};

use crate::{
    ports::{ConfigCache, Generation, StoreError, Tx},
    App,
};

/// `hit` when there is one and the transaction may use the cache; otherwise `load`'s value,
/// kept by `keep` unless an invalidation arrived while it was being read.
async fn read_through<V>(
    cache: &dyn ConfigCache,
    cacheable: bool,
    hit: Option<V>,
    load: impl Future<Output = Result<V, StoreError>>,
    keep: impl FnOnce(&dyn ConfigCache, Generation, &V),
) -> Result<V, StoreError> {
    if let Some(hit) = hit.filter(|_| cacheable) {
        return Ok(hit);
    }
    let seen = cache.generation();
    let value = load.await?;
    if cacheable {
        keep(cache, seen, &value);
    }
    Ok(value)
}

impl App {
    /// `tenant`'s registry of `object`.
    pub(crate) async fn registry(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Arc<Registry>, StoreError> {
        let cacheable = !tx.config_changed();
        let load = async { Ok(Arc::new(tx.load_registry(tenant, object).await?)) };
        let keep =
            |c: &dyn ConfigCache, seen, v: &Arc<Registry>| c.keep_registry(seen, tenant, object, v);
        read_through(
            &*self.config,
            cacheable,
            self.config.registry(tenant, object),
            load,
            keep,
        )
        .await
    }

    /// `tenant`'s registry of `object` outside a transaction: a connection is taken only when this
    /// process does not have it.
    pub(crate) async fn read_registry(
        &self,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<Arc<Registry>, StoreError> {
        if let Some(hit) = self.config.registry(tenant, object) {
            return Ok(hit);
        }
        let mut tx = self.store.begin_read().await?;
        self.registry(&mut *tx, tenant, object).await
    }

    /// The enabled automations triggered by any of `events`, oldest first.
    pub(crate) async fn active_automations(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Automation>, StoreError> {
        let cacheable = !tx.config_changed();
        let load = async {
            Ok(Arc::new(
                tx.active_automations(tenant, &EventType::ALL).await?,
            ))
        };
        let keep = |c: &dyn ConfigCache, seen, v: &Arc<Vec<Automation>>| {
            c.keep_automations(seen, tenant, v)
        };
        let all = read_through(
            &*self.config,
            cacheable,
            self.config.automations(tenant),
            load,
            keep,
        )
        .await?;
        Ok(all
            .iter()
            .filter(|a| events.contains(&a.def.trigger_event))
            .cloned()
            .collect())
    }

    /// The enabled sequences triggered by any of `events`, oldest first.
    pub(crate) async fn triggered_sequences(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Sequence>, StoreError> {
        let cacheable = !tx.config_changed();
        let load = async {
            Ok(Arc::new(
                tx.triggered_sequences(tenant, &EventType::ALL).await?,
            ))
        };
        let keep =
            |c: &dyn ConfigCache, seen, v: &Arc<Vec<Sequence>>| c.keep_sequences(seen, tenant, v);
        let all = read_through(
            &*self.config,
            cacheable,
            self.config.sequences(tenant),
            load,
            keep,
        )
        .await?;
        Ok(all
            .iter()
            .filter(|s| {
                s.def
                    .trigger
                    .as_ref()
                    .is_some_and(|t| events.contains(&t.event))
            })
            .cloned()
            .collect())
    }

    /// Whether the tenant has any sequence. Without one it has no active enrollment either
    /// (deleting a sequence ends its enrollments), so the exit re-check of a write can be skipped.
    pub(crate) async fn tenant_has_sequences(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
    ) -> Result<bool, StoreError> {
        let cacheable = !tx.config_changed();
        let load = async { Ok(tx.count_sequences(tenant).await? > 0) };
        let keep = |c: &dyn ConfigCache, seen, v: &bool| c.keep_any_sequence(seen, tenant, *v);
        read_through(
            &*self.config,
            cacheable,
            self.config.any_sequence(tenant),
            load,
            keep,
        )
        .await
    }
}
