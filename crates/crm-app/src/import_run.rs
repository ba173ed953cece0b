//! Running an import (decisions §20, §24): a worker claims it under a lease and writes it one
//! stored chunk per transaction. Each row is validated and written exactly as a single write
//! (`create_contact_in`, ...) inside a savepoint, so a bad row fails alone; the rows are
//! event-silent like batch, and each record written gets a history entry (`via: import`, the
//! creating request's actor, transport and request id). The chunk's progress, its row errors and
//! the drop of the chunk commit with its rows: a process killed mid-chunk leaves nothing of it,
//! and whoever claims the import next (after the lease) resumes at that chunk, so no row is
//! written twice and none is skipped. A dry run writes each chunk and rolls it back, keeping
//! only the progress and the errors, and ends `validated`.

use crm_domain::{
    history::Via,
    import::{Import, ImportCounts, ImportRow, ImportStatus, OnDuplicate},
    Email, ObjectKind, Period, Registry, Tenant, Timestamp, ValidationError,
};

use crate::{
    error::AppError,
    ports::{CompanyFilter, ImportError, Slice, Tx},
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
enum RowOutcome {
    Created,
    Updated,
    Skipped,
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
        if import.dry_run {
            tx.savepoint("import_dry_run").await?;
        }
        let mut fx = Effects::new(Emit::Silent, import.author.via(Via::Import));
        let mut counts = ImportCounts::default();
        let mut errors = Vec::new();
        let mut records = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(chunk.data.as_slice());
        let mut record = csv::StringRecord::new();
        let mut row = chunk.first_row;
        loop {
            match records.read_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(AppError::Internal(format!("stored chunk unreadable: {e}"))),
            }
            let cells: Vec<&str> = record.iter().collect();
            tx.savepoint("import_row").await?;
            let mark = fx.mark();
            match self
                .import_row(&mut *tx, tenant, &import, &registry, &cells, &mut fx)
                .await
            {
                Ok(outcome) => {
                    tx.release_savepoint("import_row").await?;
                    match outcome {
                        RowOutcome::Created => counts.created += 1,
                        RowOutcome::Updated => counts.updated += 1,
                        RowOutcome::Skipped => counts.skipped += 1,
                    }
                }
                Err(e @ (AppError::Internal(_) | AppError::Unavailable(_))) => return Err(e),
                Err(e) => {
                    fx.rollback_to(mark);
                    tx.rollback_to_savepoint("import_row").await?;
                    tx.release_savepoint("import_row").await?;
                    counts.failed += 1;
                    errors.push(ImportError {
                        row,
                        problem: self.views.problem(e),
                    });
                }
            }
            counts.rows_done += 1;
            row += 1;
        }
        if import.dry_run {
            tx.rollback_to_savepoint("import_dry_run").await?;
            tx.release_savepoint("import_dry_run").await?;
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

    /// One CSV record of `import`, in a savepoint of the chunk's transaction.
    async fn import_row(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        import: &Import,
        registry: &Registry,
        cells: &[&str],
        fx: &mut Effects,
    ) -> Result<RowOutcome, AppError> {
        let row = ImportRow::read(&import.targets, cells, registry)?;
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
async fn companies_with_domain(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    domain: &str,
) -> Result<Vec<crm_domain::Company>, AppError> {
    let filter = CompanyFilter {
        q: None,
        domain: Some(domain.to_owned()),
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
    match companies_with_domain(tx, tenant, domain).await?.as_slice() {
        [one] => Ok(one.id.to_string()),
        [] => Err(ValidationError::InvalidReference {
            field: "company.domain".into(),
            value: domain.to_owned(),
        }
        .into()),
        several => Err(AppError::Ambiguous {
            detail: format!("several active companies have the domain {domain}"),
            candidates: several.iter().map(|c| c.id.to_string()).collect(),
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
