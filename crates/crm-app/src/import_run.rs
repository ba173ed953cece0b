//! Running an import (decisions §20, §24): a worker claims it under a lease and writes it one
//! stored chunk per transaction. Each row is validated and written as a single write would
//! validate and write it, and a bad row fails alone: contact chunks in bulk
//! ([`crate::import_bulk`]: one read of the chunk's duplicates, one multi-row INSERT and one
//! multi-row UPDATE), other chunks one row at a time through the single-record path
//! (`create_company_in`, ...) each inside a savepoint. The rows are event-silent like batch, and
//! each record written gets a history entry (`via: import`, the creating request's actor,
//! transport and request id). The chunk's progress, its row errors and the drop of the chunk
//! commit with its rows: a process killed mid-chunk leaves nothing of it, and whoever claims the
//! import next (after the lease) resumes at that chunk, so no row is written twice and none is
//! skipped. A dry run decides each chunk and rolls its writes back, keeping only the progress,
//! the errors and the dedupe keys of the records it would have created (so a later chunk's
//! duplicate of them is found), and ends `validated`.

use std::collections::HashSet;

use crm_domain::{
    history::Via,
    import::{Import, ImportCounts, ImportRow, ImportStatus, OnDuplicate},
    Email, ObjectKind, Period, Registry, Tenant, Timestamp, ValidationError,
};

use crate::{
    error::AppError,
    ports::{CompanyFilter, ImportChunk, ImportError, Slice, Tx},
    write::{Effects, Emit},
    App,
};

/// An import this process holds: its tenant, and the token of its claim.
#[derive(Debug, Clone)]
pub struct ClaimedImport {
    pub tenant: Tenant,
    pub import: Import,
    pub token: String,
}

/// What one step of a claimed import did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A chunk was written; the import as it stands now (more to do while `running`).
    Progress(Import),
    /// The import ended (completed, validated or failed) with this step.
    Finished(Import),
    /// The claim was lost: cancelled, or taken by another worker after the lease ended.
    Lost,
}

/// How long an import's errors are kept after it ends (decisions §24).
pub const ERRORS_KEPT_MS: i64 = 30 * 24 * 3_600_000;
/// How long an upload may go on before the sweep takes it for one cut off.
pub const RECEIVING_KEPT_MS: i64 = 24 * 3_600_000;
/// The usage an import counts: one request per this many rows written (decisions §24).
const ROWS_PER_REQUEST: i64 = 100;

/// What one row did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowOutcome {
    Created,
    Updated,
    Skipped,
}

/// One CSV record of a chunk: its number in the file, and the record read against the
/// import's targets.
pub(crate) struct ParsedRow {
    pub row: i64,
    pub read: Result<ImportRow, ValidationError>,
}

/// One stored chunk being written: its rows, and what they did so far.
pub(crate) struct ChunkRows {
    pub import: Import,
    pub rows: Vec<ParsedRow>,
    pub counts: ImportCounts,
    pub errors: Vec<ImportError>,
    /// The history and changed records of the rows written.
    pub fx: Effects,
    /// The dedupe keys of the records the rows created (a dry run keeps them for later chunks).
    pub created_keys: Vec<String>,
}

impl ChunkRows {
    /// Reads the records of `chunk` against the targets of `import`.
    fn read(
        import: &Import,
        chunk: &ImportChunk,
        registry: &Registry,
    ) -> Result<ChunkRows, AppError> {
        let mut records = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(chunk.data.as_slice());
        let mut record = csv::StringRecord::new();
        let mut rows = Vec::with_capacity(chunk.row_count.max(0) as usize);
        let mut row = chunk.first_row;
        loop {
            match records.read_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(AppError::Internal(format!("stored chunk unreadable: {e}"))),
            }
            let cells: Vec<&str> = record.iter().collect();
            let read = ImportRow::read(&import.targets, &cells, registry);
            rows.push(ParsedRow { row, read });
            row += 1;
        }
        Ok(ChunkRows {
            import: import.clone(),
            rows,
            counts: ImportCounts::default(),
            errors: Vec::new(),
            fx: Effects::new(Emit::Silent, import.author.via(Via::Import)),
            created_keys: Vec::new(),
        })
    }

    /// The key `row` deduplicates on: a contact's normalised email, a company's domain.
    pub(crate) fn key_of(&self, row: &ParsedRow) -> Option<String> {
        let read = row.read.as_ref().ok()?;
        match self.import.object {
            ObjectKind::Contact => read.email_key().map(|e| e.as_str().to_owned()),
            ObjectKind::Company => read.domain_key(),
            _ => None,
        }
    }

    /// The effects of one row: event-silent, by the import's author.
    pub(crate) fn row_effects(&self) -> Effects {
        Effects::new(Emit::Silent, self.import.author.via(Via::Import))
    }
}

impl App {
    /// Claims one import that is queued, or running under a lease that ended, for `lease_ms`.
    pub async fn claim_import(
        &self,
        token: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedImport>, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let claimed = tx
            .claim_import(now, Timestamp::from_millis(now.millis() + lease_ms), token)
            .await?;
        tx.commit().await?;
        Ok(claimed.map(|(tenant, import)| ClaimedImport {
            tenant,
            import,
            token: token.to_owned(),
        }))
    }

    /// Claims the import `id` of `tenant` (one `crm-server import` just queued) when no worker
    /// holds it.
    pub async fn claim_import_by_id(
        &self,
        tenant: &Tenant,
        id: &crm_domain::ImportId,
        token: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedImport>, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let lease = Timestamp::from_millis(now.millis() + lease_ms);
        let claimed = tx.claim_import_by_id(tenant, id, now, lease, token).await?;
        tx.commit().await?;
        Ok(claimed.map(|import| ClaimedImport {
            tenant: tenant.clone(),
            import,
            token: token.to_owned(),
        }))
    }

    /// The import `id` of `tenant` as it stands (an operator's view, without a caller).
    pub async fn import_status(
        &self,
        tenant: &Tenant,
        id: &crm_domain::ImportId,
    ) -> Result<Option<Import>, AppError> {
        let mut tx = self.store.begin_read().await?;
        Ok(tx.get_import(tenant, id.as_str()).await?)
    }

    /// Writes the next chunk of a claimed import in one transaction, renewing the lease; or,
    /// when every chunk is written, ends the import.
    pub async fn run_import_step(
        &self,
        claimed: &ClaimedImport,
        lease_ms: i64,
    ) -> Result<Step, AppError> {
        let tenant = &claimed.tenant;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let id = &claimed.import.id;
        let lease = Timestamp::from_millis(now.millis() + lease_ms);
        if !tx
            .renew_import_claim(tenant, id, &claimed.token, lease)
            .await?
        {
            return Ok(Step::Lost);
        }
        let Some(mut import) = tx.get_import(tenant, id.as_str()).await? else {
            return Ok(Step::Lost);
        };
        if import.chunks_done >= import.chunks_total {
            import.status = match (&import.malformed, import.dry_run) {
                (Some((row, reason)), _) => {
                    import.error = Some(self.views.problem(
                        ValidationError::invalid("csv", format!("row {row}: {reason}")).into(),
                    ));
                    ImportStatus::Failed
                }
                (None, true) => ImportStatus::Validated,
                (None, false) => ImportStatus::Completed,
            };
            import.finished_at = Some(now);
            self.meter_import(&mut *tx, tenant, &import, 0, now).await?;
            tx.update_import(tenant, &import).await?;
            tx.delete_import_chunks(tenant, id, None).await?;
            tx.commit().await?;
            return Ok(Step::Finished(import));
        }
        let seq = import.chunks_done;
        let chunk = tx
            .get_import_chunk(tenant, id, seq)
            .await?
            .ok_or_else(|| AppError::Internal(format!("import {id} lost its chunk {seq}")))?;
        let registry = self.registry(&mut *tx, tenant, import.object).await?;
        let mut rows = ChunkRows::read(&import, &chunk, &registry)?;
        let seen: HashSet<String> = if import.dry_run {
            let keys: Vec<String> = rows.rows.iter().filter_map(|r| rows.key_of(r)).collect();
            tx.import_keys_among(tenant, id, &keys)
                .await?
                .into_iter()
                .collect()
        } else {
            HashSet::new()
        };
        if import.dry_run {
            tx.savepoint("import_dry_run").await?;
        }
        if import.object == ObjectKind::Contact && !crate::unique_fields::has_unique(&registry) {
            self.write_contact_chunk(&mut *tx, tenant, &mut rows, &registry, &seen)
                .await?;
        } else {
            for index in 0..rows.rows.len() {
                self.write_row_alone(&mut *tx, tenant, &mut rows, index, &seen)
                    .await?;
            }
        }
        let ChunkRows {
            counts,
            errors,
            fx,
            created_keys,
            ..
        } = rows;
        if import.dry_run {
            tx.rollback_to_savepoint("import_dry_run").await?;
            tx.release_savepoint("import_dry_run").await?;
            tx.insert_import_keys(tenant, id, &created_keys).await?;
        } else {
            self.finish_write(&mut *tx, tenant, fx).await?;
        }
        tx.insert_import_errors(tenant, id, &errors).await?;
        let written_before = import.counts.created + import.counts.updated;
        import.counts.add(&counts);
        import.chunks_done += 1;
        self.meter_import(&mut *tx, tenant, &import, written_before, now)
            .await?;
        tx.update_import(tenant, &import).await?;
        tx.delete_import_chunks(tenant, id, Some(seq)).await?;
        tx.commit().await?;
        Ok(Step::Progress(import))
    }

    /// Runs a claimed import to its end (or until its claim is lost), calling `progress` after
    /// each step. The worker loop and `crm-server import` both run imports through here.
    pub async fn run_import(
        &self,
        claimed: &ClaimedImport,
        lease_ms: i64,
        progress: &mut (dyn FnMut(&Import) + Send),
    ) -> Result<Option<Import>, AppError> {
        loop {
            match self.run_import_step(claimed, lease_ms).await? {
                Step::Progress(import) => progress(&import),
                Step::Finished(import) => {
                    progress(&import);
                    return Ok(Some(import));
                }
                Step::Lost => return Ok(None),
            }
        }
    }

    /// Deletes the errors of imports that ended 30 days ago, and uploads cut off a day ago.
    pub async fn purge_imports(&self) -> Result<u64, AppError> {
        let now = self.clock.now().millis();
        let mut tx = self.store.begin_write().await?;
        let gone = tx
            .purge_imports(
                Timestamp::from_millis(now - ERRORS_KEPT_MS),
                Timestamp::from_millis(now - RECEIVING_KEPT_MS),
            )
            .await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Counts the import's usage: one request per 100 rows written, the last hundred begun
    /// counting when the import ends. A dry run counts nothing more than its request.
    async fn meter_import(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        import: &Import,
        written_before: i64,
        now: Timestamp,
    ) -> Result<(), AppError> {
        if import.dry_run {
            return Ok(());
        }
        let written = import.counts.created + import.counts.updated;
        let requests = if import.status.is_finished() {
            i64::from(written % ROWS_PER_REQUEST != 0)
        } else {
            written / ROWS_PER_REQUEST - written_before / ROWS_PER_REQUEST
        };
        if requests > 0 {
            let period = Period::containing(now);
            tx.record_usage(tenant, period.start, requests as u64, "imports", 0, now)
                .await?;
        }
        Ok(())
    }

    /// Writes the row `index` of `chunk` through the single-record path, in a savepoint of
    /// the chunk's transaction, so that a bad row fails alone. In a dry run, a row whose key an
    /// earlier chunk would have created (`seen`) is a duplicate as that chunk's record would be.
    pub(crate) async fn write_row_alone(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        chunk: &mut ChunkRows,
        index: usize,
        seen: &HashSet<String>,
    ) -> Result<(), AppError> {
        let row = match &chunk.rows[index].read {
            Ok(row) => row.clone(),
            Err(e) => return self.settle(chunk, index, Err(e.clone().into())),
        };
        let key = chunk.key_of(&chunk.rows[index]);
        let earlier = key.as_ref().is_some_and(|k| seen.contains(k));
        let mut fx = chunk.row_effects();
        tx.savepoint("import_row").await?;
        let outcome = match (earlier, chunk.import.on_duplicate) {
            (true, OnDuplicate::Skip) => Ok(RowOutcome::Skipped),
            (true, OnDuplicate::Error) => Err(AppError::Conflict {
                detail: "an earlier row of this file has this key".into(),
                existing: None,
            }),
            // Nothing is stored for the earlier row: the row would update it if it would
            // create a record.
            (true, OnDuplicate::Update) => self
                .import_row(tx, tenant, &chunk.import, &row, &mut fx)
                .await
                .map(|_| RowOutcome::Updated),
            (false, _) => {
                self.import_row(tx, tenant, &chunk.import, &row, &mut fx)
                    .await
            }
        };
        match &outcome {
            Ok(o) => {
                tx.release_savepoint("import_row").await?;
                chunk.fx.absorb_changes(fx);
                if let (RowOutcome::Created, Some(key)) = (o, key) {
                    chunk.created_keys.push(key);
                }
            }
            Err(AppError::Internal(_) | AppError::Unavailable(_)) => {}
            Err(_) => {
                tx.rollback_to_savepoint("import_row").await?;
                tx.release_savepoint("import_row").await?;
            }
        }
        self.settle(chunk, index, outcome)
    }

    /// Counts the row `index` of `chunk` as `outcome` says; a row that failed gets its problem
    /// document, except for a failure of the store, which ends the chunk.
    pub(crate) fn settle(
        &self,
        chunk: &mut ChunkRows,
        index: usize,
        outcome: Result<RowOutcome, AppError>,
    ) -> Result<(), AppError> {
        match outcome {
            Ok(RowOutcome::Created) => chunk.counts.created += 1,
            Ok(RowOutcome::Updated) => chunk.counts.updated += 1,
            Ok(RowOutcome::Skipped) => chunk.counts.skipped += 1,
            Err(e @ (AppError::Internal(_) | AppError::Unavailable(_))) => return Err(e),
            Err(e) => {
                chunk.counts.failed += 1;
                chunk.errors.push(ImportError {
                    row: chunk.rows[index].row,
                    problem: self.views.problem(e),
                });
            }
        }
        chunk.counts.rows_done += 1;
        Ok(())
    }

    /// One CSV record of `import`, read against its targets.
    async fn import_row(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        import: &Import,
        row: &ImportRow,
        fx: &mut Effects,
    ) -> Result<RowOutcome, AppError> {
        let company_id = match &row.company_domain {
            Some(domain) => Some(company_by_domain(tx, tenant, domain).await?),
            None => None,
        };
        match import.object {
            ObjectKind::Contact => {
                let mut draft = row.contact_draft();
                let mut patch = row.contact_patch();
                if let Some(id) = company_id {
                    draft.company_id = Some(id.clone());
                    patch.company_id = crm_domain::Patch::Value(id);
                }
                let existing = match (row.email_key(), import.on_duplicate) {
                    (Some(email), OnDuplicate::Skip | OnDuplicate::Update) => {
                        tx.get_contact_by_email(tenant, &email).await?
                    }
                    _ => None,
                };
                match (existing, import.on_duplicate) {
                    (Some(_), OnDuplicate::Skip) => Ok(RowOutcome::Skipped),
                    (Some(_), OnDuplicate::Update) => {
                        self.upsert_contact_in(tx, tenant, draft, patch, None, fx)
                            .await?;
                        Ok(RowOutcome::Updated)
                    }
                    _ => {
                        self.create_contact_in(tx, tenant, draft, fx).await?;
                        Ok(RowOutcome::Created)
                    }
                }
            }
            ObjectKind::Company => {
                let author = fx.author().clone();
                let existing = match row.domain_key() {
                    Some(domain) => {
                        tx.lock_key(tenant, &format!("company.domain:{domain}"))
                            .await?;
                        companies_with_domain(tx, tenant, &domain).await?
                    }
                    None => Vec::new(),
                };
                let Some(existing) = existing.first() else {
                    self.create_company_in(tx, tenant, author, row.company_draft())
                        .await?;
                    return Ok(RowOutcome::Created);
                };
                match import.on_duplicate {
                    OnDuplicate::Skip => Ok(RowOutcome::Skipped),
                    OnDuplicate::Error => Err(AppError::Conflict {
                        detail: "a company with this domain already exists".into(),
                        existing: Some(self.views.company(existing)),
                    }),
                    OnDuplicate::Update => {
                        let id = existing.id.as_str().to_owned();
                        self.update_company_in(tx, tenant, author, &id, row.company_patch(), None)
                            .await?;
                        Ok(RowOutcome::Updated)
                    }
                }
            }
            ObjectKind::Deal => {
                let (mut draft, pipeline) = row.deal_draft()?;
                if let Some(id) = company_id {
                    draft.company_id = Some(id);
                }
                if let Some(email) = &row.contact_email {
                    draft.primary_contact_id = Some(contact_by_email(tx, tenant, email).await?);
                }
                self.create_deal_in(tx, tenant, draft, pipeline.as_deref(), fx)
                    .await?;
                Ok(RowOutcome::Created)
            }
            ObjectKind::Activity => Err(AppError::Internal("activities are not imported".into())),
        }
    }
}

/// The active companies holding the normalised `domain`.
pub(crate) async fn companies_with_domain(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    domain: &str,
) -> Result<Vec<crm_domain::Company>, AppError> {
    let filter = CompanyFilter {
        q: None,
        domain: Some(domain.to_owned()),
        owner_id: None,
        include_deleted: false,
    };
    let page = Slice {
        before: None,
        limit: 2,
    };
    Ok(tx.list_companies(tenant, &filter, &page).await?)
}

/// The id of the one active company with `domain` (`company.domain` columns).
async fn company_by_domain(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    domain: &str,
) -> Result<String, AppError> {
    let ids: Vec<String> = companies_with_domain(tx, tenant, domain)
        .await?
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    one_company(domain, &ids)
}

/// The one of `ids` (the active companies with `domain`), or why there is not one.
pub(crate) fn one_company(domain: &str, ids: &[String]) -> Result<String, AppError> {
    match ids {
        [one] => Ok(one.clone()),
        [] => Err(ValidationError::InvalidReference {
            field: "company.domain".into(),
            value: domain.to_owned(),
        }
        .into()),
        several => Err(AppError::Ambiguous {
            detail: format!("several active companies have the domain {domain}"),
            candidates: several.to_vec(),
        }),
    }
}

/// The id of the active contact with `email` (`primary_contact.email` columns).
async fn contact_by_email(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    email: &Email,
) -> Result<String, AppError> {
    match tx.get_contact_by_email(tenant, email).await? {
        Some(c) if c.deleted_at.is_none() => Ok(c.id.to_string()),
        _ => Err(ValidationError::InvalidReference {
            field: "primary_contact.email".into(),
            value: email.as_str().to_owned(),
        }
        .into()),
    }
}
