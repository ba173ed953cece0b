//! `POST /batch`: up to 100 contact and deal writes and upserts, and company upserts, in one
//! transaction, each in its own savepoint. Without `atomic`, each operation stands alone; with it, any failure writes nothing.
//! Batch writes are validated like single writes but are event-silent.

use crm_domain::{
    history::Via, CompanyDraft, CompanyPatch, ContactDraft, ContactPatch, DealDraft, DealPatch,
};
use serde_json::Value;

use crate::{
    auth::Caller,
    error::AppError,
    field_upserts::DealUpsert,
    idempotency::IdemClaim,
    ports::Tx,
    upserts::stored_upsert_reply,
    write::{finish_in_tx, Effects, Emit},
    App,
};

pub const MAX_OPERATIONS: usize = 100;

#[derive(Debug, Clone)]
pub enum BatchOp {
    CreateContact(ContactDraft),
    UpdateContact {
        id: String,
        patch: ContactPatch,
    },
    DeleteContact {
        id: String,
    },
    /// The body read as a create (`draft`) and as a PATCH (`patch`), as `POST /contacts/upsert`
    /// (with `key`, `?match=custom_fields.<key>`).
    UpsertContact {
        key: Option<String>,
        draft: ContactDraft,
        patch: ContactPatch,
    },
    /// The body read as a create and as a PATCH, as `POST /companies/upsert`.
    UpsertCompany {
        key: Option<String>,
        draft: CompanyDraft,
        patch: CompanyPatch,
    },
    /// As `POST /deals/upsert?match=custom_fields.<key>`.
    UpsertDeal {
        key: String,
        draft: DealDraft,
        patch: DealPatch,
        pipeline: Option<String>,
    },
    CreateDeal {
        draft: DealDraft,
        pipeline: Option<String>,
    },
    UpdateDeal {
        id: String,
        patch: DealPatch,
        pipeline: Option<String>,
    },
    DeleteDeal {
        id: String,
    },
}

/// The outcome of one operation: the record (or deletion confirmation; for an upsert, the record
/// and its outcome as [`crate::upserts::stored_upsert_reply`] wraps them), or why it failed.
pub type OpResult = (usize, Result<Value, AppError>);

/// Turns the outcomes into the response body; the caller owns the wire format.
pub type Render<'a> = &'a (dyn Fn(&[OpResult]) -> Value + Send + Sync);

impl App {
    async fn run_op(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        op: BatchOp,
        fx: &mut Effects,
    ) -> Result<Value, AppError> {
        let tenant = &caller.tenant;
        Ok(match op {
            BatchOp::CreateContact(draft) => self
                .views
                .contact(&self.create_contact_in(tx, tenant, draft, fx).await?),
            BatchOp::UpdateContact { id, patch } => self.views.contact(
                &self
                    .update_contact_in(tx, tenant, &id, patch, None, fx)
                    .await?,
            ),
            BatchOp::DeleteContact { id } => {
                let c = self
                    .set_contact_deleted_in(tx, tenant, &id, true, fx)
                    .await?;
                self.views.deleted(c.id.as_str(), "contact")
            }
            BatchOp::UpsertContact { key, draft, patch } => {
                let (contact, outcome) = self
                    .upsert_contact_on(tx, tenant, key.as_deref(), draft, patch, None, fx)
                    .await?;
                stored_upsert_reply(outcome, self.views.contact(&contact))
            }
            BatchOp::UpsertCompany { key, draft, patch } => {
                let author = fx.author().clone();
                let (company, outcome) = self
                    .upsert_company_on(tx, tenant, author, key.as_deref(), draft, patch, None)
                    .await?;
                stored_upsert_reply(outcome, self.views.company(&company))
            }
            BatchOp::UpsertDeal {
                key,
                draft,
                patch,
                pipeline,
            } => {
                let upsert = DealUpsert {
                    draft,
                    patch,
                    pipeline: pipeline.as_deref(),
                };
                let (deal, outcome) = self
                    .upsert_deal_in(tx, tenant, &key, upsert, None, fx)
                    .await?;
                stored_upsert_reply(outcome, self.views.deal(&deal))
            }
            BatchOp::CreateDeal { draft, pipeline } => self.views.deal(
                &self
                    .create_deal_in(tx, tenant, draft, pipeline.as_deref(), fx)
                    .await?,
            ),
            BatchOp::UpdateDeal {
                id,
                patch,
                pipeline,
            } => self.views.deal(
                &self
                    .update_deal_in(tx, tenant, &id, patch, pipeline.as_deref(), None, fx)
                    .await?,
            ),
            BatchOp::DeleteDeal { id } => {
                let d = self.set_deal_deleted_in(tx, tenant, &id, true, fx).await?;
                self.views.deleted(d.id.as_str(), "deal")
            }
        })
    }

    /// Runs the operations (each with its index in the request) and renders the response with
    /// `render`, storing it as the idempotent result inside the same transaction.
    pub async fn batch(
        &self,
        caller: &Caller,
        ops: Vec<(usize, BatchOp)>,
        atomic: bool,
        idem: Option<&IdemClaim>,
        render: Render<'_>,
    ) -> Result<Value, AppError> {
        let mut results: Vec<OpResult> = Vec::with_capacity(ops.len());
        let mut tx = self.store.begin_write().await?;
        // Batch writes are event-silent: no events, no automations, no enrollments; the records
        // they change still reach sequences' exit re-check.
        let mut fx = Effects::new(Emit::Silent, caller.author(Via::Batch));
        for (index, op) in ops {
            tx.savepoint("batch_op").await?;
            let mark = fx.mark();
            match self.run_op(&mut *tx, caller, op, &mut fx).await {
                Ok(v) => {
                    tx.release_savepoint("batch_op").await?;
                    results.push((index, Ok(v)));
                }
                Err(e @ (AppError::Internal(_) | AppError::Unavailable(_))) => return Err(e),
                Err(e) => {
                    fx.rollback_to(mark);
                    tx.rollback_to_savepoint("batch_op").await?;
                    tx.release_savepoint("batch_op").await?;
                    results.push((index, Err(e)));
                }
            }
        }
        results.sort_by_key(|(i, _)| *i);
        if atomic && results.iter().any(|(_, r)| r.is_err()) {
            // Dropping the transaction rolls every operation back.
            let failures = results
                .into_iter()
                .filter_map(|(i, r)| r.err().map(|e| (i, e)))
                .collect();
            return Err(AppError::BatchFailed { failures });
        }
        self.finish_write(&mut *tx, &caller.tenant, fx).await?;
        let body = render(&results);
        finish_in_tx(&mut *tx, &caller.tenant, idem, &body).await?;
        tx.commit().await?;
        Ok(body)
    }
}
