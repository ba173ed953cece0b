//! crm-app's [`RecordViews`] port, answered with the response bodies: an event's `data`, a
//! replayed answer and a conflict's `existing` record are what a read of the record returns.

use crm_app::views::RecordViews;
use crm_domain::{
    rule::{AutomationDef, AutomationDraft},
    sequence::{SequenceDef, SequenceDraft},
    Activity, Company, Contact, Deal, Pipeline, Stage,
};
use serde::Serialize;
use serde_json::Value;

use super::{
    ActionBody, ActivityBody, CompanyBody, ConditionBody, ContactBody, DealBody, DeletedBody,
    PipelineBody, StageBody, StepBody, TriggerBody,
};

/// The records as the API's bodies show them.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyViews;

fn to_value(body: &impl Serialize) -> Value {
    serde_json::to_value(body).expect("a body serializes to JSON")
}

impl RecordViews for BodyViews {
    fn problem(&self, error: crm_app::AppError) -> Value {
        let mut doc = crate::Problem::from(error).to_json("");
        if let Value::Object(map) = &mut doc {
            map.remove("type");
        }
        doc
    }

    fn contact(&self, contact: &Contact) -> Value {
        to_value(&ContactBody::from(contact))
    }

    fn company(&self, company: &Company) -> Value {
        to_value(&CompanyBody::from(company))
    }

    fn deal(&self, deal: &Deal) -> Value {
        to_value(&DealBody::from(deal))
    }

    fn activity(&self, activity: &Activity) -> Value {
        to_value(&ActivityBody::from(activity))
    }

    fn pipeline(&self, pipeline: &Pipeline) -> Value {
        to_value(&PipelineBody::from(pipeline))
    }

    fn stage(&self, stage: &Stage) -> Value {
        to_value(&StageBody::from(stage))
    }

    fn deleted(&self, id: &str, object: &'static str) -> Value {
        to_value(&DeletedBody::new(id, object))
    }

    fn automation_draft(&self, def: &AutomationDef) -> AutomationDraft {
        AutomationDraft {
            name: Some(def.name.clone()),
            trigger_event: Some(def.trigger_event.as_str().to_owned()),
            conditions: Some(to_value(
                &def.conditions
                    .iter()
                    .map(ConditionBody::from)
                    .collect::<Vec<_>>(),
            )),
            actions: Some(to_value(
                &def.actions.iter().map(ActionBody::from).collect::<Vec<_>>(),
            )),
        }
    }

    fn sequence_draft(&self, def: &SequenceDef) -> SequenceDraft {
        SequenceDraft {
            name: Some(def.name.clone()),
            channel: Some("email".into()),
            trigger: Some(to_value(&def.trigger.as_ref().map(TriggerBody::from))),
            exit_when: Some(to_value(
                &def.exit_when
                    .iter()
                    .map(ConditionBody::from)
                    .collect::<Vec<_>>(),
            )),
            steps: Some(to_value(
                &def.steps.iter().map(StepBody::from).collect::<Vec<_>>(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conditions and merge tags read these values: they are the answer's, key for key.
    #[test]
    fn views_are_the_bodies() {
        let deal = crate::bodies::deal::tests::deal();
        assert_eq!(
            BodyViews.deal(&deal).to_string(),
            serde_json::to_string(&DealBody::from(&deal)).unwrap()
        );
        let company = crate::bodies::company::tests::company();
        assert_eq!(BodyViews.company(&company)["custom_fields"]["size"], 12);
    }
}
