//! Contact use cases. Each public use case is one transaction; the `*_in` variants run inside a
//! caller's transaction (batch, automation actions) and collect what they did in its [`Effects`].

use std::sync::Arc;

use crm_domain::{
    history::{Author, ChangeAction, Via},
    registry::ReferenceCheck,
    Contact, ContactDraft, ContactId, ContactPatch, EventType, ObjectKind, Registry, Tenant,
};

use crate::{
    auth::Caller,
    error::AppError,
    idempotency::IdemClaim,
    merges::Mergeable,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{ContactFilter, FieldFilter, StoreError, Tx},
    views::RecordViews,
    write::{
        check_references, finish_in_tx, missing_reference, store_references, Effects, Emit,
        RecordRef, Touched,
    },
    App,
};

const LIST: &str = "contacts";

/// The history action of a soft delete (`true`) or a restore.
pub(crate) fn deleted_action(deleted: bool) -> ChangeAction {
    if deleted {
        ChangeAction::Deleted
    } else {
        ChangeAction::Restored
    }
}

pub(crate) fn parse_id(id: &str) -> Result<ContactId, AppError> {
    ContactId::parse(id).map_err(|_| AppError::not_found("contact", id))
}

pub(crate) fn conflict(views: &dyn RecordViews, existing: &Contact) -> AppError {
    let detail = match existing.deleted_at {
        Some(_) => {
            "a deleted contact holds this email; restore it with POST /contacts/{id}/restore"
        }
        None => "a contact with this email already exists",
    };
    AppError::Conflict {
        detail: detail.into(),
        existing: Some(views.contact(existing)),
    }
}

pub(crate) async fn email_conflict(
    views: &dyn RecordViews,
    tx: &mut dyn Tx,
    tenant: &Tenant,
    contact: &Contact,
) -> AppError {
    let Some(email) = &contact.email else {
        return AppError::Internal("duplicate contact without an email".into());
    };
    match tx.get_contact_by_email(tenant, email).await {
        Ok(Some(existing)) => conflict(views, &existing),
        Ok(None) => AppError::Internal("duplicate email but no holder found".into()),
        Err(e) => e.into(),
    }
}

/// Inserts `contact`, answering a missing reference with `invalid_reference` and a taken email
/// with the conflict naming its holder. Nothing is written when it fails; `tx` stays usable.
async fn insert_contact_checked(
    views: &dyn RecordViews,
    tx: &mut dyn Tx,
    tenant: &Tenant,
    contact: &Contact,
    refs: &[ReferenceCheck],
) -> Result<(), AppError> {
    match tx
        .insert_contact(tenant, contact, &store_references(refs)?)
        .await
    {
        Err(StoreError::MissingReference(i)) => Err(missing_reference(refs, i)),
        Err(StoreError::Duplicate) => Err(email_conflict(views, tx, tenant, contact).await),
        other => Ok(other?),
    }
}

/// The contact as automations left it, when they changed it (the reply shows the committed record).
pub(crate) async fn reload(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    contact: Contact,
    touched: &Touched,
) -> Result<Contact, AppError> {
    if !touched.contains(&RecordRef::Contact(contact.id.clone())) {
        return Ok(contact);
    }
    Ok(tx
        .get_contact(tenant, &contact.id)
        .await?
        .unwrap_or(contact))
}

impl App {
    /// Creates a contact and its `contact.created` event in one transaction.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    /// When the server groups creates ([`App::with_contact_create_grouping`]), this one joins a group
    /// sharing a transaction with others (see `create_groups`); its outcome is its own either way.
    pub async fn create_contact(
        &self,
        caller: &Caller,
        draft: ContactDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        let author = caller.author(Via::Direct);
        match self.create_groups.slots() {
            Some(slots) => {
                self.create_contact_in_slot(slots, &caller.tenant, &author, draft, idem)
                    .await
            }
            None => {
                self.create_contact_alone(&caller.tenant, &author, draft, idem)
                    .await
            }
        }
    }

    /// [`App::create_contact`] in a transaction of its own.
    pub(crate) async fn create_contact_alone(
        &self,
        tenant: &Tenant,
        author: &Author,
        draft: ContactDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        if idem.is_none() {
            if let Some(registry) = self.plain_contact_creates(tenant) {
                let (contact, refs) = Contact::create(
                    ContactId::from_uuid(self.ids.new_uuid()),
                    self.clock.now(),
                    draft,
                    &registry,
                )?;
                return self
                    .insert_plain_contact(tenant, author, contact, &refs)
                    .await;
            }
        }
        let mut tx = self.store.begin_write().await?;
        let (contact, refs) = self.build_contact(&mut *tx, tenant, draft).await?;
        self.insert_built_contact(tx, tenant, author, contact, &refs, idem)
            .await
    }

    /// Inserts a contact built by [`App::build_contact`] in `tx` with its event, and commits.
    pub(crate) async fn insert_built_contact(
        &self,
        mut tx: Box<dyn Tx>,
        tenant: &Tenant,
        author: &Author,
        contact: Contact,
        refs: &[ReferenceCheck],
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        let mut fx = Effects::new(Emit::Events, author.clone());
        self.check_new_unique_values(&mut *tx, tenant, &contact)
            .await?;
        insert_contact_checked(&*self.views, &mut *tx, tenant, &contact, refs).await?;
        self.contact_created(&mut fx, &contact);
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let contact = reload(&mut *tx, tenant, contact, &touched).await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.contact(&contact)).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// The contact registry of `tenant` when this process's configuration cache shows that
    /// nothing reacts to a contact's creation there: no enabled automation on `contact.created`
    /// and no sequence at all (so none enrolls it, and it has no enrollment to re-check). `None`
    /// when anything does, or when the cache does not hold all three answers (a create through
    /// [`App::insert_built_contact`] then loads them). The cache is as fresh here as where
    /// [`App::finish_write`] reads it.
    fn plain_contact_creates(&self, tenant: &Tenant) -> Option<Arc<Registry>> {
        if self.dry().is_some() {
            // A dry run records its effects on the path of every other write.
            return None;
        }
        let automations = self.config.automations(tenant)?;
        if automations
            .iter()
            .any(|a| a.def.trigger_event == EventType::ContactCreated)
            || self.config.any_sequence(tenant)?
        {
            return None;
        }
        self.config
            .registry(tenant, ObjectKind::Contact)
            .filter(|r| !crate::unique_fields::has_unique(r))
    }

    /// Inserts a contact nothing reacts to ([`App::plain_contact_creates`]) with its event, in
    /// one atomic write of its own ([`crate::ports::Store::insert_contact_alone`]): one statement
    /// and one round trip on Postgres, where a transaction takes four. The event's data is the
    /// contact as created, as [`App::finish_write`] leaves it when no automation acts; its
    /// history entry rides in the same write.
    async fn insert_plain_contact(
        &self,
        tenant: &Tenant,
        author: &Author,
        contact: Contact,
        refs: &[ReferenceCheck],
    ) -> Result<Contact, AppError> {
        let mut fx = Effects::new(Emit::Events, author.clone());
        self.contact_created(&mut fx, &contact);
        let (Some(event), Some(change)) = (fx.take_events().pop(), fx.take_history().pop()) else {
            return Err(AppError::Internal(
                "a created contact without its event or history".into(),
            ));
        };
        let event = event.into_event(tenant, None);
        match self
            .store
            .insert_contact_alone(tenant, &contact, &store_references(refs)?, &event, &change)
            .await
        {
            Ok(()) => {
                self.events_written().notify_waiters();
                Ok(contact)
            }
            Err(StoreError::MissingReference(i)) => Err(missing_reference(refs, i)),
            Err(StoreError::Duplicate) => {
                let mut tx = self.store.begin_read().await?;
                Err(email_conflict(&*self.views, &mut *tx, tenant, &contact).await)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) async fn create_contact_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: ContactDraft,
        fx: &mut Effects,
    ) -> Result<Contact, AppError> {
        let (contact, refs) = self.build_contact(&mut *tx, tenant, draft).await?;
        self.check_new_unique_values(&mut *tx, tenant, &contact)
            .await?;
        insert_contact_checked(&*self.views, tx, tenant, &contact, &refs).await?;
        self.contact_created(fx, &contact);
        Ok(contact)
    }

    /// [`App::check_unique_values`] of a contact about to be inserted.
    async fn check_new_unique_values(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        contact: &Contact,
    ) -> Result<(), AppError> {
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Contact).await?;
        let id = contact.id.as_str();
        let cf = &contact.custom_fields;
        self.check_unique_values(tx, tenant, ObjectKind::Contact, &registry, id, None, cf)
            .await
    }

    /// A new contact from `draft`, validated against the tenant's registry, with the references
    /// the store must find.
    pub(crate) async fn build_contact(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: ContactDraft,
    ) -> Result<(Contact, Vec<ReferenceCheck>), AppError> {
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Contact).await?;
        let (contact, refs) = Contact::create(
            ContactId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
            &registry,
        )?;
        Ok((contact, refs))
    }

    /// Records that `contact` was created: a changed record, its history entry and its
    /// `contact.created` event.
    pub(crate) fn contact_created(&self, fx: &mut Effects, contact: &Contact) {
        let record = RecordRef::Contact(contact.id.clone());
        fx.changed(record.clone(), false);
        let body = self.views.contact(contact);
        self.record_change(
            fx,
            ObjectKind::Contact,
            contact.id.as_str(),
            ChangeAction::Created,
            contact.created_at,
            None,
            Some(&body),
        );
        self.emit(
            fx,
            EventType::ContactCreated,
            record,
            contact.created_at,
            body,
            None,
            None,
        );
    }

    pub async fn get_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_contact(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("contact", id.as_str()))
    }

    /// Applies a partial update; `expected_version` is the `If-Match` precondition.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_contact(
        &self,
        caller: &Caller,
        id: &str,
        patch: ContactPatch,
        expected_version: Option<i64>,
    ) -> Result<Contact, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let contact = self
            .update_contact_in(
                &mut *tx,
                &caller.tenant,
                id,
                patch,
                expected_version,
                &mut fx,
            )
            .await?;
        let touched = self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        let contact = reload(&mut *tx, &caller.tenant, contact, &touched).await?;
        tx.commit().await?;
        Ok(contact)
    }

    pub(crate) async fn update_contact_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        id: &str,
        patch: ContactPatch,
        expected_version: Option<i64>,
        fx: &mut Effects,
    ) -> Result<Contact, AppError> {
        let id = parse_id(id)?;
        let mut contact = tx
            .get_contact(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("contact", id.as_str()))?;
        contact.refuse_tombstone(self, &mut *tx, tenant).await?;
        if expected_version.is_some_and(|v| v != contact.version) {
            return Err(AppError::VersionConflict {
                current: contact.version,
            });
        }
        if contact.deleted_at.is_some() {
            return Err(AppError::Conflict {
                detail: "this contact is deleted; restore it before updating".into(),
                existing: None,
            });
        }
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Contact).await?;
        let now = self.clock.now();
        let before = self.views.contact(&contact);
        let old_custom = contact.custom_fields.clone();
        let (changed, refs) = contact.apply(patch, now, &registry)?;
        if changed.is_empty() {
            return Ok(contact);
        }
        check_references(tx, tenant, &refs).await?;
        let id = contact.id.as_str();
        self.check_unique_values(
            tx,
            tenant,
            ObjectKind::Contact,
            &registry,
            id,
            Some(&old_custom),
            &contact.custom_fields,
        )
        .await?;
        match tx.update_contact(tenant, &contact).await {
            Err(StoreError::Duplicate) => {
                return Err(email_conflict(&*self.views, tx, tenant, &contact).await)
            }
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: contact.version - 1,
                })
            }
            other => other?,
        }
        let changed = changed.into_iter().map(String::from).collect();
        let record = RecordRef::Contact(contact.id.clone());
        fx.changed(record.clone(), false);
        let body = self.views.contact(&contact);
        self.record_change(
            fx,
            ObjectKind::Contact,
            contact.id.as_str(),
            ChangeAction::Updated,
            now,
            Some(&before),
            Some(&body),
        );
        self.emit(
            fx,
            EventType::ContactUpdated,
            record,
            now,
            body,
            Some(changed),
            None,
        );
        Ok(contact)
    }

    /// Soft delete. Deleting a deleted contact answers the same.
    pub async fn delete_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let contact = self
            .set_contact_deleted_in(&mut *tx, &caller.tenant, id, true, &mut fx)
            .await?;
        self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// Restoring an active contact is a no-op that returns it.
    pub async fn restore_contact(&self, caller: &Caller, id: &str) -> Result<Contact, AppError> {
        let mut tx = self.store.begin_write().await?;
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Direct));
        let contact = self
            .set_contact_deleted_in(&mut *tx, &caller.tenant, id, false, &mut fx)
            .await?;
        self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        tx.commit().await?;
        Ok(contact)
    }

    pub(crate) async fn set_contact_deleted_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        id: &str,
        deleted: bool,
        fx: &mut Effects,
    ) -> Result<Contact, AppError> {
        let id = parse_id(id)?;
        let mut contact = tx
            .get_contact(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("contact", id.as_str()))?;
        contact.refuse_tombstone(self, &mut *tx, tenant).await?;
        if contact.deleted_at.is_some() == deleted {
            return Ok(contact);
        }
        let now = self.clock.now();
        contact.deleted_at = deleted.then_some(now);
        contact.updated_at = now;
        contact.version += 1;
        tx.update_contact(tenant, &contact).await?;
        fx.changed(RecordRef::Contact(contact.id.clone()), deleted);
        self.record_change(
            fx,
            ObjectKind::Contact,
            contact.id.as_str(),
            deleted_action(deleted),
            now,
            None,
            None,
        );
        Ok(contact)
    }

    pub async fn list_contacts(
        &self,
        caller: &Caller,
        filter: ContactFilter,
        page: PageParams,
    ) -> Result<Page<Contact>, AppError> {
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, &caller.tenant, LIST, &fingerprint)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_contacts(&caller.tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            LIST,
            &fingerprint,
            |c| c.id.to_string(),
        ))
    }

    /// Checks the registry-bound filters of the contact list (one registry read for all): a
    /// `type` value against the registered values, and each `custom_fields.<key>=<raw>` against
    /// the field's registration, returning those as filters sorted by key.
    pub async fn check_contact_filters(
        &self,
        caller: &Caller,
        contact_type: Option<&str>,
        custom: Vec<(String, String)>,
    ) -> Result<Vec<FieldFilter>, AppError> {
        if contact_type.is_none() && custom.is_empty() {
            return Ok(Vec::new());
        }
        let registry = self
            .read_registry(&caller.tenant, ObjectKind::Contact)
            .await?;
        if let Some(t) = contact_type {
            registry.check_enum("type", crm_domain::contact::CONTACT_TYPE_GROUP, t)?;
        }
        let mut filters = custom
            .into_iter()
            .map(|(key, raw)| {
                Ok(FieldFilter {
                    value: registry.filter_value(&key, &raw)?,
                    key,
                })
            })
            .collect::<Result<Vec<_>, AppError>>()?;
        filters.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(filters)
    }
}
