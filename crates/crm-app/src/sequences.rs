//! Sequences: the use cases of `/sequences` (create, read, change, delete, preview, direct
//! enrollment, enrollments, unenroll), enrollment of existing records, and the exit rules shared
//! by the write path ([`crate::sequence_hooks`]) and the scheduler ([`crate::sequence_sends`]).

use std::collections::{HashMap, HashSet};

use crm_domain::{
    audit::changes,
    rule::RuleContext,
    sequence::{
        self, Enrollment, ExitReason, Sequence, SequenceDef, SequenceDraft, SourceObject,
        ENROLL_EXISTING_LIMIT,
    },
    Contact, ContactId, EnrollmentId, ObjectKind, PlanCap, Registry, SequenceId, Tenant, Timestamp,
    ValidationError,
};
use serde_json::{json, Value};

use crate::{
    audit::Audited,
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    plans::check_plan_cap,
    ports::{ContactFilter, DealFilter, Slice, StoreError, Tx},
    App,
};

const LIST: &str = "sequences";
/// Records read per page while looking for existing matches (`enroll_existing`, preview).
const SCAN_PAGE: u32 = 500;

fn parse_id(id: &str) -> Result<SequenceId, AppError> {
    SequenceId::parse(id).map_err(|_| AppError::not_found("sequence", id))
}

/// A partial update: definition fields given replace the sequence's (the result is validated
/// whole); `trigger: null` removes the trigger.
#[derive(Debug, Clone, Default)]
pub struct SequencePatch {
    pub name: Option<String>,
    pub channel: Option<String>,
    pub trigger: Option<Value>,
    pub exit_when: Option<Value>,
    pub steps: Option<Value>,
    pub enabled: Option<bool>,
}

/// The answer of a direct enrollment: the enrollment, and whether this call made it.
#[derive(Debug, Clone)]
pub struct Enrolled {
    pub enrollment: Enrollment,
    pub created: bool,
}

/// Whether a contact can receive a sequence's emails: it exists, is not deleted and has an email.
pub(crate) fn reachable(contact: Option<&Contact>) -> bool {
    contact.is_some_and(|c| c.deleted_at.is_none() && c.email.is_some())
}

/// Why an active enrollment must end now, if it must: its sequence is gone or disabled, its
/// source record (or recipient) is gone, or the source meets the exit conditions. `source` is
/// the source record's snapshot, `None` when it is deleted or missing.
pub(crate) fn exit_reason(
    e: &Enrollment,
    seq: Option<&Sequence>,
    source: Option<&Value>,
) -> Option<ExitReason> {
    let Some(seq) = seq else {
        return Some(ExitReason::SequenceDeleted);
    };
    if !seq.enabled {
        return Some(ExitReason::SequenceDisabled);
    }
    let Some(source) = source else {
        return Some(ExitReason::SourceDeleted);
    };
    // Exit conditions read the records of the sequence's trigger; a contact enrolled directly
    // into a deal sequence has no such record and ends only by deletion.
    (e.source_object == seq.def.source_object() && seq.def.exit_matches(source))
        .then_some(ExitReason::ExitCondition)
}

impl App {
    /// What the audit log shows of a sequence: its definition as a client writes it, and its
    /// switches.
    fn sequence_shape(&self, seq: &Sequence) -> Value {
        let d = self.views.sequence_draft(&seq.def);
        json!({"name": d.name, "channel": d.channel, "trigger": d.trigger, "exit_when": d.exit_when,
            "steps": d.steps, "enabled": seq.enabled, "enroll_existing": seq.enroll_existing})
    }

    /// The registries and stage keys a definition is validated against.
    async fn sequence_context(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
    ) -> Result<(Registry, Registry, Vec<String>), AppError> {
        let contact = tx.load_registry(tenant, ObjectKind::Contact).await?;
        let deal = tx.load_registry(tenant, ObjectKind::Deal).await?;
        let mut stage_keys: Vec<String> = Vec::new();
        for p in tx.list_pipelines(tenant).await? {
            for k in p.stage_keys() {
                if !stage_keys.contains(&k) {
                    stage_keys.push(k);
                }
            }
        }
        Ok((contact, deal, stage_keys))
    }

    async fn validate_sequence(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        draft: SequenceDraft,
    ) -> Result<SequenceDef, AppError> {
        let (contact, deal, stage_keys) = self.sequence_context(tx, &caller.tenant).await?;
        let ctx = RuleContext {
            contact_registry: &contact,
            deal_registry: &deal,
            stage_keys: &stage_keys,
        };
        let def = SequenceDef::parse(draft, &ctx)?;
        self.check_sequence_sending(tx, &caller.tenant, &def)
            .await?;
        Ok(def)
    }

    /// Creates a sequence (enabled unless `enabled: false`). Counts against the plan's cap of
    /// sequences in the caller's mode. With `enroll_existing`, existing records that match the
    /// trigger filter (and not the exit conditions, and have a recipient) are enrolled in the same
    /// transaction, at most [`ENROLL_EXISTING_LIMIT`], newest first.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_sequence(
        &self,
        caller: &Caller,
        draft: SequenceDraft,
        enabled: bool,
        enroll_existing: bool,
    ) -> Result<Sequence, AppError> {
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let def = self.validate_sequence(&mut *tx, caller, draft).await?;
        check_plan_cap(&mut *tx, caller, PlanCap::Sequences).await?;
        let now = self.clock.now();
        let seq = Sequence {
            id: SequenceId::from_uuid(self.ids.new_uuid()),
            def,
            enabled,
            enroll_existing,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        tx.mark_config_changed(&tenant.workspace_id);
        tx.insert_sequence(tenant, &seq).await?;
        if enroll_existing && enabled && seq.def.trigger.is_some() {
            let found = self.existing_matches(&mut *tx, tenant, &seq).await?;
            let enrollments: Vec<Enrollment> = found
                .into_iter()
                .map(|(contact, source)| {
                    Enrollment::start(
                        EnrollmentId::from_uuid(self.ids.new_uuid()),
                        &seq,
                        contact,
                        seq.def.source_object(),
                        source,
                        now,
                    )
                })
                .collect();
            let inserted = tx.insert_enrollments(tenant, &enrollments).await?;
            self.record_dry_enrollments(&enrollments, &inserted);
        }
        let diff = changes(None, Some(&self.sequence_shape(&seq)));
        let what = Audited::new("sequence.created", "sequence", seq.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(seq)
    }

    pub async fn get_sequence(&self, caller: &Caller, id: &str) -> Result<Sequence, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_sequence(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("sequence", id.as_str()))
    }

    pub async fn list_sequences(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Sequence>, AppError> {
        let slice = slice_for(&page, &caller.tenant, LIST, "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_sequences(&caller.tenant, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, LIST, "", |s| {
            s.id.to_string()
        }))
    }

    /// Changes a sequence; the result is validated as a whole. Disabling it ends its active
    /// enrollments (`sequence_disabled`); enabling it again enrolls only new triggers.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_sequence(
        &self,
        caller: &Caller,
        id: &str,
        patch: SequencePatch,
    ) -> Result<Sequence, AppError> {
        let id = parse_id(id)?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let mut seq = tx
            .get_sequence(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("sequence", id.as_str()))?;
        let before = self.sequence_shape(&seq);
        let redefines = patch.name.is_some()
            || patch.channel.is_some()
            || patch.trigger.is_some()
            || patch.exit_when.is_some()
            || patch.steps.is_some();
        let mut changed = false;
        if redefines {
            let mut draft = self.views.sequence_draft(&seq.def);
            draft.name = patch.name.or(draft.name);
            draft.channel = patch.channel.or(draft.channel);
            draft.trigger = patch.trigger.or(draft.trigger);
            draft.exit_when = patch.exit_when.or(draft.exit_when);
            draft.steps = patch.steps.or(draft.steps);
            let def = self.validate_sequence(&mut *tx, caller, draft).await?;
            changed |= def != seq.def;
            seq.def = def;
        }
        let now = self.clock.now();
        if let Some(enabled) = patch.enabled {
            if !enabled && seq.enabled {
                tx.end_sequence_enrollments(tenant, &seq.id, ExitReason::SequenceDisabled, now)
                    .await?;
            }
            changed |= enabled != seq.enabled;
            seq.enabled = enabled;
        }
        if !changed {
            return Ok(seq);
        }
        seq.version += 1;
        seq.updated_at = now;
        tx.mark_config_changed(&tenant.workspace_id);
        match tx.update_sequence(tenant, &seq).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: seq.version - 1,
                })
            }
            other => other?,
        }
        let diff = changes(Some(&before), Some(&self.sequence_shape(&seq)));
        let what = Audited::new("sequence.updated", "sequence", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(seq)
    }

    /// Deletes a sequence for good; its active enrollments end (`sequence_deleted`) and stay as
    /// history with the emails they sent.
    pub async fn delete_sequence(&self, caller: &Caller, id: &str) -> Result<SequenceId, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let before = tx.get_sequence(&caller.tenant, &id).await?;
        tx.end_sequence_enrollments(
            &caller.tenant,
            &id,
            ExitReason::SequenceDeleted,
            self.clock.now(),
        )
        .await?;
        tx.mark_config_changed(&caller.tenant.workspace_id);
        if !tx.delete_sequence(&caller.tenant, &id).await? {
            return Err(AppError::not_found("sequence", id.as_str()));
        }
        let shape = before.as_ref().map(|s| self.sequence_shape(s));
        let diff = changes(shape.as_ref(), None);
        let what = Audited::new("sequence.deleted", "sequence", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The dry run of decisions §13: the cumulative schedule, how many existing records would
    /// enroll now (capped at 500, whatever `enroll_existing` says), and merge tags no field
    /// provides. Reads only.
    pub async fn preview_sequence(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<sequence::Preview, AppError> {
        let id = parse_id(id)?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_read().await?;
        let seq = tx
            .get_sequence(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("sequence", id.as_str()))?;
        let would_enroll_now = if seq.def.trigger.is_some() {
            self.existing_matches(&mut *tx, tenant, &seq).await?.len()
        } else {
            0
        };
        let contact_fields = tx.load_registry(tenant, ObjectKind::Contact).await?;
        let company_fields = tx.load_registry(tenant, ObjectKind::Company).await?;
        let mut texts: Vec<String> = Vec::new();
        let mut subjects: Vec<Option<String>> = Vec::new();
        for step in &seq.def.steps {
            texts.extend(step.texts().into_iter().map(str::to_owned));
            let template = self.step_template(&mut *tx, tenant, step).await?;
            subjects.push(template.as_ref().map(|t| t.subject.clone()));
            if let Some(t) = template {
                texts.extend([t.subject, t.body].into_iter().chain(t.text));
            }
        }
        let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let warnings = sequence::merge_warnings(&text_refs, &contact_fields, &company_fields);
        Ok(sequence::preview(
            &seq.def,
            &subjects,
            would_enroll_now,
            &warnings,
        ))
    }

    /// Existing records of the trigger's object that would enroll now: they meet the filter and
    /// not the exit conditions, have a reachable recipient, and that recipient is not enrolled
    /// in the sequence yet. Newest first, at most [`ENROLL_EXISTING_LIMIT`], one recipient once.
    async fn existing_matches(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        seq: &Sequence,
    ) -> Result<Vec<(ContactId, String)>, AppError> {
        let object = seq.def.source_object();
        let mut found: Vec<(ContactId, String)> = Vec::new();
        let mut seen: HashSet<ContactId> = HashSet::new();
        let mut before: Option<String> = None;
        loop {
            let slice = Slice {
                before: before.clone(),
                limit: SCAN_PAGE,
            };
            // (recipient, source id) of the records meeting the filter and not the exit list.
            let (candidates, last, len): (Vec<(ContactId, String)>, Option<String>, usize) =
                match object {
                    SourceObject::Contact => {
                        let rows = tx
                            .list_contacts(tenant, &ContactFilter::default(), &slice)
                            .await?;
                        let last = rows.last().map(|c| c.id.to_string());
                        let len = rows.len();
                        let c = rows
                            .iter()
                            .filter(|c| c.email.is_some())
                            .filter_map(|c| {
                                let snap = self.views.contact(c);
                                (seq.def.filter_matches(&snap) && !seq.def.exit_matches(&snap))
                                    .then(|| (c.id.clone(), c.id.to_string()))
                            })
                            .collect();
                        (c, last, len)
                    }
                    SourceObject::Deal => {
                        let rows = tx
                            .list_deals(tenant, &DealFilter::default(), &slice)
                            .await?;
                        let last = rows.last().map(|d| d.id.to_string());
                        let len = rows.len();
                        let c = rows
                            .iter()
                            .filter_map(|d| {
                                let snap = self.views.deal(d);
                                let ok =
                                    seq.def.filter_matches(&snap) && !seq.def.exit_matches(&snap);
                                ok.then(|| {
                                    sequence::recipient(SourceObject::Deal, &snap)
                                        .map(|c| (c, d.id.to_string()))
                                })
                                .flatten()
                            })
                            .collect();
                        (c, last, len)
                    }
                };
            let mut candidates: Vec<(ContactId, String)> = candidates
                .into_iter()
                .filter(|(c, _)| !seen.contains(c))
                .collect();
            if object == SourceObject::Deal && !candidates.is_empty() {
                let ids: Vec<ContactId> = candidates.iter().map(|(c, _)| c.clone()).collect();
                let contacts: HashMap<ContactId, Contact> = tx
                    .contacts_by_ids(tenant, &ids)
                    .await?
                    .into_iter()
                    .map(|c| (c.id.clone(), c))
                    .collect();
                candidates.retain(|(c, _)| reachable(contacts.get(c)));
            }
            if !candidates.is_empty() {
                let ids: Vec<ContactId> = candidates.iter().map(|(c, _)| c.clone()).collect();
                let enrolled: HashSet<ContactId> = tx
                    .enrolled_contacts(tenant, &seq.id, &ids)
                    .await?
                    .into_iter()
                    .collect();
                for (c, source) in candidates {
                    if !enrolled.contains(&c) && seen.insert(c.clone()) {
                        found.push((c, source));
                        if found.len() == ENROLL_EXISTING_LIMIT {
                            return Ok(found);
                        }
                    }
                }
            }
            if len < SCAN_PAGE as usize {
                return Ok(found);
            }
            before = last;
        }
    }

    /// Enrolls one contact directly, bypassing the trigger: 201 with a new enrollment, or 200
    /// with the one the contact already has (a contact is enrolled at most once per sequence).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn enroll_contact(
        &self,
        caller: &Caller,
        id: &str,
        contact_id: Option<String>,
    ) -> Result<Enrolled, AppError> {
        let id = parse_id(id)?;
        let tenant = &caller.tenant;
        let raw =
            contact_id.ok_or_else(|| ValidationError::invalid("contact_id", "is required"))?;
        let contact_id = ContactId::parse(&raw).map_err(|_| ValidationError::InvalidReference {
            field: "contact_id".into(),
            value: raw.clone(),
        })?;
        let mut tx = self.store.begin_write().await?;
        let seq = tx
            .get_sequence(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("sequence", id.as_str()))?;
        if !seq.enabled {
            return Err(AppError::Conflict {
                detail: "the sequence is disabled; enable it with PATCH first".into(),
                existing: None,
            });
        }
        let contact = tx.get_contact(tenant, &contact_id).await?;
        match &contact {
            None => {
                return Err(ValidationError::InvalidReference {
                    field: "contact_id".into(),
                    value: raw,
                }
                .into())
            }
            Some(c) if c.deleted_at.is_some() => {
                return Err(ValidationError::InvalidReference {
                    field: "contact_id".into(),
                    value: raw,
                }
                .into())
            }
            Some(c) if c.email.is_none() => {
                return Err(ValidationError::invalid(
                    "contact_id",
                    "the contact has no email address to send to",
                )
                .into())
            }
            Some(_) => {}
        }
        let now = self.clock.now();
        let e = Enrollment::start(
            EnrollmentId::from_uuid(self.ids.new_uuid()),
            &seq,
            contact_id.clone(),
            SourceObject::Contact,
            contact_id.to_string(),
            now,
        );
        let inserted = tx
            .insert_enrollments(tenant, std::slice::from_ref(&e))
            .await?;
        self.record_dry_enrollments(std::slice::from_ref(&e), &inserted);
        if inserted.is_empty() {
            let existing = self
                .enrollment_of(&mut *tx, tenant, &seq.id, &contact_id)
                .await?;
            return Ok(Enrolled {
                enrollment: existing,
                created: false,
            });
        }
        tx.commit().await?;
        Ok(Enrolled {
            enrollment: e,
            created: true,
        })
    }

    /// The enrollment of a contact in a sequence (it exists: the caller just hit the unique rule).
    async fn enrollment_of(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        seq: &SequenceId,
        contact: &ContactId,
    ) -> Result<Enrollment, AppError> {
        let mut before = None;
        loop {
            let rows = tx
                .list_enrollments(
                    tenant,
                    seq,
                    &Slice {
                        before: before.clone(),
                        limit: 1000,
                    },
                )
                .await?;
            if let Some(e) = rows.iter().find(|e| &e.contact_id == contact) {
                return Ok(e.clone());
            }
            if rows.len() < 1000 {
                return Err(AppError::Internal(format!(
                    "enrollment of {contact} in {seq} vanished"
                )));
            }
            before = rows.last().map(|e| e.id.to_string());
        }
    }

    pub async fn list_sequence_enrollments(
        &self,
        caller: &Caller,
        id: &str,
        page: PageParams,
    ) -> Result<Page<Enrollment>, AppError> {
        let id = parse_id(id)?;
        let list = format!("{LIST}/{id}/enrollments");
        let slice = slice_for(&page, &caller.tenant, &list, "")?;
        let mut tx = self.store.begin_read().await?;
        if tx.get_sequence(&caller.tenant, &id).await?.is_none() {
            return Err(AppError::not_found("sequence", id.as_str()));
        }
        let rows = tx.list_enrollments(&caller.tenant, &id, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, &list, "", |e| {
            e.id.to_string()
        }))
    }

    /// Ends an enrollment (`unenrolled`). An enrollment that already ended is answered as it is.
    pub async fn unenroll_contact(
        &self,
        caller: &Caller,
        id: &str,
        enrollment_id: &str,
    ) -> Result<Enrollment, AppError> {
        let id = parse_id(id)?;
        let eid = EnrollmentId::parse(enrollment_id)
            .map_err(|_| AppError::not_found("sequence enrollment", enrollment_id))?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        if tx.get_sequence(tenant, &id).await?.is_none() {
            return Err(AppError::not_found("sequence", id.as_str()));
        }
        let mut e = tx
            .get_enrollment(tenant, &id, &eid)
            .await?
            .ok_or_else(|| AppError::not_found("sequence enrollment", eid.as_str()))?;
        if e.exit(ExitReason::Unenrolled, self.clock.now()) {
            tx.update_enrollments(tenant, std::slice::from_ref(&e))
                .await?;
            self.record_dry_exits(std::slice::from_ref(&e));
            tx.commit().await?;
        }
        Ok(e)
    }

    /// Snapshots of source records (contacts and deals) by id; deleted or missing ones absent.
    /// Contacts in `known` (already read in this transaction) are not read again.
    pub(crate) async fn source_snapshots(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        sources: &[(SourceObject, String)],
        known: &HashMap<ContactId, Contact>,
    ) -> Result<HashMap<String, Value>, AppError> {
        let mut out = HashMap::new();
        let mut contact_ids: Vec<ContactId> = Vec::new();
        let mut deal_ids: Vec<crm_domain::DealId> = Vec::new();
        for (object, id) in sources {
            match object {
                // Many enrollments share a source: each is parsed and snapshotted once.
                SourceObject::Contact if out.contains_key(id) => {}
                SourceObject::Contact => {
                    let Ok(cid) = ContactId::parse(id) else {
                        continue;
                    };
                    match known.get(&cid) {
                        Some(c) if c.deleted_at.is_none() => {
                            out.insert(id.clone(), self.views.contact(c));
                        }
                        Some(_) => {}
                        None => contact_ids.push(cid),
                    }
                }
                SourceObject::Deal => deal_ids.extend(crm_domain::DealId::parse(id).ok()),
            }
        }
        contact_ids.sort();
        contact_ids.dedup();
        deal_ids.sort();
        deal_ids.dedup();
        for c in tx.contacts_by_ids(tenant, &contact_ids).await? {
            if c.deleted_at.is_none() {
                out.insert(c.id.to_string(), self.views.contact(&c));
            }
        }
        for d in tx.deals_by_ids(tenant, &deal_ids).await? {
            if d.deleted_at.is_none() {
                out.insert(d.id.to_string(), self.views.deal(&d));
            }
        }
        Ok(out)
    }

    /// Ends the active enrollments among `enrollments` that must end now (see [`exit_reason`]);
    /// returns those that go on.
    pub(crate) async fn recheck_enrollments(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        enrollments: Vec<Enrollment>,
        now: Timestamp,
    ) -> Result<Vec<Enrollment>, AppError> {
        if enrollments.is_empty() {
            return Ok(enrollments);
        }
        let mut seq_ids: Vec<SequenceId> =
            enrollments.iter().map(|e| e.sequence_id.clone()).collect();
        seq_ids.sort();
        seq_ids.dedup();
        let seqs: HashMap<SequenceId, Sequence> = tx
            .get_sequences(tenant, &seq_ids)
            .await?
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
        let sources: Vec<(SourceObject, String)> = enrollments
            .iter()
            .map(|e| (e.source_object, e.source_id.clone()))
            .collect();
        let snapshots = self
            .source_snapshots(tx, tenant, &sources, &HashMap::new())
            .await?;
        let mut ended = Vec::new();
        let mut going = Vec::new();
        for mut e in enrollments {
            match exit_reason(&e, seqs.get(&e.sequence_id), snapshots.get(&e.source_id)) {
                Some(reason) => {
                    e.exit(reason, now);
                    ended.push(e);
                }
                None => going.push(e),
            }
        }
        tx.update_enrollments(tenant, &ended).await?;
        self.record_dry_exits(&ended);
        Ok(going)
    }
}
