//! Contact creates grouped into shared transactions: the write coalescing of issue 8.
//!
//! Alone, every create is its own transaction: BEGIN, the contact's INSERT, its event's INSERT,
//! COMMIT (or, when nothing reacts to it, one statement on Postgres: `App::create_contact_alone`).
//! A commit per contact is exactly the database's own ceiling the bench measures, so creates
//! served alone can only come near it. When the
//! server turns grouping on ([`App::group_contact_creates`]) with `slots` transactions:
//! - a create that finds a slot free takes it and runs alone, exactly as without grouping (no
//!   queue, no other task: at low load nothing changes);
//! - a create that finds every slot taken is queued;
//! - whoever gives a slot back (a create alone, once it has its answer, or a group) first looks
//!   at the queue: if creates wait there, it keeps the slot and commits up to `max_group` of them
//!   as one group, in a task of its own: one multi-row INSERT of the contacts
//!   ([`crate::ports::ContactRepo::insert_contacts`]), one of their events, one commit.
//!
//! So groups form only while the database already has `slots` create transactions in flight, and
//! they grow with the load. Both decisions (take a slot or queue; give it back or serve the
//! queue) are made under one lock, so a queued create is never left without a slot to serve it.
//!
//! Each create keeps its own outcome, the one it would have had alone:
//! - invalid input is refused before anything is written;
//! - a contact the multi-row insert skipped (its company missing, its email taken) wrote
//!   nothing, and is inserted alone in the same transaction to learn which error to answer
//!   (or, if the company was committed meanwhile, to succeed); so is a contact with other
//!   references (reference-typed custom fields);
//! - its automations, sequence enrollments and idempotency record are written as for a create
//!   alone ([`App::finish_write`] over the group's events).
//!
//! A store error before the commit rolls the whole group back, and then every create in it runs
//! again alone, in its own transaction, so that one create's failure never becomes another's. A
//! failed commit answers every create of the group with its error: whether a commit that failed
//! took effect is not known, so nothing is retried.

use std::{
    collections::{HashSet, VecDeque},
    sync::{Arc, Mutex, OnceLock},
};

use crm_domain::{registry::ReferenceCheck, Contact, ContactDraft, ContactId, ObjectKind, Tenant};
use tokio::sync::oneshot;

use crate::{
    contacts::email_conflict,
    error::AppError,
    idempotency::IdemClaim,
    ports::{StoreError, Tx},
    write::{finish_in_tx, missing_reference, store_references, Effects, Emit, RecordRef},
    App,
};

/// The create slots and the queue, once grouping is on; shared by every clone of the [`App`].
#[derive(Default)]
pub(crate) struct CreateGroups(OnceLock<Arc<Slots>>);

pub(crate) struct Slots {
    slots: usize,
    max_group: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Slots taken: creates running alone plus groups running.
    taken: usize,
    queue: VecDeque<Queued>,
}

impl CreateGroups {
    pub(crate) fn slots(&self) -> Option<&Arc<Slots>> {
        self.0.get()
    }
}

impl Slots {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The lock is never held across a panic point that could leave `State` half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Up to `max_group` queued creates, or none.
    fn take_queued(&self) -> Option<Vec<Queued>> {
        let mut state = self.state();
        take(&mut state, self.max_group)
    }

    /// Gives a slot back, unless creates are queued: then the slot serves them, in a task of its
    /// own (the slot's holder may be a request about to answer).
    fn give_back(self: &Arc<Self>, app: &App) {
        let mut state = self.state();
        let Some(group) = take(&mut state, self.max_group) else {
            state.taken -= 1;
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime left to serve the group on: the process is ending, and the group's
            // creates answer an error as their senders drop.
            state.taken -= 1;
            return;
        };
        drop(state);
        let slot = Slot {
            slots: self.clone(),
            app: app.clone(),
        };
        drop(runtime.spawn(slot.serve(group)));
    }
}

fn take(state: &mut State, max_group: usize) -> Option<Vec<Queued>> {
    if state.queue.is_empty() {
        return None;
    }
    let n = state.queue.len().min(max_group);
    Some(state.queue.drain(..n).collect())
}

/// A slot a group task holds; given back when dropped, also when the task panics.
struct Slot {
    slots: Arc<Slots>,
    app: App,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.give_back(&self.app);
    }
}

impl Slot {
    /// Runs `group`, then each group queued meanwhile, until the queue is empty.
    async fn serve(self, mut group: Vec<Queued>) {
        loop {
            self.app.run_group(group).await;
            match self.slots.take_queued() {
                Some(next) => group = next,
                None => return,
            }
        }
    }
}

/// The slot a create running alone holds; given back when dropped, also when the request's
/// future is dropped (a client that went away).
struct AloneSlot<'a> {
    slots: &'a Arc<Slots>,
    app: &'a App,
}

impl Drop for AloneSlot<'_> {
    fn drop(&mut self) {
        self.slots.give_back(self.app);
    }
}

/// A create waiting for, or inside, a group.
struct Queued {
    tenant: Tenant,
    idem: Option<IdemClaim>,
    reply: oneshot::Sender<Result<Contact, AppError>>,
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
    /// Groups contact creates from now on (see the module documentation): once `slots` create
    /// transactions are in flight, further creates queue and are committed up to `max_group` in
    /// one transaction. Called once by the server; later calls change nothing. Until it is called
    /// (tests, CLI commands, other services embedding the app) every create is its own
    /// transaction. Needs a tokio runtime, on which the groups run.
    pub fn group_contact_creates(&self, slots: usize, max_group: usize) {
        let slots = Slots {
            slots: slots.max(1),
            max_group: max_group.max(1),
            state: Mutex::default(),
        };
        let _ = self.create_groups.0.set(Arc::new(slots));
    }

    /// [`App::create_contact`] with grouping on: alone in a free slot, else queued for a group.
    pub(crate) async fn create_contact_in_slot(
        &self,
        slots: &Arc<Slots>,
        tenant: &Tenant,
        draft: ContactDraft,
        idem: Option<&IdemClaim>,
    ) -> Result<Contact, AppError> {
        let answer = {
            let mut state = slots.state();
            if state.taken < slots.slots {
                state.taken += 1;
                Err(draft)
            } else {
                let (reply, answer) = oneshot::channel();
                state.queue.push_back(Queued {
                    tenant: tenant.clone(),
                    idem: idem.cloned(),
                    reply,
                    stage: Stage::Draft(draft),
                });
                Ok(answer)
            }
        };
        match answer {
            Ok(answer) => answer.await.unwrap_or_else(|_| {
                Err(AppError::Internal(
                    "the contact create was lost with its group".into(),
                ))
            }),
            Err(draft) => {
                let _slot = AloneSlot { slots, app: self };
                self.create_contact_alone(tenant, draft, idem).await
            }
        }
    }

    async fn run_group(&self, mut group: Vec<Queued>) {
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
                    let _ = q.reply.send(answer);
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
                    let _ = q.reply.send(answer);
                }
            }
            Err(GroupFailure::Before(e)) => {
                tracing::warn!(error = %e, creates = group.len(), "a group of contact creates failed before its commit; each runs again alone");
                for q in group {
                    let answer = match q.stage {
                        Stage::Draft(draft) => {
                            self.create_contact_alone(&q.tenant, draft, q.idem.as_ref())
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
                    let _ = q.reply.send(answer);
                }
            }
        }
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
            if q.reply.is_closed() {
                // Its request went away while it waited (a create alone would have been rolled
                // back with it): nothing is written for it.
                q.stage = Stage::Invalid(AppError::Internal("the request went away".into()));
                continue;
            }
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
                Stage::Built { contact, refs } if only_its_company(contact, refs) => Some(contact),
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
        let mut fx = Effects::new(Emit::Events);
        for q in part.iter_mut() {
            let stage = std::mem::replace(&mut q.stage, Stage::Draft(ContactDraft::default()));
            let Stage::Built { contact, refs } = stage else {
                q.stage = stage;
                continue;
            };
            let error = if inserted.contains(&contact.id) {
                None
            } else {
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
                        201,
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
