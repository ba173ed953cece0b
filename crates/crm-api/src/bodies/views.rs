//! crm-app's [`RecordViews`] port, answered with the response bodies: an event's `data`, a
//! replayed answer and a conflict's `existing` record are what a read of the record returns.

use crm_app::{
    export_filter::ExportPage,
    views::{write_csv_rows, RecordViews},
    AppError,
};
use crm_domain::{
    export::ExportFormat,
    rule::{AutomationDef, AutomationDraft},
    sequence::{SequenceDef, SequenceDraft},
    Activity, Company, Contact, Deal, Pipeline, Stage,
};
use serde::Serialize;
use serde_json::Value;

use crate::view::cells::{csv_cells, Columns};

use super::{
    ActionBody, ActivityBody, CompanyBody, ConditionBody, ContactBody, DealBody, DeletedBody,
    PipelineBody, StageBody, StepBody, TriggerBody,
};

/// Appends `bodies` to an export's file in `format`, from the typed bodies.
fn write_bodies<B: Serialize>(
    bodies: impl Iterator<Item = B>,
    format: ExportFormat,
    columns: &[String],
    out: &mut Vec<u8>,
) -> Result<(), AppError> {
    match format {
        ExportFormat::Jsonl => {
            for body in bodies {
                serde_json::to_writer(&mut *out, &body)
                    .map_err(|e| AppError::Internal(format!("writing a JSON line: {e}")))?;
                out.push(b'\n');
            }
            Ok(())
        }
        ExportFormat::Csv => {
            let columns = Columns::new(columns);
            write_csv_rows(out, bodies.map(|body| csv_cells(&body, &columns)))
        }
    }
}

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

    fn write_export_page(
        &self,
        page: &ExportPage,
        format: ExportFormat,
        columns: &[String],
        out: &mut Vec<u8>,
    ) -> Result<(), AppError> {
        match page {
            ExportPage::Contacts(r) => {
                write_bodies(r.iter().map(ContactBody::from), format, columns, out)
            }
            ExportPage::Companies(r) => {
                write_bodies(r.iter().map(CompanyBody::from), format, columns, out)
            }
            ExportPage::Deals(r) => {
                write_bodies(r.iter().map(DealBody::from), format, columns, out)
            }
            ExportPage::Activities(r) => {
                write_bodies(r.iter().map(ActivityBody::from), format, columns, out)
            }
        }
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

    /// An export's file written from the typed bodies is byte for byte the one written
    /// through each body as a `Value` (the port's default).
    #[test]
    fn exports_write_what_the_bodies_as_values_write() {
        let deal = crate::bodies::deal::tests::deal();
        let mut other = deal.clone();
        other.title = "Say \"hi\", then\nleave".into();
        other
            .custom_fields
            .insert("tags".into(), serde_json::json!(["a", "b"]));
        let company = crate::bodies::company::tests::company();
        let pages = [
            (
                ExportPage::Deals(vec![deal, other]),
                &[
                    "id",
                    "name",
                    "value_cents",
                    "custom_fields.tags",
                    "company_id",
                    "deleted_at",
                ][..],
            ),
            (
                ExportPage::Companies(vec![company]),
                &[
                    "id",
                    "object",
                    "custom_fields.size",
                    "custom_fields.none",
                    "version",
                ][..],
            ),
        ];
        for (page, columns) in pages {
            let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
            for format in ExportFormat::ALL {
                let (mut typed, mut values) = (Vec::new(), Vec::new());
                BodyViews
                    .write_export_page(&page, format, &columns, &mut typed)
                    .unwrap();
                crm_app::views::write_export_page_as_values(
                    &BodyViews,
                    &page,
                    format,
                    &columns,
                    &mut values,
                )
                .unwrap();
                assert_eq!(
                    String::from_utf8(typed).unwrap(),
                    String::from_utf8(values).unwrap()
                );
            }
        }
    }
}
