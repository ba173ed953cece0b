//! Automations: the CRUD use cases of `/automations`, and [`App::run_automations`], which every
//! write that emitted events calls (through [`App::finish_write`]) in its own transaction.

use std::collections::HashMap;

use crm_domain::{
    audit::changes,
    condition::Subject,
    history::{Actor, ActorType, Author, Via},
    merge::MergeData,
    rule::{
        self, Action, ActionOutcome, Automation, AutomationDef, AutomationDraft, AutomationRun,
        Planned, RuleContext, SetTarget,
    },
    ActivityDraft, AutomationId, AutomationRunId, CompanyId, DealPatch, EventType, ObjectKind,
    PlanCap, Registry, Tenant, ValidationError,
};
use serde_json::{json, Value};

use crate::{
    audit::Audited,
    auth::Caller,
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    plans::check_plan_cap,
    ports::{StoreError, Tx},
    views::RecordViews,
    write::{Effects, Emit, PendingEvent, RecordRef},
    App,
};

const LIST: &str = "automations";
const SAVEPOINT: &str = "automation_action";

fn parse_id(id: &str) -> Result<AutomationId, AppError> {
    AutomationId::parse(id).map_err(|_| AppError::not_found("automation", id))
}

/// A partial update of a rule: fields given replace the rule's; the result is validated whole.
#[derive(Debug, Clone, Default)]
pub struct AutomationPatch {
    pub name: Option<String>,
    pub trigger_event: Option<String>,
    pub conditions: Option<Value>,
    pub actions: Option<Value>,
    pub enabled: Option<bool>,
}

/// What the automations of one write did: the records their actions changed, as they stand
/// after the last action (for the events' `data` and the write's reply), and the silent effects of
/// those actions (changed records, for sequences).
#[derive(Debug)]
pub(crate) struct AutomationOutcome {
    pub finals: HashMap<RecordRef, Value>,
    pub effects: Effects,
}

/// The error of a failed action as a run records it: a code of the spec's error table (or
/// `no_recipient`) and a detail.
fn failure(e: &AppError) -> (String, String) {
    use crm_domain::ValidationError as V;
    let code = match e {
        AppError::Validation(V::IdentifierRequired) => "identifier_required",
        AppError::Validation(V::Invalid { .. }) => "validation_failed",
        AppError::Validation(V::UnknownField { .. }) => "unknown_field",
        AppError::Validation(V::UnknownValue { .. }) => "unknown_value",
        AppError::Validation(V::InvalidReference { .. }) => "invalid_reference",
        AppError::NotFound { .. } => "not_found",
        AppError::Conflict { .. } => "conflict",
        AppError::VersionConflict { .. } => "version_conflict",
        _ => "internal_error",
    };
    let detail = match e {
        AppError::Internal(msg) => {
            tracing::error!(error = %msg, "automation action failed unexpectedly");
            "unexpected error".to_owned()
        }
        AppError::Validation(v) => match v {
            V::UnknownValue { valid_options, .. } if !valid_options.is_empty() => {
                format!("{v}; valid options: {}", valid_options.join(", "))
            }
            _ => v.to_string(),
        },
        other => other.to_string(),
    };
    (code.to_owned(), detail)
}

/// A failure an action reports itself.
pub(crate) fn fail(code: &str, detail: impl Into<String>) -> ActionError {
    ActionError::Reported(code.to_owned(), detail.into())
}

#[derive(Debug)]
pub(crate) enum ActionError {
    App(AppError),
    Reported(String, String),
}

impl From<AppError> for ActionError {
    fn from(e: AppError) -> Self {
        ActionError::App(e)
    }
}

impl From<StoreError> for ActionError {
    fn from(e: StoreError) -> Self {
        ActionError::App(e.into())
    }
}

impl From<ValidationError> for ActionError {
    fn from(e: ValidationError) -> Self {
        ActionError::App(e.into())
    }
}

/// Per-write caches of what actions read: registries and companies.
#[derive(Default)]
pub(crate) struct ActionCache {
    registries: HashMap<ObjectKind, Registry>,
    companies: HashMap<String, Option<Value>>,
}

impl ActionCache {
    async fn registry(
        &mut self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        object: ObjectKind,
    ) -> Result<&Registry, AppError> {
        Ok(match self.registries.entry(object) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(tx.load_registry(tenant, object).await?)
            }
        })
    }

    /// The company of a record snapshot (for `{{company.*}}` tags).
    pub(crate) async fn company(
        &mut self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        record: &Value,
        views: &dyn RecordViews,
    ) -> Result<Option<Value>, AppError> {
        let Some(id) = record.get("company_id").and_then(Value::as_str) else {
            return Ok(None);
        };
        if !self.companies.contains_key(id) {
            let company = match CompanyId::parse(id) {
                Ok(cid) => tx
                    .get_company(tenant, &cid)
                    .await?
                    .map(|c| views.company(&c)),
                Err(_) => None,
            };
            self.companies.insert(id.to_owned(), company);
        }
        Ok(self.companies[id].clone())
    }
}

fn action_texts(action: &Action) -> Vec<&str> {
    match action {
        Action::CreateActivity { body, .. } => vec![body],
        Action::SetField { value, .. } => value.as_str().into_iter().collect(),
        Action::MoveDealStage { .. } => vec![],
        Action::SendEmail(e) => [&e.to, &e.subject, &e.body, &e.text]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect(),
    }
}

fn object_of(event: EventType) -> ObjectKind {
    if event.object() == "deal" {
        ObjectKind::Deal
    } else {
        ObjectKind::Contact
    }
}

impl App {
    /// What the audit log shows of a rule: its definition as a client writes it, and `enabled`.
    fn automation_shape(&self, a: &Automation) -> Value {
        let d = self.views.automation_draft(&a.def);
        json!({"name": d.name, "trigger_event": d.trigger_event, "conditions": d.conditions,
            "actions": d.actions, "enabled": a.enabled})
    }

    /// Runs the automations the events of one write trigger, inside its transaction:
    ///
    /// - one query loads the tenant's enabled rules for these event types (none: done);
    /// - every rule is evaluated against each event's record as the client's write left it,
    ///   before any rule acted (decisions §12), and every evaluation is recorded as a run;
    /// - matching rules then act in creation order, event by event, each action in a savepoint:
    ///   a failing action is rolled back and recorded on its run, the write goes on;
    /// - actions write silently (no events), so rules cannot trigger each other.
    pub(crate) async fn run_automations(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        events: &[PendingEvent],
    ) -> Result<AutomationOutcome, AppError> {
        let mut outcome = AutomationOutcome {
            finals: HashMap::new(),
            effects: Effects::new(Emit::Silent, Author::system()),
        };
        let mut types: Vec<EventType> = events.iter().map(|e| e.event_type).collect();
        types.dedup();
        types.sort_by_key(|t| t.as_str());
        types.dedup();
        let rules = self.active_automations(tx, tenant, &types).await?;
        if rules.is_empty() {
            return Ok(outcome);
        }
        // Evaluate every rule before any acts.
        let mut evaluations: Vec<(&PendingEvent, &Automation, bool)> = Vec::new();
        for event in events {
            let subject = Subject {
                record: &event.data,
                previous_stage: event.previous_stage.as_ref().map(|p| p.as_deref()),
            };
            for rule in rules
                .iter()
                .filter(|r| r.def.trigger_event == event.event_type)
            {
                evaluations.push((event, rule, rule.matches(event.event_type, &subject)));
            }
        }
        let now = self.clock.now();
        let mut cache = ActionCache::default();
        let mut runs = Vec::with_capacity(evaluations.len());
        for (event, rule, matched) in evaluations {
            let mut outcomes = Vec::new();
            if matched {
                // The rule is the actor of what its actions change; the transport and request
                // id stay those of the write that triggered it.
                outcome.effects.set_author(Author {
                    actor: Actor {
                        kind: ActorType::Automation,
                        id: Some(rule.id.as_str().to_owned()),
                        name: Some(rule.def.name.clone()),
                    },
                    ..event.author.via(Via::Automation)
                });
                for action in &rule.def.actions {
                    let result = self
                        .apply_action(tx, tenant, event, rule, action, &mut outcome, &mut cache)
                        .await?;
                    outcomes.push(ActionOutcome {
                        action_type: action.action_type(),
                        result,
                    });
                }
            }
            if let Some(dry) = self.dry() {
                dry.record(|fx| {
                    fx.automations.push(crate::dry_run::WouldRun {
                        id: rule.id.clone(),
                        name: rule.def.name.clone(),
                        matched,
                        actions: outcomes.clone(),
                    })
                });
            }
            runs.push(AutomationRun {
                id: AutomationRunId::from_uuid(self.ids.new_uuid()),
                automation_id: rule.id.clone(),
                event_id: event.id.clone(),
                event_type: event.event_type,
                record_id: event.record.id().to_owned(),
                matched,
                actions: outcomes,
                created_at: now,
            });
        }
        tx.insert_automation_runs(tenant, &runs).await?;
        Ok(outcome)
    }

    /// One action in its own savepoint. `Err` of the outer result only when the transaction
    /// itself failed (the savepoint could not be rolled back).
    #[allow(clippy::too_many_arguments)]
    async fn apply_action(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
        rule: &Automation,
        action: &Action,
        outcome: &mut AutomationOutcome,
        cache: &mut ActionCache,
    ) -> Result<Result<Value, (String, String)>, AppError> {
        tx.savepoint(SAVEPOINT).await?;
        let mark = outcome.effects.mark();
        let emails_mark = self.dry().map(|d| d.emails_mark());
        let done = self
            .act(tx, tenant, event, rule, action, outcome, cache)
            .await;
        match done {
            Ok(result) => {
                tx.release_savepoint(SAVEPOINT).await?;
                Ok(Ok(result))
            }
            Err(e) => {
                outcome.effects.rollback_to(mark);
                if let (Some(dry), Some(at)) = (self.dry(), emails_mark) {
                    dry.emails_rollback(at);
                }
                tx.rollback_to_savepoint(SAVEPOINT).await?;
                tx.release_savepoint(SAVEPOINT).await?;
                Ok(Err(match e {
                    ActionError::App(e) => failure(&e),
                    ActionError::Reported(code, detail) => (code, detail),
                }))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn act(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
        rule: &Automation,
        action: &Action,
        outcome: &mut AutomationOutcome,
        cache: &mut ActionCache,
    ) -> Result<Value, ActionError> {
        let object = object_of(event.event_type);
        // A template's text is not known here: load the company for it too (once per write).
        let templated = matches!(action, Action::SendEmail(e) if e.template_id.is_some());
        let company = if templated || action_texts(action).iter().any(|t| t.contains("company.")) {
            cache.company(tx, tenant, &event.data, &*self.views).await?
        } else {
            None
        };
        let previous_stage = event.previous_stage.as_ref().map(|prev| {
            prev.as_deref()
                .map(|p| Value::String(p.to_owned()))
                .unwrap_or(Value::Null)
        });
        let data = MergeData {
            record: Some(&event.data),
            company: company.as_ref(),
            previous_stage: previous_stage.as_ref(),
        };
        let registry = cache.registry(tx, tenant, object).await?;
        let planned = rule::plan(action, event.event_type, registry, &data)?;
        let fx = &mut outcome.effects;
        match planned {
            Planned::SetField { target, value } => {
                let field = match &target {
                    SetTarget::Builtin(f) => (*f).to_owned(),
                    SetTarget::Custom(k) => format!("custom_fields.{k}"),
                };
                let snapshot = match &event.record {
                    RecordRef::Contact(id) => {
                        let patch = rule::contact_patch(&target, value.clone())?;
                        self.views.contact(
                            &self
                                .update_contact_in(tx, tenant, id.as_str(), patch, None, fx)
                                .await?,
                        )
                    }
                    RecordRef::Deal(id) => {
                        let patch = rule::deal_patch(&target, value.clone())?;
                        self.views.deal(
                            &self
                                .update_deal_in(tx, tenant, id.as_str(), patch, None, None, fx)
                                .await?,
                        )
                    }
                };
                outcome.finals.insert(event.record.clone(), snapshot);
                Ok(json!({"field": field, "value": value}))
            }
            Planned::MoveDealStage { stage } => {
                let RecordRef::Deal(id) = &event.record else {
                    return Err(fail(
                        "validation_failed",
                        "move_deal_stage acts on deals only",
                    ));
                };
                let patch = DealPatch {
                    stage: crm_domain::Patch::Value(stage.clone()),
                    ..Default::default()
                };
                let deal = self
                    .update_deal_in(tx, tenant, id.as_str(), patch, None, None, fx)
                    .await?;
                outcome
                    .finals
                    .insert(event.record.clone(), self.views.deal(&deal));
                Ok(json!({"stage": deal.stage}))
            }
            Planned::CreateActivity {
                activity_type,
                body,
            } => {
                let (contact_id, deal_id) = match &event.record {
                    RecordRef::Contact(id) => (Some(id.to_string()), None),
                    RecordRef::Deal(id) => (None, Some(id.to_string())),
                };
                let draft = ActivityDraft {
                    activity_type: Some(activity_type),
                    contact_id,
                    deal_id,
                    body: Some(body),
                    ..Default::default()
                };
                let activity = self.create_activity_in(tx, tenant, draft).await?;
                Ok(json!({"activity_id": activity.id.as_str()}))
            }
            Planned::SendEmail { to, email } => {
                self.send_email_action(tx, tenant, event, rule, to, email, &data)
                    .await
            }
        }
    }

    /// The registries and stage keys a rule is validated against.
    async fn rule_context(
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

    async fn validate_rule(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        draft: AutomationDraft,
    ) -> Result<AutomationDef, AppError> {
        let (contact, deal, stage_keys) = self.rule_context(tx, &caller.tenant).await?;
        let ctx = RuleContext {
            contact_registry: &contact,
            deal_registry: &deal,
            stage_keys: &stage_keys,
        };
        let def = AutomationDef::parse(draft, &ctx)?;
        self.check_email_actions(tx, &caller.tenant, &def).await?;
        Ok(def)
    }

    /// Creates a rule (enabled unless `enabled: false`). Not idempotent and with no duplicate-name
    /// guard (spec): a blind retry installs a second copy. An enabled rule counts against the
    /// plan's cap of active automations in the caller's mode.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_automation(
        &self,
        caller: &Caller,
        draft: AutomationDraft,
        enabled: bool,
    ) -> Result<Automation, AppError> {
        let mut tx = self.store.begin_write().await?;
        let def = self.validate_rule(&mut *tx, caller, draft).await?;
        if enabled {
            check_plan_cap(&mut *tx, caller, PlanCap::ActiveAutomations).await?;
        }
        let now = self.clock.now();
        let automation = Automation {
            id: AutomationId::from_uuid(self.ids.new_uuid()),
            def,
            enabled,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        tx.mark_config_changed(&caller.tenant.workspace_id);
        tx.insert_automation(&caller.tenant, &automation).await?;
        let diff = changes(None, Some(&self.automation_shape(&automation)));
        let what = Audited::new(
            "automation.created",
            "automation",
            automation.id.as_str(),
            diff,
        );
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(automation)
    }

    pub async fn get_automation(&self, caller: &Caller, id: &str) -> Result<Automation, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_automation(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("automation", id.as_str()))
    }

    pub async fn list_automations(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Automation>, AppError> {
        let slice = slice_for(&page, &caller.tenant, LIST, "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_automations(&caller.tenant, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, LIST, "", |a| {
            a.id.to_string()
        }))
    }

    /// Changes a rule; the result is validated as a whole, like a create. Enabling a disabled rule
    /// checks the plan cap again.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_automation(
        &self,
        caller: &Caller,
        id: &str,
        patch: AutomationPatch,
    ) -> Result<Automation, AppError> {
        let id = parse_id(id)?;
        let tenant = &caller.tenant;
        let mut tx = self.store.begin_write().await?;
        let mut automation = tx
            .get_automation(tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("automation", id.as_str()))?;
        let before = self.automation_shape(&automation);
        let redefines = patch.name.is_some()
            || patch.trigger_event.is_some()
            || patch.conditions.is_some()
            || patch.actions.is_some();
        let mut changed = false;
        if redefines {
            let mut draft = self.views.automation_draft(&automation.def);
            draft.name = patch.name.or(draft.name);
            draft.trigger_event = patch.trigger_event.or(draft.trigger_event);
            draft.conditions = patch.conditions.or(draft.conditions);
            draft.actions = patch.actions.or(draft.actions);
            let def = self.validate_rule(&mut *tx, caller, draft).await?;
            changed |= def != automation.def;
            automation.def = def;
        }
        if let Some(enabled) = patch.enabled {
            if enabled && !automation.enabled {
                check_plan_cap(&mut *tx, caller, PlanCap::ActiveAutomations).await?;
            }
            changed |= enabled != automation.enabled;
            automation.enabled = enabled;
        }
        if !changed {
            return Ok(automation);
        }
        automation.version += 1;
        automation.updated_at = self.clock.now();
        tx.mark_config_changed(&tenant.workspace_id);
        match tx.update_automation(tenant, &automation).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: automation.version - 1,
                })
            }
            other => other?,
        }
        let diff = changes(Some(&before), Some(&self.automation_shape(&automation)));
        let what = Audited::new("automation.updated", "automation", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(automation)
    }

    /// Deletes a rule and its runs for good.
    pub async fn delete_automation(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<AutomationId, AppError> {
        let id = parse_id(id)?;
        let mut tx = self.store.begin_write().await?;
        tx.mark_config_changed(&caller.tenant.workspace_id);
        let before = tx.get_automation(&caller.tenant, &id).await?;
        if !tx.delete_automation(&caller.tenant, &id).await? {
            return Err(AppError::not_found("automation", id.as_str()));
        }
        let shape = before.as_ref().map(|a| self.automation_shape(a));
        let diff = changes(shape.as_ref(), None);
        let what = Audited::new("automation.deleted", "automation", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The runs of a rule, newest first.
    pub async fn list_automation_runs(
        &self,
        caller: &Caller,
        id: &str,
        page: PageParams,
    ) -> Result<Page<AutomationRun>, AppError> {
        let id = parse_id(id)?;
        let list = format!("{LIST}/{id}/runs");
        let slice = slice_for(&page, &caller.tenant, &list, "")?;
        let mut tx = self.store.begin_read().await?;
        if tx.get_automation(&caller.tenant, &id).await?.is_none() {
            return Err(AppError::not_found("automation", id.as_str()));
        }
        let rows = tx.list_automation_runs(&caller.tenant, &id, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, &list, "", |r| {
            r.id.to_string()
        }))
    }
}
