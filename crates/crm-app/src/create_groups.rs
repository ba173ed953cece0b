//! Contact creates grouped into shared transactions, so that a burst of them costs fewer commits. When
//! creates run together is decided outside this crate (a [`WriteGrouping`] port, which
//! `crm-runtime` implements with a few transaction slots and a queue: groups form only while the
//! database already has that many create transactions in flight, and grow with the load); what
//! a group does is decided here: [`GroupedWrites`] for contact creates.
//!
//! Alone, every create is its own transaction: BEGIN, the contact's INSERT, its event's INSERT,
//! COMMIT (or, when nothing reacts to it, one statement on Postgres: `App::create_contact_alone`).
//! A commit per contact is exactly the database's own ceiling, so creates served alone can only
//! come near it. A group commits several creates as one: one multi-row INSERT of the contacts
//! ([`crate::ports::ContactRepo::insert_contacts`]), one of their events, one commit.
//!
//! Each create keeps its own outcome, the one it would have had alone:
//! - invalid input is refused before anything is written;
//! - a contact the multi-row insert skipped (its company missing, its email taken) wrote
//!   nothing, and is inserted alone in the same transaction to learn which error to answer
//!   (or, if the company was committed meanwhile, to succeed); so is a contact with other
//!   references (reference-typed custom fields);
//! - its automations, sequence enrollments and idempotency record are written as for a create
//!   alone (`App::finish_write` over the group's events).
//!
//! A store error before the commit rolls the whole group back, and then every create in it runs
//! again alone, in its own transaction, so that one create's failure never becomes another's. A
//! failed commit answers every create of the group with its error: whether a commit that failed
//! took effect is not known, so nothing is retried.

use std::{collections::HashSet, sync::Arc};

use async_trait::async_trait;
use crm_domain::{
    history::Author, registry::ReferenceCheck, Contact, ContactDraft, ContactId, ObjectKind, Tenant,
};

use crate::{
    contacts::email_conflict,
    error::AppError,
    idempotency::IdemClaim,
    ports::{GroupedWrites, StoreError, Tx, WriteGrouping},
    write::{finish_in_tx, missing_reference, store_references, Effects, Emit, RecordRef},
    App,
};

/// One contact create, as it waits for its transaction.
pub struct ContactCreate {
    pub tenant: Tenant,
    /// Who creates it (history).
    pub author: Author,
    pub draft: ContactDraft,
    pub idem: Option<IdemClaim>,
}

/// The outcome of one contact create.
pub type ContactCreated = Result<Contact, AppError>;

/// Where contact creates are grouped (see the module documentation).
pub type ContactCreateGrouping = dyn WriteGrouping<ContactCreate, ContactCreated>;

/// The grouping of contact creates, once the server turns it on.
#[derive(Clone, Default)]
pub(crate) struct CreateGroups(Option<Arc<ContactCreateGrouping>>);

impl CreateGroups {
    pub(crate) fn slots(&self) -> Option<&Arc<ContactCreateGrouping>> {
        self.0.as_ref()
    }
}

/// A create inside a group.
struct Queued {
    tenant: Tenant,
    author: Author,
    idem: Option<IdemClaim>,
    stage: Stage,
}

// Each create's stage lives in place in its group's `Vec`; boxing the large variants would cost
// an allocation per create for nothing.
#[allow(clippy::large_enum_variant)]
enum Stage {
    /// Not yet validated.
    Draft(ContactDraft),
    /// Validated, not yet inserted.
    Built {
        contact: Contact,
        refs: Vec<ReferenceCheck>,
    },
    /// Inserted in the group's transaction (not yet committed); `reloaded` is the contact as
    /// automations left it, when they changed it.
    Inserted {
        contact: Contact,
        refs: Vec<ReferenceCheck>,
        reloaded: Option<Contact>,
    },
    /// Not inserted: a reference is missing (`error`), or the email is taken (`error` is then
    /// the conflict, read once the group's automations have run, as a create alone would see
    /// the holder).
    Skipped {
        contact: Contact,
        refs: Vec<ReferenceCheck>,
        error: Option<AppError>,
    },
    /// Refused by validation (or its request went away before the group began): the create's
    /// answer whatever happens to the group.
    Invalid(AppError),
}

/// Why a group did not commit.
enum GroupFailure {
    /// Before the commit: nothing was written.
    Before(AppError),
    /// The commit itself: what it did is unknown.
    Commit(AppError),
}

impl App {
    /// The same application with its contact creates grouped by `grouping` (see the module
    /// documentation). Until then (tests, CLI commands, other services embedding the app) every
    /// create is its own transaction.
    pub fn with_contact_create_grouping(mut self, grouping: Arc<ContactCreateGrouping>) -> App {
        self.create_groups = CreateGroups(Some(grouping));
        self
    }

    /// [`App::create_contact`] with grouping on: alone or in a group, as `grouping` decides.
    pub(crate) async fn create_contact_in_slot(
        &self,
        grouping: &Arc<ContactCreateGrouping>,
        tenant: &Tenant,
        author: &Author,
        draft: ContactDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        let create = ContactCreate {
            tenant: tenant.clone(),
            author: author.clone(),
            draft,
            idem: idem.cloned(),
        };
        grouping.run(self, create).await
    }

    /// Runs `group` in one transaction; each create's outcome, in their order.
    async fn run_group(&self, mut group: Vec<Queued>) -> Vec<ContactCreated> {
        let mut answers = Vec::with_capacity(group.len());
        match self.commit_group(&mut group).await {
            Ok(()) => {
                for q in group {
                    let answer = match q.stage {
                        Stage::Inserted {
                            contact, reloaded, ..
                        } => Ok(reloaded.unwrap_or(contact)),
                        Stage::Skipped {
                            error: Some(error), ..
                        }
                        | Stage::Invalid(error) => Err(error),
                        Stage::Draft(_)
                        | Stage::Built { .. }
                        | Stage::Skipped { error: None, .. } => Err(AppError::Internal(
                            "a create was left unfinished by its group".into(),
                        )),
                    };
                    answers.push(answer);
                }
            }
            Err(GroupFailure::Commit(e)) => {
                let unavailable = matches!(e, AppError::Unavailable(_));
                let detail = e.to_string();
                for q in group {
                    let answer = match q.stage {
                        Stage::Invalid(error) => Err(error),
                        _ if unavailable => Err(AppError::Unavailable(detail.clone())),
                        _ => Err(AppError::Internal(detail.clone())),
                    };
                    answers.push(answer);
                }
            }
            Err(GroupFailure::Before(e)) => {
                tracing::warn!(error = %e, creates = group.len(), "a group of contact creates failed before its commit; each runs again alone");
                for q in group {
                    let answer = match q.stage {
                        Stage::Draft(draft) => {
                            self.create_contact_alone(&q.tenant, &q.author, draft, q.idem.as_ref())
                                .await
                        }
                        Stage::Built { contact, refs }
                        | Stage::Inserted { contact, refs, .. }
                        | Stage::Skipped { contact, refs, .. } => {
                            match self.store.begin_write().await {
                                Ok(tx) => {
                                    self.insert_built_contact(
                                        tx,
                                        &q.tenant,
                                        &q.author,
                                        contact,
                                        &refs,
                                        q.idem.as_ref(),
                                    )
                                    .await
                                }
                                Err(e) => Err(e.into()),
                            }
                        }
                        Stage::Invalid(error) => Err(error),
                    };
                    answers.push(answer);
                }
            }
        }
        answers
    }

    /// The group in one transaction, tenant by tenant.
    async fn commit_group(&self, group: &mut [Queued]) -> Result<(), GroupFailure> {
        let mut tx = self
            .store
            .begin_write()
            .await
            .map_err(|e| GroupFailure::Before(e.into()))?;
        let mut tenants: Vec<Tenant> = Vec::new();
        for q in group.iter() {
            if !tenants.contains(&q.tenant) {
                tenants.push(q.tenant.clone());
            }
        }
        for tenant in &tenants {
            let mut part: Vec<&mut Queued> =
                group.iter_mut().filter(|q| q.tenant == *tenant).collect();
            self.create_part(&mut *tx, tenant, &mut part)
                .await
                .map_err(GroupFailure::Before)?;
        }
        tx.commit()
            .await
            .map_err(|e| GroupFailure::Commit(e.into()))
    }

    /// One tenant's creates of a group, in `tx`: each moves on from `Draft` to `Inserted`,
    /// `Skipped` or `Invalid`. An error is the store's: the group is to be rolled back.
    async fn create_part(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        part: &mut [&mut Queued],
    ) -> Result<(), AppError> {
        let registry = self.registry(&mut *tx, tenant, ObjectKind::Contact).await?;
        let now = self.clock.now();
        for q in part.iter_mut() {
            let Stage::Draft(draft) = &mut q.stage else {
                continue;
            };
            q.stage = match Contact::create(
                ContactId::from_uuid(self.ids.new_uuid()),
                now,
                std::mem::take(draft),
                &registry,
            ) {
                Ok((contact, refs)) => Stage::Built { contact, refs },
                Err(e) => Stage::Invalid(e.into()),
            };
        }

        // The contacts whose only reference is their company, in one statement.
        let plain: Vec<&Contact> = part
            .iter()
            .filter_map(|q| match &q.stage {
                Stage::Built { contact, refs }
                    if only_its_company(contact, refs) && !holds_unique(&registry, contact) =>
                {
                    Some(contact)
                }
                _ => None,
            })
            .collect();
        let inserted: HashSet<ContactId> = if plain.is_empty() {
            HashSet::new()
        } else {
            tx.insert_contacts(tenant, &plain)
                .await?
                .into_iter()
                .collect()
        };

        // The rest one by one, as alone: skipped by the statement above, or with other references.
        let mut fx = Effects::new(Emit::Events, Author::system());
        for q in part.iter_mut() {
            let stage = std::mem::replace(&mut q.stage, Stage::Draft(ContactDraft::default()));
            let Stage::Built { contact, refs } = stage else {
                q.stage = stage;
                continue;
            };
            let error = if inserted.contains(&contact.id) {
                None
            } else {
                if holds_unique(&registry, &contact) {
                    // Checked one by one, each seeing the ones inserted before it.
                    let id = contact.id.as_str();
                    let cf = &contact.custom_fields;
                    match self
                        .check_unique_values(
                            tx,
                            tenant,
                            ObjectKind::Contact,
                            &registry,
                            id,
                            None,
                            cf,
                        )
                        .await
                    {
                        Ok(()) => {}
                        Err(error @ AppError::Conflict { .. }) => {
                            q.stage = Stage::Skipped {
                                contact,
                                refs,
                                error: Some(error),
                            };
                            continue;
                        }
                        Err(e) => {
                            q.stage = Stage::Built { contact, refs };
                            return Err(e);
                        }
                    }
                }
                let stored = match store_references(&refs) {
                    Ok(stored) => tx.insert_contact(tenant, &contact, &stored).await,
                    Err(refused) => {
                        q.stage = Stage::Invalid(refused);
                        continue;
                    }
                };
                match stored {
                    Ok(()) => None,
                    Err(StoreError::MissingReference(i)) => Some(Some(missing_reference(&refs, i))),
                    Err(StoreError::Duplicate) => Some(None),
                    Err(e) => {
                        q.stage = Stage::Built { contact, refs };
                        return Err(e.into());
                    }
                }
            };
            q.stage = match error {
                Some(error) => Stage::Skipped {
                    contact,
                    refs,
                    error,
                },
                None => {
                    fx.set_author(q.author.clone());
                    self.contact_created(&mut fx, &contact);
                    Stage::Inserted {
                        contact,
                        refs,
                        reloaded: None,
                    }
                }
            };
        }

        let touched = self.finish_write(&mut *tx, tenant, fx).await?;
        for q in part.iter_mut() {
            match &mut q.stage {
                Stage::Inserted {
                    contact, reloaded, ..
                } => {
                    if touched.contains(&RecordRef::Contact(contact.id.clone())) {
                        *reloaded = tx.get_contact(tenant, &contact.id).await?;
                    }
                    let shown = reloaded.as_ref().unwrap_or(contact);
                    finish_in_tx(
                        &mut *tx,
                        tenant,
                        q.idem.as_ref(),
                        &self.views.contact(shown),
                    )
                    .await?;
                }
                Stage::Skipped {
                    contact,
                    error: error @ None,
                    ..
                } => {
                    let conflict = email_conflict(&*self.views, &mut *tx, tenant, contact).await;
                    if matches!(conflict, AppError::Internal(_) | AppError::Unavailable(_)) {
                        return Err(conflict);
                    }
                    *error = Some(conflict);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether `contact` holds a value of a unique custom field, which a group inserts alone.
fn holds_unique(registry: &crm_domain::Registry, contact: &Contact) -> bool {
    registry.fields.iter().any(|f| {
        f.unique
            && contact
                .custom_fields
                .get(&f.key)
                .is_some_and(|v| !v.is_null())
    })
}

/// Whether `refs` asks no more of the store than `contact`'s company: what
/// [`crate::ports::ContactRepo::insert_contacts`] checks.
fn only_its_company(contact: &Contact, refs: &[ReferenceCheck]) -> bool {
    refs.iter().all(|r| {
        r.object() == Some(ObjectKind::Company)
            && contact
                .company_id
                .as_ref()
                .is_some_and(|c| c.as_str() == r.id)
    })
}

#[async_trait]
impl GroupedWrites<ContactCreate, ContactCreated> for App {
    async fn alone(&self, create: ContactCreate) -> ContactCreated {
        self.create_contact_alone(
            &create.tenant,
            &create.author,
            create.draft,
            create.idem.as_ref(),
        )
        .await
    }

    async fn together(&self, creates: Vec<ContactCreate>) -> Vec<ContactCreated> {
        let group = creates
            .into_iter()
            .map(|c| Queued {
                tenant: c.tenant,
                author: c.author,
                idem: c.idem,
                stage: Stage::Draft(c.draft),
            })
            .collect();
        self.run_group(group).await
    }

    fn lost(&self) -> ContactCreated {
        Err(AppError::Internal(
            "the contact create was lost with its group".into(),
        ))
    }

    fn handle(&self) -> Arc<dyn GroupedWrites<ContactCreate, ContactCreated>> {
        Arc::new(self.clone())
    }
}
