//! Running an export (decisions §25): a worker claims it under a lease (the claim rules of
//! imports, `crm-store-sql`'s `jobs`) and writes its file one chunk per transaction. Each step
//! reads the next page of the list after the export's `resume_after` position (keyset, in the
//! list's own order), renders it as the list renders it, and commits the chunk together with the
//! new position and `rows_done`, renewing the lease. A process killed mid-step leaves nothing of
//! that step; whoever claims the export next (after the lease) resumes at the last committed
//! position, so no record is written twice and none skipped. A CSV file's header is its
//! first chunk.

use crm_domain::{
    export::{Export, ExportFormat, ExportStatus},
    Tenant, Timestamp,
};

use crate::{
    error::AppError,
    export_filter::{ExportFilter, ExportPage},
    views::write_csv_rows,
    App,
};

/// Records per chunk by default: one read of the list, and one transaction of the worker. Fewer,
/// larger chunks cost fewer round trips to write and to serve (a chunk of 5,000 contacts is
/// about 1.2 MiB; docs/performance-history.md has the sizes measured).
pub const ROWS_PER_CHUNK: u32 = 5000;

/// How a worker runs exports: its lease, and how many records each chunk takes.
#[derive(Debug, Clone, Copy)]
pub struct ExportPace {
    pub lease_ms: i64,
    pub rows_per_chunk: u32,
}

/// An export this process holds: its tenant, and the token of its claim.
#[derive(Debug, Clone)]
pub struct ClaimedExport {
    pub tenant: Tenant,
    pub export: Export,
    pub token: String,
}

/// What one step of a claimed export did.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportStep {
    /// A chunk was written; the export as it stands now.
    Progress(Export),
    /// The export ended with this step.
    Finished(Export),
    /// The claim was lost (another worker took it after the lease ended).
    Lost,
}

impl App {
    /// Claims one export that is queued, or running under a lease that ended, for `lease_ms`.
    pub async fn claim_export(
        &self,
        token: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedExport>, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let claimed = tx
            .claim_export(now, Timestamp::from_millis(now.millis() + lease_ms), token)
            .await?;
        tx.commit().await?;
        Ok(claimed.map(|(tenant, export)| ClaimedExport {
            tenant,
            export,
            token: token.to_owned(),
        }))
    }

    /// Reads `limit` records of `filter` after the list position `after`, on a reader
    /// connection, so a slow read holds no writer lock.
    async fn read_export_page(
        &self,
        tenant: &Tenant,
        filter: &ExportFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<ExportPage, AppError> {
        let mut tx = self.store.begin_read().await?;
        self.export_page(&mut *tx, tenant, filter, after, limit)
            .await
    }

    /// Writes `records` as the export's next chunk, in one transaction with its new position
    /// and `rows_done`, renewing the lease; ends the export when `last_page`. The claim checked
    /// there says whether the export still is this worker's to write.
    async fn write_export_chunk(
        &self,
        claimed: &ClaimedExport,
        mut export: Export,
        records: &ExportPage,
        last_page: bool,
        pace: ExportPace,
    ) -> Result<ExportStep, AppError> {
        let (tenant, id) = (&claimed.tenant, &claimed.export.id);
        let mut chunk = Vec::new();
        if export.chunks_total == 0 && export.format == ExportFormat::Csv {
            write_csv_rows(&mut chunk, [&export.columns])?;
        }
        self.views
            .write_export_page(records, export.format, &export.columns, &mut chunk)?;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let lease = Timestamp::from_millis(now.millis() + pace.lease_ms);
        if !tx
            .renew_export_claim(tenant, id, &claimed.token, lease)
            .await?
        {
            return Ok(ExportStep::Lost);
        }
        if !chunk.is_empty() {
            tx.insert_export_chunk(tenant, id, export.chunks_total, &chunk)
                .await?;
            export.chunks_total += 1;
        }
        export.rows_done += records.len() as i64;
        if let Some(last) = records.last_position() {
            export.resume_after = Some(last);
        }
        export.status = ExportStatus::Running;
        if last_page {
            export.finish(ExportStatus::Completed, now);
        }
        tx.update_export(tenant, &export).await?;
        tx.commit().await?;
        Ok(if last_page {
            ExportStep::Finished(export)
        } else {
            ExportStep::Progress(export)
        })
    }

    /// Ends a claimed export as failed, saying why.
    async fn fail_export(
        &self,
        claimed: &ClaimedExport,
        mut export: Export,
        why: &str,
    ) -> Result<ExportStep, AppError> {
        let mut tx = self.store.begin_write().await?;
        let now = self.clock.now();
        if !tx
            .renew_export_claim(&claimed.tenant, &export.id, &claimed.token, now)
            .await?
        {
            return Ok(ExportStep::Lost);
        }
        export.error = Some(
            self.views
                .problem(AppError::Internal(format!("the export failed: {why}"))),
        );
        export.finish(ExportStatus::Failed, now);
        tx.update_export(&claimed.tenant, &export).await?;
        tx.commit().await?;
        Ok(ExportStep::Finished(export))
    }

    /// Runs a claimed export to its end (or until its claim is lost), calling `progress` after
    /// each chunk. The next page is read while the current one is rendered and written: its
    /// position is the current page's last record's, known before the write commits.
    pub async fn run_export(
        &self,
        claimed: &ClaimedExport,
        pace: ExportPace,
        progress: &mut (dyn FnMut(&Export) + Send),
    ) -> Result<Option<Export>, AppError> {
        let limit = pace.rows_per_chunk.max(1);
        let tenant = &claimed.tenant;
        let Some(mut export) = self
            .store
            .begin_read()
            .await?
            .get_export(tenant, claimed.export.id.as_str())
            .await?
        else {
            return Ok(None);
        };
        let Some(filter) = ExportFilter::from_json(export.object, &export.filter) else {
            return match self
                .fail_export(claimed, export, "its filters are unreadable")
                .await?
            {
                ExportStep::Finished(export) => {
                    progress(&export);
                    Ok(Some(export))
                }
                _ => Ok(None),
            };
        };
        let mut page = self
            .read_export_page(tenant, &filter, export.resume_after.clone(), limit)
            .await?;
        loop {
            let last_page = page.len() < limit as usize;
            let write = self.write_export_chunk(claimed, export, &page, last_page, pace);
            let (step, next) = if last_page {
                (write.await?, ExportPage::Contacts(Vec::new()))
            } else {
                let after = page.last_position();
                // The read is polled first, so its query is on its way before the chunk renders.
                let read = self.read_export_page(tenant, &filter, after, limit);
                let (next, step) = futures::future::join(read, write).await;
                (step?, next?)
            };
            match step {
                ExportStep::Progress(now) => {
                    progress(&now);
                    export = now;
                }
                ExportStep::Finished(now) => {
                    progress(&now);
                    return Ok(Some(now));
                }
                ExportStep::Lost => return Ok(None),
            }
            page = next;
        }
    }

    /// Deletes the exports whose files expired, with their files.
    pub async fn purge_exports(&self) -> Result<u64, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let gone = tx.purge_exports(now).await?;
        tx.commit().await?;
        Ok(gone)
    }
}
