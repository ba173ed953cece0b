//! [`Api::call`]: the one way a transport runs an operation. It authenticates the caller, admits
//! the call (rate limit, quota, spend cap), has the transport read its input, checks the scope
//! and the input's shape, folds an alias route in, and handles `Idempotency-Key` around the
//! operation's handler, in that order on REST, MCP and A2A alike.

use std::future::Future;

use crm_app::{Admission, Caller, Origin, RateStatus};

use crate::{
    alias, dry_run,
    dry_run::take_dry_run,
    idempotency,
    operation::{Alias, Input, Operation, Reply},
    problem::Problem,
    query::check_query,
    Api,
};

/// Who calls, as the transport received it.
#[derive(Clone, Copy, Debug)]
pub enum Credentials<'a> {
    /// The request's `Authorization` header value, `None` when absent. A header that is not text
    /// can never be a key: pass `"\0"`, which fails as malformed.
    Authorization(Option<&'a str>),
    /// The caller [`Api::authenticate`] found for this same request: the agent transports need
    /// a valid key for every message before they read its framing.
    Caller(&'a Caller),
    /// A caller whose request the transport already admitted ([`Api::admit_request`]): a console
    /// page is one request, counted once, however many operations render it.
    Admitted(&'a Caller),
}

/// An operation call's input as its transport read it: what REST carries in its path, query,
/// headers and body, and an agent tool call in its arguments.
#[derive(Debug, Default)]
pub struct Request {
    pub input: Input,
    /// `Idempotency-Key`, where the operation honours it.
    pub idempotency_key: Option<String>,
    /// The alias route the call came by (REST only); folded into the operation's input.
    pub alias: Option<&'static Alias>,
}

/// Reads a call's input. [`Api::call`] reads it only once the call is admitted, so a malformed
/// request is counted and carries the `RateLimit-*` headers too (decisions §8); REST reads its
/// body here.
pub trait ReadRequest: Send {
    fn read(self, op: &'static Operation) -> impl Future<Output = Result<Request, Problem>> + Send;
}

/// What [`Api::call`] answers: the operation's reply or the problem to render, and the caller's
/// rate budget once the rate limiter ran, for the `RateLimit-*` headers.
#[derive(Debug)]
pub struct Answer {
    pub result: Result<Reply, Problem>,
    pub rate: Option<RateStatus>,
}

impl Api {
    /// Runs `op`: authenticates `credentials`, admits the call, reads `request`, then checks the
    /// scope and the input and runs the handler, with `Idempotency-Key`'s claim, replay and store
    /// around it. `origin` (the transport and the request id) goes with the caller to the use
    /// cases, whose history entries carry it. Every transport runs every operation through here, so the order of the checks,
    /// limits and counting are the same on REST, MCP and A2A.
    ///
    /// No `#[tracing::instrument]` span: it runs on every request, and the operations' own spans
    /// name them.
    pub async fn call(
        &self,
        op: &'static Operation,
        credentials: Credentials<'_>,
        origin: Origin,
        request: impl ReadRequest,
    ) -> Answer {
        let mut rate = None;
        let result = self.run(op, credentials, origin, request, &mut rate).await;
        Answer { result, rate }
    }

    async fn run(
        &self,
        op: &'static Operation,
        credentials: Credentials<'_>,
        origin: Origin,
        request: impl ReadRequest,
        rate: &mut Option<RateStatus>,
    ) -> Result<Reply, Problem> {
        let (caller, admitted) = match credentials {
            Credentials::Authorization(header) => (self.authenticate(header).await?, false),
            Credentials::Caller(caller) => (caller.clone(), false),
            Credentials::Admitted(caller) => (caller.clone(), true),
        };
        let caller = &caller.with_origin(origin);
        if !admitted {
            match self.admit(op, caller).await {
                Ok(admission) => *rate = Some(admission.rate),
                Err((problem, refused_rate)) => {
                    *rate = refused_rate;
                    return Err(problem);
                }
            }
        }
        let Request {
            mut input,
            idempotency_key,
            alias,
        } = request.read(op).await?;
        let dry_run = take_dry_run(op, &mut input)?;
        if let Some(alias) = alias {
            // The scope first, as on the operation's own route, where it precedes every check of
            // the input.
            caller.require(op.scope)?;
            alias::fold(op, alias, &mut input)?;
        }
        self.dispatch(op, caller, input, idempotency_key.as_deref(), dry_run)
            .await
    }

    /// Lets one request of a transport that runs several operations for it (a console page)
    /// through the rate limit, the quota and the spend cap, counting it once; its operations
    /// then run with [`Credentials::Admitted`].
    pub async fn admit_request(&self, caller: &Caller) -> Result<(), Problem> {
        self.app
            .admit(caller, "console")
            .await
            .map(|_| ())
            .map_err(|refused| refused.error.into())
    }

    /// Lets one call of `op` through the rate limit, the quota and the spend cap, counting it
    /// (decisions §8). A refusal carries the rate budget when the limiter ran.
    async fn admit(
        &self,
        op: &Operation,
        caller: &Caller,
    ) -> Result<Admission, (Problem, Option<RateStatus>)> {
        self.app
            .admit(caller, op.name)
            .await
            .map_err(|refused| (refused.error.into(), refused.rate))
    }

    /// Runs an admitted `op` for `caller`: checks the scope, the query parameters and the body
    /// shape, and handles `Idempotency-Key` (claim, replay, store) around the handler.
    async fn dispatch(
        &self,
        op: &'static Operation,
        caller: &Caller,
        input: Input,
        idempotency_key: Option<&str>,
        dry_run: bool,
    ) -> Result<Reply, Problem> {
        caller.require(op.scope)?;
        check_query(op, &input)?;
        if op.body.is_some() && input.body.as_ref().is_some_and(|body| !body.is_object()) {
            return Err(Problem::bad_request(
                "the request body must be a JSON object",
            ));
        }
        if let Some(key) = idempotency_key.filter(|_| op.idempotency_key) {
            idempotency::check_key(key)?;
        }
        if dry_run {
            // Neither reads nor claims the idempotency key (decisions §24).
            return Box::pin(dry_run::run(self, op, caller, input)).await;
        }
        match idempotency_key {
            Some(key) if op.idempotency_key && op.claims_own_idempotency() => {
                let mut input = input;
                input.idempotency_key = Some(key.to_owned());
                (op.handler)(self, caller, input).await
            }
            // Boxed: inline, the claim, replay and store steps would make every call's future
            // larger, to be set up and moved on each request.
            Some(key) if op.idempotency_key => {
                Box::pin(idempotency::dispatch(self, op, caller, input, key)).await
            }
            _ => (op.handler)(self, caller, input).await,
        }
        .map(|reply| reply.declared(op))
    }
}
