//! A chunk of a contact import written in bulk: the same outcome, row by row, as writing each
//! row through the single-record path ([`crate::import_run`]), in a handful of statements.
//!
//! 1. One read finds the stored contacts holding the chunk's emails (and, in a dry run, the
//!    emails earlier chunks would have created).
//! 2. The rows are then decided in file order, in memory: each is validated as a create or an
//!    update would validate it (references checked once per distinct record or domain), and
//!    holds, for its email, either a stored contact, a contact an earlier row of the chunk
//!    creates, or nothing. A duplicate is skipped, refused or applied to that holder, as
//!    `on_duplicate` says; a later row updating a contact an earlier row creates changes the
//!    contact before it is written. Each row keeps its own history entries.
//! 3. The new contacts go in with one multi-row INSERT, the changed stored ones with one
//!    multi-row UPDATE guarded by the version read in step 1.
//!
//! A write another transaction got to first between steps 1 and 3 (its email taken, its
//! version moved, a reference gone) leaves that holder unwritten; its rows are then written
//! again one by one through the single-record path, which decides them afresh. A dry run stops
//! after step 2. A registry with unique custom fields is not served here (their checks lock each
//! value as it is written): [`crate::import_run`] writes such chunks row by row.

use std::collections::{HashMap, HashSet};

use crm_domain::{
    history::ChangeAction,
    import::{ImportRow, OnDuplicate},
    registry::ReferenceCheck,
    Contact, ContactId, Email, ObjectKind, Registry, Tenant,
};

use crate::{
    contacts::conflict,
    error::AppError,
    import_run::{ChunkRows, RowOutcome},
    ports::{Referent, Tx},
    write::{invalid_reference, reference_exists, referent, Effects, RecordRef},
    App,
};

/// Who holds an email the chunk's rows name.
enum Holder {
    /// A stored contact as this chunk's rows left it, the version it is stored at, and whether
    /// they changed it.
    Stored {
        contact: Contact,
        stored_version: i64,
        changed: bool,
    },
    /// A contact a row of this chunk creates.
    New(Contact),
    /// An email a row of an earlier chunk of this dry run would have created.
    Seen,
}

/// What the chunk decided for one row, with the history the row wrote.
struct Decided {
    index: usize,
    outcome: Result<RowOutcome, AppError>,
    /// The holder the row created or changed (its write decides whether the row stands).
    holder: Option<usize>,
    fx: Option<Effects>,
}

/// The answers of one chunk's lookups, read once each.
#[derive(Default)]
struct Lookups {
    exists: HashMap<(Referent, String), bool>,
    domains: HashMap<String, Vec<String>>,
}

impl App {
    /// Writes (or, in a dry run, decides) the contact rows of one chunk; `seen`: the emails
    /// earlier chunks of a dry run would have created.
    pub(crate) async fn write_contact_chunk(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        chunk: &mut ChunkRows,
        registry: &Registry,
        seen: &HashSet<String>,
    ) -> Result<(), AppError> {
        let on_duplicate = chunk.import.on_duplicate;
        let emails: Vec<Email> = {
            let mut set = HashSet::new();
            chunk
                .rows
                .iter()
                .filter_map(|r| r.read.as_ref().ok()?.email_key())
                .filter(|e| set.insert(e.clone()))
                .collect()
        };
        let mut holders: Vec<Holder> = Vec::new();
        let mut by_email: HashMap<Email, usize> = HashMap::new();
        for contact in tx.contacts_by_emails(tenant, &emails).await? {
            let Some(email) = contact.email.clone() else {
                continue;
            };
            by_email.insert(email, holders.len());
            holders.push(Holder::Stored {
                stored_version: contact.version,
                contact,
                changed: false,
            });
        }
        for email in emails.iter().filter(|e| seen.contains(e.as_str())) {
            by_email.entry(email.clone()).or_insert_with(|| {
                holders.push(Holder::Seen);
                holders.len() - 1
            });
        }
        let mut lookups = Lookups::default();
        let mut decided = Vec::with_capacity(chunk.rows.len());
        for index in 0..chunk.rows.len() {
            let row = match &chunk.rows[index].read {
                Ok(row) => row,
                Err(e) => {
                    let outcome = Err(e.clone().into());
                    decided.push(Decided {
                        index,
                        outcome,
                        holder: None,
                        fx: None,
                    });
                    continue;
                }
            };
            let mut fx = chunk.row_effects();
            let email = row.email_key();
            let held = email.as_ref().and_then(|e| by_email.get(e).copied());
            let outcome = match (held, on_duplicate) {
                (Some(_), OnDuplicate::Skip) => Ok(RowOutcome::Skipped),
                (Some(h), OnDuplicate::Update) => self
                    .update_holder(
                        tx,
                        tenant,
                        registry,
                        &mut lookups,
                        row,
                        &mut holders[h],
                        &mut fx,
                    )
                    .await
                    .map(|()| RowOutcome::Updated),
                (held, _) => match (
                    self.new_contact(tx, tenant, registry, &mut lookups, row)
                        .await,
                    held,
                ) {
                    (Err(e), _) => Err(e),
                    (Ok(_), Some(h)) => Err(self.duplicate(&holders[h])),
                    (Ok(contact), None) => {
                        self.contact_created(&mut fx, &contact);
                        if let Some(email) = email {
                            by_email.insert(email, holders.len());
                        }
                        holders.push(Holder::New(contact));
                        Ok(RowOutcome::Created)
                    }
                },
            };
            // The holder whose write decides whether the row stands: the one it matched, or the
            // one it created (the last one).
            let holder = match outcome {
                Ok(RowOutcome::Created) => holders.len().checked_sub(1),
                _ => held,
            };
            let fx = outcome.is_ok().then_some(fx);
            decided.push(Decided {
                index,
                outcome,
                holder,
                fx,
            });
        }
        let lost = if chunk.import.dry_run {
            HashSet::new()
        } else {
            write_holders(tx, tenant, &holders).await?
        };
        let mut again = Vec::new();
        for d in decided {
            if d.holder.is_some_and(|h| lost.contains(&h)) {
                again.push(d.index);
                continue;
            }
            if let Some(fx) = d.fx {
                chunk.fx.absorb_changes(fx);
            }
            if let Ok(RowOutcome::Created) = &d.outcome {
                let row = chunk.rows[d.index].read.as_ref().ok();
                if let Some(email) = row.and_then(ImportRow::email_key) {
                    chunk.created_keys.push(email.as_str().to_owned());
                }
            }
            self.settle(chunk, d.index, d.outcome)?;
        }
        // Rows whose holder someone else wrote meanwhile: decided afresh, one by one.
        for index in again {
            self.write_row_alone(tx, tenant, chunk, index, seen).await?;
        }
        Ok(())
    }

    /// The conflict a create of a duplicate answers (`on_duplicate=error`).
    fn duplicate(&self, holder: &Holder) -> AppError {
        match holder {
            Holder::Stored { contact, .. } | Holder::New(contact) => {
                conflict(&*self.views, contact)
            }
            Holder::Seen => AppError::Conflict {
                detail: "an earlier row of this file has this email".into(),
                existing: None,
            },
        }
    }

    /// A contact from `row` as a create would build it, its references checked.
    async fn new_contact(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        registry: &Registry,
        lookups: &mut Lookups,
        row: &ImportRow,
    ) -> Result<Contact, AppError> {
        let mut draft = row.contact_draft();
        if let Some(domain) = &row.company_domain {
            draft.company_id = Some(lookups.company(tx, tenant, domain).await?);
        }
        let (contact, refs) = Contact::create(
            ContactId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
            registry,
        )?;
        lookups.check(tx, tenant, &refs).await?;
        Ok(contact)
    }

    /// `row` applied to the contact `holder` holds, as an upsert matching it would: restored
    /// first when soft-deleted, then patched. Nothing changes when it fails.
    #[allow(clippy::too_many_arguments)]
    async fn update_holder(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        registry: &Registry,
        lookups: &mut Lookups,
        row: &ImportRow,
        holder: &mut Holder,
        fx: &mut Effects,
    ) -> Result<(), AppError> {
        let (contact, changed) = match holder {
            Holder::Stored {
                contact, changed, ..
            } => (contact, Some(changed)),
            Holder::New(contact) => (contact, None),
            Holder::Seen => {
                // A dry run: the earlier row's contact is not stored; the row must still be
                // one a create would take.
                self.new_contact(tx, tenant, registry, lookups, row).await?;
                return Ok(());
            }
        };
        let mut patch = row.contact_patch();
        if let Some(domain) = &row.company_domain {
            let id = lookups.company(tx, tenant, domain).await?;
            patch.company_id = crm_domain::Patch::Value(id);
        }
        let now = self.clock.now();
        let mut next = contact.clone();
        let mark = fx.mark();
        if next.deleted_at.is_some() {
            next.deleted_at = None;
            next.updated_at = now;
            next.version += 1;
            fx.changed(RecordRef::Contact(next.id.clone()), false);
            self.record_change(
                fx,
                ObjectKind::Contact,
                next.id.as_str(),
                ChangeAction::Restored,
                now,
                None,
                None,
            );
        }
        let before = self.views.contact(&next);
        let applied = match next.apply(patch, now, registry) {
            Ok((fields, refs)) => lookups.check(tx, tenant, &refs).await.map(|()| fields),
            Err(e) => Err(e.into()),
        };
        let fields = match applied {
            Ok(fields) => fields,
            Err(e) => {
                fx.rollback_to(mark);
                return Err(e);
            }
        };
        if !fields.is_empty() {
            fx.changed(RecordRef::Contact(next.id.clone()), false);
            let after = self.views.contact(&next);
            self.record_change(
                fx,
                ObjectKind::Contact,
                next.id.as_str(),
                ChangeAction::Updated,
                now,
                Some(&before),
                Some(&after),
            );
        }
        if let Some(changed) = changed {
            *changed |= next.version != contact.version;
        }
        *contact = next;
        Ok(())
    }
}

impl Lookups {
    /// The id of the one active company with `domain` (a `company.domain` column).
    async fn company(
        &mut self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        domain: &str,
    ) -> Result<String, AppError> {
        if !self.domains.contains_key(domain) {
            let ids = crate::import_run::companies_with_domain(tx, tenant, domain)
                .await?
                .into_iter()
                .map(|c| c.id.to_string())
                .collect();
            self.domains.insert(domain.to_owned(), ids);
        }
        crate::import_run::one_company(domain, &self.domains[domain])
    }

    /// Fails with `invalid_reference` when a record `refs` names does not exist.
    async fn check(
        &mut self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        refs: &[ReferenceCheck],
    ) -> Result<(), AppError> {
        for r in refs {
            let Some(referent) = referent(r) else {
                return Err(invalid_reference(r));
            };
            let key = (referent, r.id.clone());
            let exists = match self.exists.get(&key) {
                Some(e) => *e,
                None => {
                    let e = reference_exists(tx, tenant, referent, &r.id).await?;
                    self.exists.insert(key, e);
                    e
                }
            };
            if !exists {
                return Err(invalid_reference(r));
            }
        }
        Ok(())
    }
}

/// Writes the new and the changed contacts; returns the holders it could not write.
async fn write_holders(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    holders: &[Holder],
) -> Result<HashSet<usize>, AppError> {
    let mut lost = HashSet::new();
    let new: Vec<(usize, &Contact)> = holders
        .iter()
        .enumerate()
        .filter_map(|(i, h)| match h {
            Holder::New(c) => Some((i, c)),
            _ => None,
        })
        .collect();
    if !new.is_empty() {
        let list: Vec<&Contact> = new.iter().map(|(_, c)| *c).collect();
        let inserted: HashSet<ContactId> = tx
            .insert_contacts(tenant, &list)
            .await?
            .into_iter()
            .collect();
        lost.extend(
            new.iter()
                .filter(|(_, c)| !inserted.contains(&c.id))
                .map(|(i, _)| *i),
        );
    }
    let changed: Vec<(usize, (&Contact, i64))> = holders
        .iter()
        .enumerate()
        .filter_map(|(i, h)| match h {
            Holder::Stored {
                contact,
                stored_version,
                changed: true,
            } => Some((i, (contact, *stored_version))),
            _ => None,
        })
        .collect();
    if !changed.is_empty() {
        let list: Vec<(&Contact, i64)> = changed.iter().map(|(_, u)| *u).collect();
        let written: HashSet<ContactId> = tx
            .update_contacts(tenant, &list)
            .await?
            .into_iter()
            .collect();
        lost.extend(
            changed
                .iter()
                .filter(|(_, (c, _))| !written.contains(&c.id))
                .map(|(i, _)| *i),
        );
    }
    Ok(lost)
}
