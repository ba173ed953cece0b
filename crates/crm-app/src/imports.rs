//! Bulk imports (decisions §20, §23, §24): receiving a CSV file, reading imports and their
//! errors, cancelling one. The rows are written by a worker ([`crate::import_run`]).
//!
//! The file arrives as a stream and is never held whole: [`ImportUpload`] splits it into CSV
//! records as it comes (csv-core, which keeps quoted fields, embedded newlines and CRLF whole)
//! and stores them in chunks of whole records, each in a short transaction of its own, so a slow
//! upload holds no lock. The header comes first and is checked against the object's fields
//! before anything is written. The import is invisible (`receiving`) until its file is complete;
//! an upload cut off is deleted, or swept later when its process died with it.

use std::collections::BTreeMap;

use crm_domain::{
    history::{Author, Via},
    import::{resolve_targets, Import, ImportStatus, OnDuplicate},
    ImportId, ObjectKind, Tenant, ValidationError,
};
use csv_core::{ReadRecordResult, Reader};
use sha2::{Digest, Sha256};

use crate::{
    auth::{Caller, Scope},
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{ImportChunk, ImportError, StoreError},
    App,
};

/// The largest file an import takes (decisions §24); larger is 413.
pub const MAX_IMPORT_BYTES: u64 = 256 * 1024 * 1024;
/// Records per stored chunk, which is also the worker's transaction.
pub const ROWS_PER_CHUNK: i64 = 500;
/// A chunk is stored sooner when its records reach this size.
const CHUNK_BYTES: usize = 1 << 20;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a `POST /imports` asks for.
#[derive(Debug, Clone)]
pub struct ImportSettings {
    pub object: ObjectKind,
    pub on_duplicate: OnDuplicate,
    pub dry_run: bool,
    /// CSV column → target field.
    pub mapping: BTreeMap<String, String>,
    pub idempotency_key: Option<String>,
    /// The request's method, path and sorted query, which the file's hash completes into the
    /// idempotency fingerprint (decisions §24).
    pub request_fingerprint: String,
}

/// How an upload ended.
#[derive(Debug)]
pub enum Received {
    /// A new import, queued.
    New(Import),
    /// The `Idempotency-Key` names an import of the same request: that one.
    Replayed(Import),
}

/// The scope an import of `object` needs besides `imports:write`.
pub fn object_scope(object: ObjectKind) -> Scope {
    Scope::write(match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    })
}

/// A file being received: feed it [`ImportUpload::push`] as the bytes come, then
/// [`ImportUpload::finish`]; on a failure of the transport, [`ImportUpload::abort`].
pub struct ImportUpload {
    app: App,
    tenant: Tenant,
    author: Author,
    settings: ImportSettings,
    reader: Reader,
    /// The file's first bytes, until it is known whether they are a BOM.
    head: Vec<u8>,
    started: bool,
    /// Fields of the record being read, and where each ends.
    out: Vec<u8>,
    out_len: usize,
    ends: Vec<usize>,
    ends_len: usize,
    /// The raw bytes of the chunk being gathered: whole records, then the one being read.
    raw: Vec<u8>,
    /// Where the record being read starts in `raw`.
    record_start: usize,
    /// The CSV record number of the record being read (the header is 1).
    row: i64,
    chunk_first_row: i64,
    chunk_rows: i64,
    import: Option<Import>,
    hasher: Sha256,
    bytes: u64,
    /// The file stopped being readable at a record: what follows is ignored.
    stopped: bool,
}

impl App {
    /// Starts receiving an import's file for `caller`. Nothing is written until the header is
    /// read and checked.
    pub fn start_import(
        &self,
        caller: &Caller,
        settings: ImportSettings,
    ) -> Result<ImportUpload, AppError> {
        caller.require(object_scope(settings.object))?;
        self.start_upload(caller.tenant.clone(), caller.author(Via::Import), settings)
    }

    /// `crm-server import`: an operator's import into the workspace `workspace` (404 when there
    /// is none), written by the system through the CLI.
    pub async fn start_operator_import(
        &self,
        workspace: &str,
        mode: crm_domain::Mode,
        settings: ImportSettings,
    ) -> Result<ImportUpload, AppError> {
        let id = crm_domain::WorkspaceId::parse(workspace)
            .map_err(|_| AppError::not_found("workspace", workspace))?;
        let mut tx = self.store.begin_read().await?;
        if tx.get_workspace(&id).await?.is_none() {
            return Err(AppError::not_found("workspace", workspace));
        }
        let author = Author {
            actor: crm_domain::history::Actor::system(),
            channel: crm_domain::history::Channel::Cli,
            via: Via::Import,
            request_id: None,
        };
        let tenant = Tenant {
            workspace_id: id,
            mode,
        };
        self.start_upload(tenant, author, settings)
    }

    fn start_upload(
        &self,
        tenant: Tenant,
        author: Author,
        settings: ImportSettings,
    ) -> Result<ImportUpload, AppError> {
        if !crm_domain::import::IMPORT_OBJECTS.contains(&settings.object) {
            return Err(ValidationError::UnknownValue {
                field: "object".into(),
                value: settings.object.as_str().into(),
                valid_options: crm_domain::import::IMPORT_OBJECTS
                    .iter()
                    .map(|o| o.as_str().to_owned())
                    .collect(),
            }
            .into());
        }
        Ok(ImportUpload {
            app: self.clone(),
            tenant,
            author,
            settings,
            reader: Reader::new(),
            head: Vec::new(),
            started: false,
            out: vec![0; 4096],
            out_len: 0,
            ends: vec![0; 64],
            ends_len: 0,
            raw: Vec::new(),
            record_start: 0,
            row: 1,
            chunk_first_row: 2,
            chunk_rows: 0,
            import: None,
            hasher: Sha256::new(),
            bytes: 0,
            stopped: false,
        })
    }

    /// The import `id` of the caller's workspace and mode.
    pub async fn get_import(&self, caller: &Caller, id: &str) -> Result<Import, AppError> {
        let mut tx = self.store.begin_read().await?;
        visible(tx.get_import(&caller.tenant, id).await?, id)
    }

    /// The caller's imports, newest first.
    pub async fn list_imports(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Import>, AppError> {
        let slice = slice_for(&page, &caller.tenant, "imports", "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_imports(&caller.tenant, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, "imports", "", |i| {
            i.id.to_string()
        }))
    }

    /// The row errors of the import `id`, in row order.
    pub async fn list_import_errors(
        &self,
        caller: &Caller,
        id: &str,
        page: PageParams,
    ) -> Result<Page<ImportError>, AppError> {
        let slice = slice_for(&page, &caller.tenant, "import_errors", id)?;
        let after = match slice.before.as_deref() {
            None => None,
            Some(row) => Some(row.parse::<i64>().map_err(|_| AppError::InvalidCursor)?),
        };
        let mut tx = self.store.begin_read().await?;
        let import = visible(tx.get_import(&caller.tenant, id).await?, id)?;
        let rows = tx
            .list_import_errors(&caller.tenant, &import.id, after, slice.limit)
            .await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            "import_errors",
            id,
            |e| e.row.to_string(),
        ))
    }

    /// Cancels the import `id`: it stops after the chunk being written (rows written stay) and
    /// its file is dropped. A finished import answers 409 `conflict`.
    pub async fn cancel_import(&self, caller: &Caller, id: &str) -> Result<Import, AppError> {
        let mut tx = self.store.begin_write().await?;
        let import = visible(tx.get_import(&caller.tenant, id).await?, id)?;
        caller.require(object_scope(import.object))?;
        // Only the status changes: a chunk committing meanwhile keeps its counts.
        let cancelled = tx
            .cancel_import(&caller.tenant, &import.id, self.clock.now())
            .await?;
        let import = visible(tx.get_import(&caller.tenant, id).await?, id)?;
        if !cancelled {
            return Err(AppError::Conflict {
                detail: format!("the import has already ended ({})", import.status.as_str()),
                existing: None,
            });
        }
        tx.delete_import_chunks(&caller.tenant, &import.id, None)
            .await?;
        tx.commit().await?;
        Ok(import)
    }
}

/// An import a client may see: any but one still receiving its file.
fn visible(import: Option<Import>, id: &str) -> Result<Import, AppError> {
    import
        .filter(|i| i.status != ImportStatus::Receiving)
        .ok_or_else(|| AppError::not_found("import", id))
}

impl ImportUpload {
    /// Takes the next bytes of the file.
    pub async fn push(&mut self, bytes: &[u8]) -> Result<(), AppError> {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
        if self.stopped {
            return Ok(());
        }
        if !self.started {
            self.head.extend_from_slice(bytes);
            if self.head.len() < BOM.len() && BOM.starts_with(&self.head) {
                return Ok(());
            }
            self.started = true;
            let head = std::mem::take(&mut self.head);
            let body = head.strip_prefix(BOM).unwrap_or(&head);
            return self.feed(body, false).await;
        }
        self.feed(bytes, false).await
    }

    /// Ends the file: stores what is left, and queues the import.
    pub async fn finish(mut self) -> Result<Received, AppError> {
        if !self.started {
            self.started = true;
            let head = std::mem::take(&mut self.head);
            let body = head.strip_prefix(BOM).unwrap_or(&head).to_vec();
            if let Err(e) = self.feed(&body, false).await {
                self.abort().await;
                return Err(e);
            }
        }
        match self.complete().await {
            Ok(received) => Ok(received),
            Err(e) => {
                self.abort().await;
                Err(e)
            }
        }
    }

    async fn complete(&mut self) -> Result<Received, AppError> {
        if !self.stopped {
            self.feed(&[], true).await?;
        }
        if self.import.is_none() {
            return Err(ValidationError::invalid("csv", "the file has no header row").into());
        }
        self.store_chunk().await?;
        let fingerprint = format!(
            "{}|{}",
            self.settings.request_fingerprint,
            hex::encode(self.hasher.clone().finalize())
        );
        let tenant = self.tenant.clone();
        let import = self.import.as_mut().expect("checked above");
        import.status = ImportStatus::Queued;
        import.counts.rows_total = self.row - 2;
        import.fingerprint = Some(fingerprint);
        import.idempotency_key = self.settings.idempotency_key.clone();
        let mut tx = self.app.store.begin_write().await?;
        match tx.update_import(&tenant, import).await {
            Err(StoreError::Duplicate) => {
                let key = import.idempotency_key.clone().unwrap_or_default();
                let fingerprint = import.fingerprint.clone();
                let held = tx.get_import_by_key(&tenant, &key).await?;
                drop(tx);
                self.abort().await;
                return match held {
                    Some(held) if held.fingerprint == fingerprint => Ok(Received::Replayed(held)),
                    _ => Err(AppError::IdempotencyKeyReused),
                };
            }
            other => other?,
        }
        tx.commit().await?;
        let import = self.import.take().expect("checked above");
        Ok(Received::New(import))
    }

    /// Deletes what was stored of an upload that will not finish.
    pub async fn abort(&mut self) {
        let Some(import) = self.import.take() else {
            return;
        };
        let gone = async {
            let mut tx = self.app.store.begin_write().await?;
            tx.delete_import(&self.tenant, &import.id).await?;
            tx.commit().await
        };
        if let Err(e) = gone.await {
            tracing::warn!(import = %import.id, error = %e, "an unfinished upload stays until the sweep");
        }
    }

    /// How many bytes came so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Splits `input` into records; `end`: the file ends after it.
    async fn feed(&mut self, mut input: &[u8], end: bool) -> Result<(), AppError> {
        loop {
            let (result, nin, nout, nend) = self.reader.read_record(
                input,
                &mut self.out[self.out_len..],
                &mut self.ends[self.ends_len..],
            );
            self.raw.extend_from_slice(&input[..nin]);
            input = &input[nin..];
            self.out_len += nout;
            self.ends_len += nend;
            match result {
                ReadRecordResult::InputEmpty => {
                    if !end {
                        return Ok(());
                    }
                }
                ReadRecordResult::OutputFull => {
                    let len = self.out.len();
                    self.out.resize(len * 2, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let len = self.ends.len();
                    self.ends.resize(len * 2, 0);
                }
                ReadRecordResult::Record => {
                    self.record(end).await?;
                    if self.stopped {
                        return Ok(());
                    }
                }
                ReadRecordResult::End => return Ok(()),
            }
        }
    }

    /// One whole record was read (`at_end`: ended by the end of the file, not a line break).
    async fn record(&mut self, at_end: bool) -> Result<(), AppError> {
        let fields = &self.out[..self.out_len];
        let valid = std::str::from_utf8(fields).is_ok();
        let raw = &self.raw[self.record_start..];
        // An unclosed quote runs to the end of the file: the last record then holds an odd
        // number of quote characters.
        let unclosed = at_end && raw.iter().filter(|b| **b == b'"').count() % 2 == 1;
        let (out_len, ends_len) = (self.out_len, self.ends_len);
        self.out_len = 0;
        self.ends_len = 0;
        if self.import.is_none() {
            if !valid {
                return Err(
                    ValidationError::invalid("csv", "the header row is not valid UTF-8").into(),
                );
            }
            let text = std::str::from_utf8(&self.out[..out_len]).expect("checked");
            let mut header = Vec::with_capacity(ends_len);
            let mut start = 0;
            for &end in &self.ends[..ends_len] {
                header.push(text[start..end].trim().to_owned());
                start = end;
            }
            self.begin(header).await?;
            self.raw.clear();
            self.record_start = 0;
            self.row = 2;
            self.chunk_first_row = 2;
            return Ok(());
        }
        if !valid || unclosed {
            let reason = if valid {
                "an unclosed quote runs to the end of the file"
            } else {
                "the record is not valid UTF-8"
            };
            self.raw.truncate(self.record_start);
            if let Some(import) = self.import.as_mut() {
                import.malformed = Some((self.row, reason.to_owned()));
            }
            self.stopped = true;
            return Ok(());
        }
        // A line with nothing on it is no record.
        if ends_len == 1 && out_len == 0 && raw.iter().all(|b| matches!(b, b'\r' | b'\n')) {
            self.raw.truncate(self.record_start);
            return Ok(());
        }
        self.row += 1;
        self.chunk_rows += 1;
        self.record_start = self.raw.len();
        if self.chunk_rows >= ROWS_PER_CHUNK || self.raw.len() >= CHUNK_BYTES {
            self.store_chunk().await?;
        }
        Ok(())
    }

    /// The header is read: checks its targets, then writes the import (still receiving).
    async fn begin(&mut self, header: Vec<String>) -> Result<(), AppError> {
        let object = self.settings.object;
        let registry = {
            let mut tx = self.app.store.begin_read().await?;
            self.app.registry(&mut *tx, &self.tenant, object).await?
        };
        let targets = resolve_targets(object, &header, &self.settings.mapping, &registry)?;
        let import = Import::new(
            ImportId::from_uuid(self.app.ids.new_uuid()),
            object,
            self.settings.on_duplicate,
            self.settings.dry_run,
            targets,
            self.author.clone(),
            self.app.clock.now(),
        );
        let mut tx = self.app.store.begin_write().await?;
        tx.insert_import(&self.tenant, &import).await?;
        tx.commit().await?;
        self.import = Some(import);
        Ok(())
    }

    /// Stores the whole records gathered so far as the next chunk.
    async fn store_chunk(&mut self) -> Result<(), AppError> {
        if self.chunk_rows == 0 {
            return Ok(());
        }
        let Some(import) = self.import.as_mut() else {
            return Ok(());
        };
        let rest = self.raw.split_off(self.record_start);
        let chunk = ImportChunk {
            seq: import.chunks_total,
            first_row: self.chunk_first_row,
            row_count: self.chunk_rows,
            data: std::mem::replace(&mut self.raw, rest),
        };
        let mut tx = self.app.store.begin_write().await?;
        tx.insert_import_chunk(&self.tenant, &import.id, &chunk)
            .await?;
        import.chunks_total += 1;
        import.counts.rows_total += chunk.row_count;
        tx.update_import(&self.tenant, import).await?;
        tx.commit().await?;
        self.record_start = 0;
        self.chunk_first_row += self.chunk_rows;
        self.chunk_rows = 0;
        Ok(())
    }
}
