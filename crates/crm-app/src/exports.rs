//! Exports (decisions §25): `POST /exports` queues a list of one object, filtered as its list
//! endpoint filters it, to be written out as CSV or JSON lines by a worker
//! ([`crate::export_run`]); the file is read back chunk by chunk ([`App::export_chunk`]), never
//! whole, and is gone a day after the export ends. `GET /contacts/{id}/export` answers at once
//! with everything held about one contact (a subject access request). Each is an audited action.

use crm_domain::{
    audit::changes,
    export::{csv_columns, Export, ExportFormat, ExportStatus, EXPORT_OBJECTS},
    history::{Change, Via},
    mail::EmailMessage,
    sequence::Enrollment,
    Activity, Contact, ContactId, Deal, ExportId, ObjectKind, ValidationError,
};
use serde_json::json;

use crate::{
    audit::Audited,
    auth::{Caller, Scope},
    error::AppError,
    export_filter::ExportQuery,
    ports::{ActivityFilter, DealFilter, EmailFilter, Slice},
    App,
};

/// What a `POST /exports` asks for.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    pub format: ExportFormat,
    pub query: ExportQuery,
    /// The members of the object's list body, in order: the CSV columns, `custom_fields`
    /// standing for one column per registered key (crm-api's to know).
    pub fields: Vec<String>,
}

/// The scope reading `object` needs, which its export needs too.
pub fn read_scope(object: ObjectKind) -> Scope {
    Scope::read(match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    })
}

/// A completed export's file, to be read chunk by chunk.
#[derive(Debug, Clone)]
pub struct ExportFile {
    pub tenant: crm_domain::Tenant,
    pub export: Export,
    /// The chunks to read, `0..chunks`.
    pub chunks: i64,
}

/// Everything held about one contact (decisions §25), each list in its own list's order.
#[derive(Debug, Clone)]
pub struct ContactDossier {
    pub contact: Contact,
    pub activities: Vec<Activity>,
    pub emails: Vec<EmailMessage>,
    pub history: Vec<Change>,
    pub enrollments: Vec<Enrollment>,
    pub deals: Vec<Deal>,
}

/// How many rows one read of a dossier's lists takes.
const DOSSIER_PAGE: u32 = 500;

impl App {
    /// Queues an export for `caller` (the object's `:read` scope), audited as `export.created`.
    pub async fn create_export(
        &self,
        caller: &Caller,
        request: ExportRequest,
    ) -> Result<Export, AppError> {
        let object = request.query.object();
        if !EXPORT_OBJECTS.contains(&object) {
            return Err(
                ValidationError::invalid("object", "this object cannot be exported").into(),
            );
        }
        caller.require(read_scope(object))?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let filter = self
            .check_export_query(&mut *tx, tenant, request.query)
            .await?;
        let columns = match request.format {
            ExportFormat::Jsonl => Vec::new(),
            ExportFormat::Csv => {
                let registry = self.registry(&mut *tx, tenant, object).await?;
                let keys: Vec<String> = registry.fields.iter().map(|f| f.key.clone()).collect();
                csv_columns(&request.fields, &keys)
            }
        };
        let export = Export::new(
            ExportId::from_uuid(self.ids.new_uuid()),
            object,
            request.format,
            filter.to_json(),
            columns,
            caller.author(Via::Direct),
            self.clock.now(),
        );
        tx.insert_export(tenant, &export).await?;
        let shown = json!({
            "object": object.as_str(),
            "format": export.format.as_str(),
            "filter": export.filter,
        });
        let what = Audited::new(
            "export.created",
            "export",
            export.id.as_str(),
            changes(None, Some(&shown)),
        );
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(export)
    }

    /// The export `id` (its object's `:read` scope); 404 once it expired.
    pub async fn get_export(&self, caller: &Caller, id: &str) -> Result<Export, AppError> {
        let mut tx = self.store.begin_read().await?;
        let export = tx.get_export(&caller.tenant, id).await?;
        self.readable(caller, export, id)
    }

    /// The file of the export `id`: 409 `conflict` until it completed, 404 once it expired.
    pub async fn export_file(&self, caller: &Caller, id: &str) -> Result<ExportFile, AppError> {
        let export = self.get_export(caller, id).await?;
        if export.status != ExportStatus::Completed {
            return Err(AppError::Conflict {
                detail: format!(
                    "the export is {}; its file is served once it is completed",
                    export.status.as_str()
                ),
                existing: None,
            });
        }
        Ok(ExportFile {
            tenant: caller.tenant.clone(),
            chunks: export.chunks_total,
            export,
        })
    }

    /// Chunk `seq` of a file [`App::export_file`] answered; an error when the file expired
    /// while it was being read.
    pub async fn export_chunk(&self, file: &ExportFile, seq: i64) -> Result<Vec<u8>, AppError> {
        let export = &file.export;
        let mut tx = self.store.begin_read().await?;
        tx.get_export_chunk(&file.tenant, &export.id, seq)
            .await?
            .ok_or_else(|| AppError::not_found("export", export.id.as_str()))
    }

    fn readable(
        &self,
        caller: &Caller,
        export: Option<Export>,
        id: &str,
    ) -> Result<Export, AppError> {
        let export = export
            .filter(|e| !e.is_expired(self.clock.now()))
            .ok_or_else(|| AppError::not_found("export", id))?;
        caller.require(read_scope(export.object))?;
        Ok(export)
    }

    /// Everything held about the contact `id`, soft-deleted or not (decisions §25): audited as
    /// `contact.exported`. Needs the read scope of every part: contacts, activities, emails,
    /// deals and sequences.
    pub async fn export_contact(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<ContactDossier, AppError> {
        for resource in ["contacts", "activities", "emails", "deals", "sequences"] {
            caller.require(Scope::read(resource))?;
        }
        let contact_id = ContactId::parse(id).map_err(|_| AppError::not_found("contact", id))?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let contact = tx
            .get_contact(tenant, &contact_id)
            .await?
            .ok_or_else(|| AppError::not_found("contact", id))?;
        let mut activities = Vec::new();
        let filter = ActivityFilter {
            contact_id: Some(contact_id.clone()),
            ..ActivityFilter::default()
        };
        let mut slice = first_slice();
        loop {
            let rows = tx.list_activities(tenant, &filter, &slice).await?;
            let next = rows
                .last()
                .map(|a| crate::export_filter::activity_position(a.occurred_at, &a.id));
            activities.extend(rows);
            if !advance(&mut slice, next, activities.len()) {
                break;
            }
        }
        let mut emails = Vec::new();
        let filter = EmailFilter {
            contact_id: Some(contact_id.clone()),
            ..EmailFilter::default()
        };
        let mut slice = first_slice();
        loop {
            let rows = tx.list_emails(tenant, &filter, &slice).await?;
            let next = rows.last().map(|e| e.id.to_string());
            emails.extend(rows);
            if !advance(&mut slice, next, emails.len()) {
                break;
            }
        }
        let mut history = Vec::new();
        let mut slice = first_slice();
        loop {
            let rows = tx.list_changes(tenant, id, &slice).await?;
            let next = rows.last().map(|c| c.id.to_string());
            history.extend(rows);
            if !advance(&mut slice, next, history.len()) {
                break;
            }
        }
        let mut deals = Vec::new();
        let filter = DealFilter {
            primary_contact_id: Some(contact_id.clone()),
            include_deleted: true,
            ..DealFilter::default()
        };
        let mut slice = first_slice();
        loop {
            let rows = tx.list_deals(tenant, &filter, &slice).await?;
            let next = rows.last().map(|d| d.id.to_string());
            deals.extend(rows);
            if !advance(&mut slice, next, deals.len()) {
                break;
            }
        }
        let enrollments = tx
            .enrollments_of_contacts(tenant, std::slice::from_ref(&contact_id))
            .await?;
        let what = Audited::new("contact.exported", "contact", id, Vec::new());
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(ContactDossier {
            contact,
            activities,
            emails,
            history,
            enrollments,
            deals,
        })
    }
}

fn first_slice() -> Slice {
    Slice {
        before: None,
        limit: DOSSIER_PAGE,
    }
}

/// Moves `slice` past a page that ended at `next`, with `read` rows read so far; `false` when
/// that page was the last (shorter than a full one).
fn advance(slice: &mut Slice, next: Option<String>, read: usize) -> bool {
    match next {
        Some(next) if read.is_multiple_of(DOSSIER_PAGE as usize) => {
            slice.before = Some(next);
            true
        }
        _ => false,
    }
}
