//! crm-app's [`RecordViews`] port, answered with the response bodies: an event's `data`, a
//! replayed answer and a conflict's `existing` record are what a read of the record returns.

use crm_app::views::RecordViews;
use crm_domain::{Activity, Company, Contact, Deal, Pipeline, Stage};
use serde::Serialize;
use serde_json::Value;

use super::{
    ActivityBody, CompanyBody, ContactBody, DealBody, DeletedBody, PipelineBody, StageBody,
};

/// The records as the API's bodies show them.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyViews;

fn to_value(body: &impl Serialize) -> Value {
    serde_json::to_value(body).expect("a body serializes to JSON")
}

impl RecordViews for BodyViews {
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
