//! Pipelines and stages: `/pipelines`, addressed by `pl_` id or key. Not covered by
//! `Idempotency-Key` (a retried create answers 409 for its own key).

use crm_app::{
    pipelines::{PipelineUpdate, StageAction},
    Scope,
};
use crm_domain::{PipelineDraft, StageDraft};
use schemars::JsonSchema;
use serde::Deserialize;

use super::handler;
use crate::{
    bodies::{DeletedBody, ListBody, PipelineBody},
    body,
    operation::{Hints, Method, Operation, Output, Reply, CURSOR, LIMIT},
    schema::WholeNumber,
    Problem,
};

/// A stage: a plain key (its label defaults to the key), or an object.
#[derive(Debug, JsonSchema)]
#[schemars(untagged)]
pub enum StageIn {
    Key(#[schemars(pattern(crm_domain::pipeline::KEY_PATTERN))] String),
    Object(StageObject),
}

/// By hand rather than `#[serde(untagged)]`, whose error ("data did not match any variant of
/// untagged enum StageIn") names a Rust type and not what a stage may be. An object's own errors
/// (a missing `key`, an unknown member) keep their place in the body's path.
impl<'de> Deserialize<'de> for StageIn {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{value::MapAccessDeserializer, Error, MapAccess, Visitor};

        struct StageVisitor;

        impl<'de> Visitor<'de> for StageVisitor {
            type Value = StageIn;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a stage key (string) or an object {key, label?, type?}")
            }

            fn visit_str<E: Error>(self, key: &str) -> Result<StageIn, E> {
                Ok(StageIn::Key(key.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StageIn, A::Error> {
                StageObject::deserialize(MapAccessDeserializer::new(map)).map(StageIn::Object)
            }
        }

        deserializer.deserialize_any(StageVisitor)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageObject {
    #[schemars(pattern(crm_domain::pipeline::KEY_PATTERN))]
    pub key: String,
    #[schemars(length(max = 1024))]
    pub label: Option<String>,
    /// `open` (default), `won` or `lost`; won and lost stages are terminal.
    #[serde(rename = "type")]
    pub stage_type: Option<String>,
}

impl From<StageIn> for StageDraft {
    fn from(s: StageIn) -> StageDraft {
        match s {
            StageIn::Key(key) => StageDraft {
                key,
                label: None,
                stage_type: None,
            },
            StageIn::Object(o) => StageDraft {
                key: o.key,
                label: o.label,
                stage_type: o.stage_type,
            },
        }
    }
}

/// A pipeline to create. `key` is unique per workspace and mode; the first stage is the entry stage.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PipelineCreate {
    #[schemars(required, pattern(crm_domain::pipeline::KEY_PATTERN))]
    pub key: Option<String>,
    /// Defaults to the key.
    #[schemars(length(max = 1024))]
    pub name: Option<String>,
    /// Making it the default unsets the old default.
    pub is_default: Option<bool>,
    /// Ordered; at least one. Stage keys are unique within the pipeline (a key given twice, as
    /// a plain key or in an object, is validation_failed on the second).
    #[schemars(required, length(min = 1), extend("uniqueItems" = true))]
    pub stages: Option<Vec<StageIn>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PipelineChange {
    #[schemars(length(max = 1024), pattern(crate::schema::NON_BLANK))]
    pub name: Option<String>,
    /// `true` makes this the default pipeline (and unsets the old one).
    pub is_default: Option<bool>,
}

/// One stage change. `action` is `add` (default for POST), `update` or `remove`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StageChange {
    #[schemars(extend("enum" = ["add", "update", "remove", null]))]
    pub action: Option<String>,
    /// The stage key: of the new stage (add) or of the stage to change or remove.
    #[schemars(required, pattern(crm_domain::pipeline::KEY_PATTERN))]
    pub key: Option<String>,
    #[schemars(length(max = 1024))]
    pub label: Option<String>,
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["open", "won", "lost", null]))]
    pub stage_type: Option<String>,
    /// 0-based position; default: last (add) or unchanged (update).
    #[schemars(range(min = 0))]
    pub position: Option<WholeNumber>,
    /// remove: the stage to move the removed stage's deals to.
    pub move_to: Option<String>,
}

handler!(list(api, caller, input) {
    let page = api.app.list_pipelines_page(caller, input.page()?).await?;
    Ok(Reply::serialized(&ListBody::<PipelineBody>::of(page)))
});

handler!(create(api, caller, input) {
    let c: PipelineCreate = body::parse(input.body.as_ref(), None)?;
    let draft = PipelineDraft {
        key: c.key,
        name: c.name,
        is_default: c.is_default.unwrap_or(false),
        stages: c.stages.unwrap_or_default().into_iter().map(StageDraft::from).collect(),
    };
    let pipeline = api.app.create_pipeline(caller, draft).await?;
    Ok(Reply::versioned(&PipelineBody::from(&pipeline)))
});

handler!(get(api, caller, input) {
    let pipeline = api.app.get_pipeline(caller, input.path_param("id")).await?;
    Ok(Reply::versioned(&PipelineBody::from(&pipeline)))
});

handler!(update(api, caller, input) {
    let c: PipelineChange = body::parse(input.body.as_ref(), None)?;
    let pipeline = api.app.update_pipeline(caller, input.path_param("id"), PipelineUpdate { name: c.name, is_default: c.is_default }).await?;
    Ok(Reply::versioned(&PipelineBody::from(&pipeline)))
});

handler!(delete(api, caller, input) {
    let pipeline = api.app.delete_pipeline(caller, input.path_param("id")).await?;
    Ok(Reply::serialized(&DeletedBody::new(pipeline.id.as_str(), "pipeline")))
});

fn stage_action(c: StageChange) -> Result<StageAction, Problem> {
    let key = || {
        c.key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| Problem::validation("key", "key is required"))
    };
    Ok(match c.action.as_deref().unwrap_or("add") {
        "add" => StageAction::Add {
            draft: StageDraft {
                key: key()?,
                label: c.label,
                stage_type: c.stage_type,
            },
            position: c.position.map(|p| p.0),
        },
        "update" => StageAction::Update {
            key: key()?,
            label: c.label,
            stage_type: c.stage_type,
            position: c.position.map(|p| p.0),
        },
        "remove" => StageAction::Remove {
            key: key()?,
            move_to: c.move_to,
        },
        other => {
            return Err(Problem::new(
                crate::ErrorCode::UnknownValue,
                format!("`{other}` is not a stage action"),
            )
            .with("field", "action")
            .with("valid_options", vec!["add", "update", "remove"]))
        }
    })
}

handler!(manage_stage(api, caller, input) {
    let change: StageChange = body::parse(input.body.as_ref(), None)?;
    let adding = change.action.as_deref().unwrap_or("add") == "add";
    let pipeline = api.app.manage_stage(caller, input.path_param("pipeline"), stage_action(change)?).await?;
    let reply = Reply::versioned(&PipelineBody::from(&pipeline));
    Ok(if adding { reply } else { reply.with_status(200) })
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("pipelines");
    let write = Scope::write("pipelines");
    vec![
        Operation {
            name: "svc_list_pipelines",
            method: Method::Get,
            path: "/pipelines",
            summary: "List pipelines",
            description: "Pipelines oldest first with their ordered stages. A deal's stage is a key of its pipeline.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[LIMIT, CURSOR],
            body: None,
            output: Output::of::<ListBody<PipelineBody>>(),
            hints: Hints::READ,
            handler: list,
        },
        Operation {
            name: "svc_create_pipeline",
            method: Method::Post,
            path: "/pipelines",
            summary: "Create a pipeline",
            description: "Creates a pipeline; the first stage is the entry stage, won/lost stages are terminal. A taken key answers 409.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<PipelineCreate>()),
            output: Output::of::<PipelineBody>(),
            hints: Hints::CREATE,
            handler: create,
        },
        Operation {
            name: "svc_get_pipeline",
            method: Method::Get,
            path: "/pipelines/{id}",
            summary: "Get a pipeline",
            description: "One pipeline by id or key, with its stages.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<PipelineBody>(),
            hints: Hints::READ,
            handler: get,
        },
        Operation {
            name: "svc_update_pipeline",
            method: Method::Patch,
            path: "/pipelines/{id}",
            summary: "Update a pipeline",
            description: "Renames a pipeline or makes it the default. Stages change with svc_manage_stage.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: Some(Output::of::<PipelineChange>()),
            output: Output::of::<PipelineBody>(),
            hints: Hints::UPDATE,
            handler: update,
        },
        Operation {
            name: "svc_delete_pipeline",
            method: Method::Delete,
            path: "/pipelines/{id}",
            summary: "Delete a pipeline",
            description: "Deletes a pipeline for good; not the default one, nor one holding deals (409).",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<DeletedBody>(),
            hints: Hints::DELETE,
            handler: delete,
        },
        Operation {
            name: "svc_manage_stage",
            method: Method::Post,
            path: "/pipelines/{pipeline}/stages",
            summary: "Add, change or remove a stage",
            description: "Adds, updates or removes a stage of `pipeline` (id or key). Removing a stage that holds deals needs `move_to`; the last stage stays. Answers the pipeline.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<StageChange>()),
            output: Output::of::<PipelineBody>(),
            hints: Hints::UPDATE,
            handler: manage_stage,
        },
    ]
}
