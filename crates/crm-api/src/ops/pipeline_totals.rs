//! `GET /pipelines/{id}/totals`: each stage's active deals counted and summed per currency, the
//! numbers a board shows above its columns without reading every deal.

use crm_app::{ports::StageTotal, Scope};
use crm_domain::Pipeline;
use schemars::JsonSchema;
use serde::Serialize;

use super::{handler, owner_filter, OWNER_FILTER};
use crate::operation::{Hints, Method, Operation, Output, Reply};

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "PipelineTotals")]
pub struct TotalsBody {
    #[schemars(extend("const" = "pipeline_totals"))]
    pub object: &'static str,
    pub pipeline_id: String,
    /// Every stage of the pipeline, in order, with zero counts too.
    pub stages: Vec<StageTotalsBody>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StageTotalsBody {
    /// The stage's key.
    pub stage: String,
    /// Active (not deleted) deals in the stage.
    pub deals: u64,
    /// Their summed `value_cents`, one entry per currency (null: deals valued without one).
    pub values: Vec<ValueBody>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ValueBody {
    pub currency: Option<String>,
    pub value_cents: i64,
}

impl TotalsBody {
    pub fn new(pipeline: &Pipeline, totals: &[StageTotal]) -> TotalsBody {
        let mut stages: Vec<&crm_domain::pipeline::Stage> = pipeline.stages.iter().collect();
        stages.sort_by_key(|s| s.ordinal);
        TotalsBody {
            object: "pipeline_totals",
            pipeline_id: pipeline.id.to_string(),
            stages: stages
                .into_iter()
                .map(|stage| {
                    let mine = totals.iter().filter(|t| t.stage == stage.key);
                    StageTotalsBody {
                        stage: stage.key.clone(),
                        deals: mine.clone().map(|t| t.deals).sum(),
                        values: mine
                            .filter(|t| t.currency.is_some() || t.value_cents != 0)
                            .map(|t| ValueBody {
                                currency: t.currency.clone(),
                                value_cents: t.value_cents,
                            })
                            .collect(),
                    }
                })
                .collect(),
        }
    }
}

handler!(totals(api, caller, input) {
    let owner = owner_filter(&input)?;
    let (pipeline, totals) = api.app.pipeline_totals(caller, input.path_param("id"), owner.as_ref()).await?;
    Ok(Reply::serialized(&TotalsBody::new(&pipeline, &totals)))
});

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_get_pipeline_totals",
        method: Method::Get,
        path: "/pipelines/{id}/totals",
        summary: "Count and sum a pipeline's deals per stage",
        description: "Each stage of the pipeline (by id or key), in order, with its active deals' count and summed value_cents per currency: a board's column totals; `owner_id` counts only that user's deals. Needs deals:read too. Errors: not_found, forbidden.",
        scope: Scope::read("pipelines"),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: &[OWNER_FILTER],
        body: None,
        output: Output::of::<TotalsBody>(),
        hints: Hints::READ,
        handler: totals,
    }]
}
