//! Merges of contacts and of companies (decisions §18, §23, §24), each one transaction:
//!
//! 1. checks, in the order of §24: `merge_ids` (422), every id exists (404), none is a tombstone
//!    (409 with its survivor), none is soft-deleted (422), then `If-Match` on the survivor;
//! 2. the merged records become tombstones (so a merged contact's email is free for the survivor);
//! 3. everything that points at them points at the survivor: built-in references, `reference`
//!    custom fields, and (contacts) sequence enrollments, a duplicate ending with `merged`; each
//!    moved contact, company or deal gets one history entry (`via: "merge"`) and no event;
//! 4. the survivor takes the merged records' values where its own are empty
//!    ([`crm_domain::record_merge`]), gets the `merged` history entry, and a contact emits
//!    `contact.updated` with `changed_fields` and `merged_ids`.

use std::{collections::HashMap, hash::Hash};

use async_trait::async_trait;

use crm_domain::{
    history::{field_changes, ChangeAction, FieldChange, Via},
    record_merge::{check_merge_ids, fill_company, fill_contact, plan_enrollments},
    Company, CompanyId, Contact, ContactId, DataType, EventType, ObjectKind, Tenant, Timestamp,
    UserId, ValidationError,
};
use serde_json::{json, Value};

use crate::{
    auth::Caller,
    error::AppError,
    idempotency::IdemClaim,
    ports::{RefField, StoreError, Tx},
    write::{finish_in_tx, Effects, Emit, RecordRef},
    App,
};

fn soft_deleted(field: &str, object: &str, id: &str) -> AppError {
    ValidationError::invalid(
        field,
        format!("{object} {id} is deleted; restore it before merging"),
    )
    .into()
}

fn version_conflict(current: i64, expected: Option<i64>) -> Result<(), AppError> {
    match expected {
        Some(v) if v != current => Err(AppError::VersionConflict { current }),
        _ => Ok(()),
    }
}

/// What a merge reads and checks of the records it merges, contacts and companies alike.
#[async_trait]
pub(crate) trait Mergeable: Sized + Send + Sync {
    type Id: Clone + Ord + Hash + Send + Sync + std::fmt::Display;
    const KIND: ObjectKind;
    fn parse_id(raw: &str) -> Option<Self::Id>;
    fn id_str(id: &Self::Id) -> &str;
    fn id(&self) -> &Self::Id;
    fn merged_into(&self) -> Option<&Self::Id>;
    fn is_deleted(&self) -> bool;
    fn version(&self) -> i64;
    /// The record as clients see it.
    fn view(&self, app: &App) -> Value;
    async fn read(
        tx: &mut dyn Tx,
        tenant: &Tenant,
        id: &Self::Id,
    ) -> Result<Option<Self>, StoreError>;

    /// The 409 a write to a tombstone answers, its survivor under `existing`; nothing for a
    /// record that was not merged.
    async fn refuse_tombstone(
        &self,
        app: &App,
        tx: &mut dyn Tx,
        tenant: &Tenant,
    ) -> Result<(), AppError> {
        let Some(survivor) = self.merged_into() else {
            return Ok(());
        };
        let existing = Self::read(tx, tenant, survivor).await?;
        let object = Self::KIND.as_str();
        Err(AppError::Conflict {
            detail: format!(
                "{object} {} was merged into {survivor}; write to that {object} instead",
                self.id()
            ),
            existing: existing.map(|r| r.view(app)),
        })
    }
}

/// `impl Mergeable` for a record type: its id type, its store read and its view.
macro_rules! mergeable {
    ($record:ty, $id:ty, $kind:expr, $get:ident, $view:ident) => {
        #[async_trait]
        impl Mergeable for $record {
            type Id = $id;
            const KIND: ObjectKind = $kind;
            fn parse_id(raw: &str) -> Option<$id> {
                <$id>::parse(raw).ok()
            }
            fn id_str(id: &$id) -> &str {
                id.as_str()
            }
            fn id(&self) -> &$id {
                &self.id
            }
            fn merged_into(&self) -> Option<&$id> {
                self.merged_into.as_ref()
            }
            fn is_deleted(&self) -> bool {
                self.deleted_at.is_some()
            }
            fn version(&self) -> i64 {
                self.version
            }
            fn view(&self, app: &App) -> Value {
                app.views.$view(self)
            }
            async fn read(
                tx: &mut dyn Tx,
                tenant: &Tenant,
                id: &$id,
            ) -> Result<Option<$record>, StoreError> {
                tx.$get(tenant, id).await
            }
        }
    };
}

mergeable!(
    Contact,
    ContactId,
    ObjectKind::Contact,
    get_contact,
    contact
);
mergeable!(
    Company,
    CompanyId,
    ObjectKind::Company,
    get_company,
    company
);

/// The survivor's id then the merged ones', checked before any transaction starts: `merge_ids`
/// well formed (422), each id one of this kind (404).
fn parse_merge<R: Mergeable>(id: &str, merge_ids: &[String]) -> Result<Vec<R::Id>, AppError> {
    check_merge_ids(id, merge_ids)?;
    std::iter::once(id)
        .chain(merge_ids.iter().map(String::as_str))
        .map(|raw| R::parse_id(raw).ok_or_else(|| AppError::not_found(R::KIND.as_str(), raw)))
        .collect()
}

/// The survivor and the merged records, checked in the order of §24 after `parse_merge`: each
/// exists (404), none is a tombstone (409), none is soft-deleted (422), then `If-Match` on the
/// survivor. They are read (and on Postgres locked) in id order, so that two merges of
/// overlapping records lock them in one order; then checked in the order given.
async fn read_merge<R: Mergeable>(
    app: &App,
    tx: &mut dyn Tx,
    tenant: &Tenant,
    ids: &[R::Id],
    expected_version: Option<i64>,
) -> Result<(R, Vec<R>), AppError> {
    let mut sorted = ids.to_vec();
    sorted.sort();
    let mut found = HashMap::with_capacity(sorted.len());
    for id in sorted {
        let record = R::read(tx, tenant, &id).await?;
        found.insert(id, record);
    }
    let mut records = Vec::with_capacity(ids.len());
    for id in ids {
        match found.remove(id).flatten() {
            Some(r) => records.push(r),
            None => return Err(AppError::not_found(R::KIND.as_str(), R::id_str(id))),
        }
    }
    for r in &records {
        r.refuse_tombstone(app, tx, tenant).await?;
    }
    for (i, (r, id)) in records.iter().zip(ids).enumerate() {
        if r.is_deleted() {
            let field = if i == 0 { "id" } else { "merge_ids" };
            return Err(soft_deleted(field, R::KIND.as_str(), R::id_str(id)));
        }
    }
    let survivor = records.remove(0);
    version_conflict(survivor.version(), expected_version)?;
    Ok((survivor, records))
}

impl App {
    /// `POST /contacts/{id}/merge`: merges `merge_ids` into the contact `id`.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn merge_contacts(
        &self,
        caller: &Caller,
        id: &str,
        merge_ids: Vec<String>,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        let tenant = &caller.tenant;
        let ids = parse_merge::<Contact>(id, &merge_ids)?;
        let mut tx = self.store.begin_write().await?;
        let (mut survivor, merged) =
            read_merge::<Contact>(self, &mut *tx, tenant, &ids, expected_version).await?;
        let merged_ids = &ids[1..];

        let now = self.clock.now();
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Merge));
        let targets: Vec<&str> = merge_ids.iter().map(String::as_str).collect();
        tx.tombstone(
            tenant,
            ObjectKind::Contact,
            &targets,
            survivor.id.as_str(),
            now,
        )
        .await?;
        for m in &merged {
            fx.changed(RecordRef::Contact(m.id.clone()), true);
            self.record_tombstone(
                &mut fx,
                ObjectKind::Contact,
                m.id.as_str(),
                survivor.id.as_str(),
                now,
            );
        }
        let moved = self
            .move_references(
                &mut *tx,
                tenant,
                &mut fx,
                ObjectKind::Contact,
                &targets,
                survivor.id.as_str(),
                now,
            )
            .await?;
        if moved.contains(survivor.id.as_str()) {
            survivor = tx
                .get_contact(tenant, &survivor.id)
                .await?
                .ok_or_else(|| AppError::Internal("the merge survivor vanished".into()))?;
        }
        self.move_enrollments(&mut *tx, tenant, &survivor.id, merged_ids, now)
            .await?;

        let before = self.views.contact(&survivor);
        let refs: Vec<&Contact> = merged.iter().collect();
        let changed = fill_contact(&mut survivor, &refs);
        if changed.contains(&"owner_id") {
            hold_owner(&mut *tx, tenant, &mut survivor.owner_id).await?;
        }
        survivor.updated_at = now;
        survivor.version += 1;
        match tx.update_contact(tenant, &survivor).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: survivor.version - 1,
                })
            }
            Err(StoreError::Duplicate) => {
                return Err(crate::contacts::email_conflict(
                    &*self.views,
                    &mut *tx,
                    tenant,
                    &survivor,
                )
                .await)
            }
            other => other?,
        }
        let after = self.views.contact(&survivor);
        self.record_entry(
            &mut fx,
            ObjectKind::Contact,
            survivor.id.as_str(),
            ChangeAction::Merged,
            now,
            field_changes(Some(&before), &after),
            Some(merge_ids.clone()),
        );
        let record = RecordRef::Contact(survivor.id.clone());
        fx.changed(record.clone(), false);
        let changed = changed.into_iter().map(String::from).collect();
        self.emit(
            &mut fx,
            EventType::ContactUpdated,
            record,
            now,
            after,
            Some(changed),
            None,
        );
        fx.set_merged_ids(merge_ids);
        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        let survivor = crate::contacts::reload(&mut *tx, tenant, survivor, &touched).await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.contact(&survivor)).await?;
        tx.commit().await?;
        Ok(survivor)
    }

    /// `POST /companies/{id}/merge`: merges `merge_ids` into the company `id` (companies emit no
    /// events).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn merge_companies(
        &self,
        caller: &Caller,
        id: &str,
        merge_ids: Vec<String>,
        expected_version: Option<i64>,
        idem: Option<&IdemClaim>,
    ) -> Result<Company, AppError> {
        let tenant = &caller.tenant;
        let ids = parse_merge::<Company>(id, &merge_ids)?;
        let mut tx = self.store.begin_write().await?;
        let (mut survivor, merged) =
            read_merge::<Company>(self, &mut *tx, tenant, &ids, expected_version).await?;

        let now = self.clock.now();
        let mut fx = Effects::new(Emit::Events, caller.author(Via::Merge));
        let targets: Vec<&str> = merge_ids.iter().map(String::as_str).collect();
        tx.tombstone(
            tenant,
            ObjectKind::Company,
            &targets,
            survivor.id.as_str(),
            now,
        )
        .await?;
        for m in &merged {
            self.record_tombstone(
                &mut fx,
                ObjectKind::Company,
                m.id.as_str(),
                survivor.id.as_str(),
                now,
            );
        }
        let moved = self
            .move_references(
                &mut *tx,
                tenant,
                &mut fx,
                ObjectKind::Company,
                &targets,
                survivor.id.as_str(),
                now,
            )
            .await?;
        if moved.contains(survivor.id.as_str()) {
            survivor = tx
                .get_company(tenant, &survivor.id)
                .await?
                .ok_or_else(|| AppError::Internal("the merge survivor vanished".into()))?;
        }
        let before = self.views.company(&survivor);
        let refs: Vec<&Company> = merged.iter().collect();
        if fill_company(&mut survivor, &refs).contains(&"owner_id") {
            hold_owner(&mut *tx, tenant, &mut survivor.owner_id).await?;
        }
        survivor.updated_at = now;
        survivor.version += 1;
        match tx.update_company(tenant, &survivor).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: survivor.version - 1,
                })
            }
            other => other?,
        }
        let after = self.views.company(&survivor);
        self.record_entry(
            &mut fx,
            ObjectKind::Company,
            survivor.id.as_str(),
            ChangeAction::Merged,
            now,
            field_changes(Some(&before), &after),
            Some(merge_ids),
        );
        self.finish_write(&mut *tx, tenant, fx).await?;
        finish_in_tx(&mut *tx, tenant, idem, &self.views.company(&survivor)).await?;
        tx.commit().await?;
        Ok(survivor)
    }

    /// A tombstone's history entry: `merged`, `merged_into` from null to the survivor.
    fn record_tombstone(
        &self,
        fx: &mut Effects,
        object: ObjectKind,
        id: &str,
        survivor: &str,
        now: Timestamp,
    ) {
        let change = FieldChange {
            field: "merged_into".into(),
            from: Value::Null,
            to: json!(survivor),
        };
        self.record_entry(
            fx,
            object,
            id,
            ChangeAction::Merged,
            now,
            vec![change],
            None,
        );
    }

    /// Points every reference to `targets` (records of `object`) at `survivor`: the built-in
    /// reference fields and every `reference` custom field of the four objects. Each moved
    /// contact, company or deal gets one history entry; contacts and deals are re-checked by
    /// their sequences' exit conditions. Returns the ids of the moved records.
    #[allow(clippy::too_many_arguments)]
    async fn move_references(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        fx: &mut Effects,
        object: ObjectKind,
        targets: &[&str],
        survivor: &str,
        now: Timestamp,
    ) -> Result<std::collections::HashSet<String>, AppError> {
        let mut keys: Vec<(ObjectKind, String)> = Vec::new();
        for holder in [
            ObjectKind::Contact,
            ObjectKind::Company,
            ObjectKind::Deal,
            ObjectKind::Activity,
        ] {
            let registry = self.registry(&mut *tx, tenant, holder).await?;
            keys.extend(
                registry
                    .fields
                    .iter()
                    .filter(|f| f.data_type == DataType::Reference)
                    .map(|f| (holder, f.key.clone())),
            );
        }
        let mut fields: Vec<RefField<'_>> = match object {
            ObjectKind::Contact => vec![RefField::DealPrimaryContact, RefField::ActivityContact],
            _ => vec![RefField::ContactCompany, RefField::DealCompany],
        };
        fields.extend(keys.iter().map(|(o, k)| RefField::Custom(*o, k.as_str())));
        // One entry per moved record and write, listing every field that moved.
        let mut entries: Vec<(ObjectKind, String, Vec<FieldChange>)> = Vec::new();
        for field in fields {
            let referrers = tx.referrers(tenant, field, targets).await?;
            if referrers.is_empty() {
                continue;
            }
            let ids: Vec<&str> = referrers.iter().map(|r| r.id.as_str()).collect();
            tx.repoint(tenant, field, &ids, survivor, now).await?;
            let holder = field.object();
            for r in &referrers {
                let change = FieldChange {
                    field: field.name(),
                    from: json!(r.target),
                    to: json!(survivor),
                };
                match entries
                    .iter_mut()
                    .find(|(o, id, _)| *o == holder && *id == r.id)
                {
                    Some((_, _, changes)) => changes.push(change),
                    None => entries.push((holder, r.id.clone(), vec![change])),
                }
            }
        }
        let mut moved = std::collections::HashSet::new();
        for (holder, id, changes) in entries {
            match holder {
                ObjectKind::Contact => fx.changed(
                    RecordRef::Contact(ContactId::from_trusted(id.clone())),
                    false,
                ),
                ObjectKind::Deal => fx.changed(
                    RecordRef::Deal(crm_domain::DealId::from_trusted(id.clone())),
                    false,
                ),
                _ => {}
            }
            if holder != ObjectKind::Activity {
                self.record_entry(fx, holder, &id, ChangeAction::Updated, now, changes, None);
            }
            moved.insert(id);
        }
        Ok(moved)
    }

    /// Moves the enrollments of the merged contacts to the survivor ([`plan_enrollments`]).
    async fn move_enrollments(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        survivor: &ContactId,
        merged: &[ContactId],
        now: Timestamp,
    ) -> Result<(), AppError> {
        let mut theirs = tx.enrollments_of_contacts(tenant, merged).await?;
        if theirs.is_empty() {
            return Ok(());
        }
        // In the order of `merge_ids`: the first merged contact's enrollment wins a sequence.
        theirs.sort_by_key(|e| merged.iter().position(|m| *m == e.contact_id));
        let own: Vec<_> = tx
            .enrollments_of_contacts(tenant, std::slice::from_ref(survivor))
            .await?
            .into_iter()
            .map(|e| e.sequence_id)
            .collect();
        let plan = plan_enrollments(survivor, &own, theirs, now);
        tx.update_enrollments(tenant, &plan.exited).await?;
        tx.move_enrollments(tenant, &plan.moved).await?;
        Ok(())
    }
}

/// An owner a survivor takes from a merged record is held against deletion as any owner a write
/// names (`RecordRepo::owner_exists`); one deleted meanwhile leaves the survivor without.
async fn hold_owner(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    owner: &mut Option<UserId>,
) -> Result<(), AppError> {
    if let Some(id) = owner {
        if !tx.owner_exists(tenant, id.as_str()).await? {
            *owner = None;
        }
    }
    Ok(())
}
