//! `dry_run=true` on any write (decisions §18, §24): the operation's own handler runs against
//! [`crm_app::App::dry_run`]'s application, whose write transactions roll back at commit and
//! whose write path records its effects; the answer is the [`DryRunBody`] envelope, with
//! `Dry-Run: true` (and `Upsert-Outcome` where the real call sends it). A dry run that fails
//! answers the problem the real call would, since it is the real call's code that fails.

use crm_app::Caller;

use crate::{
    bodies::DryRunBody,
    operation::{Input, Operation, Reply},
    problem::Problem,
    Api,
};

/// The query parameter (REST) and argument (MCP, A2A) that asks for a dry run.
pub const DRY_RUN: &str = "dry_run";

impl Operation {
    /// Whether `dry_run=true` runs this write through the generic dry run (decisions §18): the
    /// write's hints offer it and the operation does not declare a `dry_run` of its own (an
    /// import's dry run is a job of its own, decisions §24).
    pub fn generic_dry_run(&self) -> bool {
        self.hints.dry_run && !self.query.iter().any(|q| q.name == DRY_RUN)
    }
}

/// Takes `dry_run` out of a write's query, so that the operation's own checks never see it:
/// whether a dry run is asked. A read keeps it (an unknown parameter there). `true` or `false`,
/// given once.
pub(crate) fn take_dry_run(op: &Operation, input: &mut Input) -> Result<bool, Problem> {
    // An operation that declares `dry_run` itself (an import) reads it as its own parameter.
    let own = op.query.iter().any(|q| q.name == DRY_RUN);
    if op.hints.read_only || own || !input.query.iter().any(|(k, _)| k == DRY_RUN) {
        return Ok(false);
    }
    let mut values = Vec::new();
    input.query.retain(|(k, v)| {
        if k == DRY_RUN {
            values.push(v.clone());
            false
        } else {
            true
        }
    });
    match values.as_slice() {
        [v] if v == "true" => Ok(true),
        [v] if v == "false" => Ok(false),
        [_] => Err(Problem::validation(
            DRY_RUN,
            "dry_run must be true or false",
        )),
        _ => Err(
            Problem::bad_request("query parameter `dry_run` is given more than once")
                .with("field", DRY_RUN),
        ),
    }
}

/// Runs `op`'s handler as a dry run for `caller` (scope and input already checked).
pub(crate) async fn run(
    api: &Api,
    op: &'static Operation,
    caller: &Caller,
    mut input: Input,
) -> Result<Reply, Problem> {
    if op.hints.refuses_dry_run() {
        return Err(Problem::bad_request(format!(
            "{} has no dry run: its effect is a secret or a send",
            op.name
        ))
        .with("field", DRY_RUN));
    }
    input.idem = None;
    let (app, recorder) = api.app.dry_run();
    let dry = Api {
        app,
        errors_base_url: api.errors_base_url.clone(),
    };
    let reply = (op.handler)(&dry, caller, input).await?.declared(op);
    let outcome = reply.upsert_outcome;
    let body = DryRunBody::new(
        reply.status,
        reply.body.into_value(),
        recorder.effects(),
        caller,
    );
    Ok(Reply {
        status: 200,
        upsert_outcome: outcome,
        dry_run: true,
        ..Reply::serialized(&body)
    })
}
