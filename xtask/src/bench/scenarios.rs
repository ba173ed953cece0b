//! The scenarios, as data: what each sends, what it is compared with, and which targets
//! it answers to. A new request/response scenario is one more entry in [`SCENARIOS`]; the
//! background-work ones (webhook fan-out, sequence sends) are driven by `background.rs`;
//! [`PENDING`] says which are waiting for their feature.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rand::{rngs::StdRng, Rng};
use serde_json::json;

use super::http::{Req, Resp};

/// The data set the server holds, shared by every worker.
pub struct Ctx {
    pub contact_ids: Vec<String>,
    pub company_ids: Vec<String>,
    pub deal_ids: Vec<String>,
    /// Each deal's current version (its `ETag`), kept across runs; a deal belongs to one worker at
    /// a time (`i % workers == worker.id`), so `If-Match` never races.
    pub deal_versions: Vec<AtomicI64>,
    /// 3-letter substrings of the generated names.
    pub needles: Vec<String>,
    pub nonce: u64,
    /// The `crm_session` cookie of the console scenarios' viewer (console.rs).
    pub console_session: String,
    seeds: AtomicU64,
}

impl Ctx {
    pub fn new(
        contact_ids: Vec<String>,
        company_ids: Vec<String>,
        deals: Vec<(String, i64)>,
        needles: Vec<String>,
    ) -> Ctx {
        let (deal_ids, versions): (Vec<_>, Vec<_>) = deals.into_iter().unzip();
        Ctx {
            contact_ids,
            company_ids,
            deal_ids,
            deal_versions: versions.into_iter().map(AtomicI64::new).collect(),
            needles,
            nonce: rand::random::<u32>().into(),
            console_session: String::new(),
            seeds: AtomicU64::new(1),
        }
    }

    pub fn next_seed(&self) -> u64 {
        self.seeds
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One worker's state.
pub struct Worker {
    pub id: usize,
    pub workers: usize,
    pub n: u64,
    pub rng: StdRng,
    /// The record the last request was about (the deal `update_deal_stage` moved).
    pub last: usize,
}

/// What a scenario's throughput is compared with.
#[derive(Clone, Copy)]
pub enum Baseline {
    None,
    /// INSERT contact + INSERT event in one transaction, straight at the database.
    RawInsert,
    /// A primary-key SELECT of a contact, straight at the database.
    RawGet,
    /// The axum hello-world server answering this request of its own: the one whose answer
    /// is the size of the scenario's (docs/decisions.md, "Performance and the benchmark").
    Hello(&'static Scenario),
    /// Another scenario of [`SCENARIOS`], by name, on the same server: what a feature costs
    /// against the same request without it. The two alternate (ab.rs).
    Scenario(&'static str),
}

/// A target of docs/performance.md, checked against the run.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// API ÷ baseline throughput at this concurrency, at least `min` (per store: Postgres, SQLite).
    Ratio {
        concurrency: usize,
        postgres: f64,
        sqlite: f64,
    },
    /// Open-loop p99 at 32 connections at most this many ms (Postgres only: the figure).
    PostgresOpenP99 { max_ms: f64 },
    /// Open-loop median and p99 at most these (each store).
    OpenLatency { p50_ms: f64, p99_ms: f64 },
    /// Open-loop p99 at most this many ms (each store).
    OpenP99 { max_ms: f64 },
}

pub struct Scenario {
    pub name: &'static str,
    pub description: &'static str,
    pub make: fn(&Ctx, &mut Worker) -> Req,
    pub after: Option<fn(&Ctx, &mut Worker, &Resp)>,
    pub baseline: Baseline,
    /// Also measure tail latency open-loop at a fixed rate.
    pub open_loop: bool,
    /// Records written or read per request (100 for a batch).
    pub per_request: u32,
    pub targets: &'static [Target],
    /// Run at every concurrency (else at 32 only).
    pub all_concurrencies: bool,
}

const FIRST: &[&str] = &[
    "anna", "boris", "carla", "dmitri", "elena", "felix", "greta", "hugo", "ines", "jonas",
    "karin", "lukas", "maria", "nils", "olga", "pavel", "quinn", "rosa", "sven", "tara", "ugo",
    "vera", "wanda", "xaver", "yusuf", "zoe",
];
const LAST: &[&str] = &[
    "schmidt",
    "novak",
    "garcia",
    "rossi",
    "kowalski",
    "dubois",
    "jensen",
    "murphy",
    "silva",
    "tanaka",
    "okafor",
    "larsen",
    "moreau",
    "petrov",
    "haddad",
    "lindqvist",
    "fischer",
    "romero",
    "weber",
    "nakamura",
];

/// A deterministic name for record `n` (bulk data and API-created data alike).
pub fn name(n: u64) -> (&'static str, &'static str) {
    let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (
        FIRST[(h >> 20) as usize % FIRST.len()],
        LAST[(h >> 40) as usize % LAST.len()],
    )
}

/// Every 3-letter substring of the names: the search needles.
pub fn needles() -> Vec<String> {
    let mut out: Vec<String> = FIRST
        .iter()
        .chain(LAST)
        .flat_map(|w| (0..w.len().saturating_sub(2)).map(move |i| w[i..i + 3].to_owned()))
        .collect();
    // The rare surname of the bulk data (see data.rs), as often as any common needle.
    out.push("yxq".to_owned());
    out.sort();
    out.dedup();
    out
}

pub const TIERS: [&str; 3] = ["gold", "silver", "bronze"];

/// Values of the `region` text field: each common one on 1 contact in 5 ...
pub const REGIONS: [&str; 5] = ["emea", "amer", "apac", "latam", "anz"];
/// ... and this one on 1 in [`RARE_REGION_EVERY`] (bulk contacts; see data.rs).
pub const RARE_REGION: &str = "antarctica";
pub const RARE_REGION_EVERY: u64 = 5_000;

/// The region of record `n` (bulk data and API-created data alike).
pub fn region(n: u64) -> &'static str {
    if n % RARE_REGION_EVERY == RARE_REGION_EVERY / 2 {
        RARE_REGION
    } else {
        REGIONS[(n % 5) as usize]
    }
}

pub fn contact_body(ctx: &Ctx, rng: &mut StdRng, tag: &str) -> serde_json::Value {
    let n: u64 = rng.gen();
    let (first, last) = name(n);
    let company = &ctx.company_ids[rng.gen_range(0..ctx.company_ids.len())];
    let tier = TIERS[(n % 3) as usize];
    json!({
        "first_name": first,
        "last_name": last,
        "email": format!("{first}.{last}.{tag}@bench.example"),
        "phone": format!("+4930{:08}", n % 100_000_000),
        "type": "customer",
        "company_id": company,
        "custom_fields": {"tier": tier, "score": n % 1000, "region": region(n)},
    })
}

fn create_contact(ctx: &Ctx, w: &mut Worker) -> Req {
    // Unique across runs: every run seeds its workers afresh.
    let tag = format!("c{}-{:x}", ctx.nonce, w.rng.gen::<u64>());
    Req::with_body(
        "POST",
        "/v1/contacts",
        contact_body(ctx, &mut w.rng, &tag).to_string(),
    )
}

/// A dry run of [`create_contact`]: validation, the effects it would have, and a rolled-back
/// transaction.
fn dry_run_create(ctx: &Ctx, w: &mut Worker) -> Req {
    let tag = format!("d{}-{:x}", ctx.nonce, w.rng.gen::<u64>());
    Req::with_body(
        "POST",
        "/v1/contacts?dry_run=true",
        contact_body(ctx, &mut w.rng, &tag).to_string(),
    )
}

/// Upserts by email, half new and half existing: each even request of a worker brings a new
/// email, the odd one after it the same email again (an update of the contact just created).
fn upsert_contact(ctx: &Ctx, w: &mut Worker) -> Req {
    if w.n.is_multiple_of(2) {
        w.last = w.rng.gen::<u32>() as usize;
    }
    w.n += 1;
    let mut body = contact_body(ctx, &mut w.rng, "");
    body["email"] = format!("u{}-{}-{:x}@bench.example", ctx.nonce, w.id, w.last).into();
    Req::with_body("POST", "/v1/contacts/upsert", body.to_string())
}

/// The page [`data::load`](super::data::load) sets up for the reading scenarios: the 25
/// `partner` contacts, each of a different company.
const PARTNER_PAGE: &str = "/v1/contacts?type=partner&limit=25";

fn list_page(_: &Ctx, _: &mut Worker) -> Req {
    Req::get(PARTNER_PAGE)
}

fn list_expand_company(_: &Ctx, _: &mut Worker) -> Req {
    Req::get(format!("{PARTNER_PAGE}&expand=company"))
}

fn list_fields(_: &Ctx, _: &mut Worker) -> Req {
    Req::get(format!("{PARTNER_PAGE}&fields=id,email"))
}

fn get_contact(ctx: &Ctx, w: &mut Worker) -> Req {
    let id = &ctx.contact_ids[w.rng.gen_range(0..ctx.contact_ids.len())];
    Req::get(format!("/v1/contacts/{id}"))
}

fn list_filtered(ctx: &Ctx, w: &mut Worker) -> Req {
    let company = &ctx.company_ids[w.rng.gen_range(0..ctx.company_ids.len())];
    Req::get(format!("/v1/contacts?company_id={company}&limit=25"))
}

/// The deal this worker moves next: its own share of the deals, in turn.
fn my_deal(ctx: &Ctx, w: &mut Worker) -> usize {
    let mine = (ctx.deal_ids.len() - w.id).div_ceil(w.workers).max(1);
    let i = w.id + (w.n as usize % mine) * w.workers;
    w.n += 1;
    i.min(ctx.deal_ids.len() - 1)
}

/// Half the requests ask for the rare region (a few hundred contacts in a million: a plan that
/// walks the tenant newest first and filters would read all of it), half for a common one (a
/// fifth of the tenant: a plan that collects the matches and sorts them would sort 200,000).
fn custom_field_filter(_: &Ctx, w: &mut Worker) -> Req {
    let value = if w.rng.gen_bool(0.5) {
        RARE_REGION
    } else {
        REGIONS[w.rng.gen_range(0..REGIONS.len())]
    };
    Req::get(format!(
        "/v1/contacts?custom_fields.region={value}&limit=25"
    ))
}

fn update_deal_stage(ctx: &Ctx, w: &mut Worker) -> Req {
    let i = my_deal(ctx, w);
    let version = ctx.deal_versions[i].load(Ordering::Relaxed);
    let stage = if version % 2 == 0 {
        "qualified"
    } else {
        "proposal"
    };
    w.last = i;
    Req::with_body(
        "PATCH",
        format!("/v1/deals/{}", ctx.deal_ids[i]),
        json!({"stage": stage}).to_string(),
    )
    .header(format!("If-Match: \"{version}\""))
}

/// Keeps the deal's version in step with the server: its new `ETag` on success.
fn after_update_deal(ctx: &Ctx, w: &mut Worker, resp: &Resp) {
    if let Some(v) = resp
        .etag
        .as_deref()
        .and_then(|e| e.trim_start_matches("W/").trim_matches('"').parse().ok())
    {
        ctx.deal_versions[w.last].store(v, Ordering::Relaxed);
    }
}

fn search(ctx: &Ctx, w: &mut Worker) -> Req {
    let q = &ctx.needles[w.rng.gen_range(0..ctx.needles.len())];
    Req::get(format!("/v1/search?q={q}&limit=10"))
}

fn batch_100(ctx: &Ctx, w: &mut Worker) -> Req {
    let batch: u64 = w.rng.gen();
    let ops: Vec<_> = (0..100)
        .map(|k| {
            let tag = format!("b{}-{batch:x}-{k}", ctx.nonce);
            json!({"op": "create", "object": "contact", "data": contact_body(ctx, &mut w.rng, &tag)})
        })
        .collect();
    Req::with_body("POST", "/v1/batch", json!({"operations": ops}).to_string())
}

/// A console page as the viewer's browser asks for it.
fn console_page(ctx: &Ctx, path: &str) -> Req {
    Req::get(path).header(format!("Cookie: crm_session={}", ctx.console_session))
}

fn console_board(ctx: &Ctx, _: &mut Worker) -> Req {
    console_page(ctx, super::console::BOARD)
}

fn console_contacts(ctx: &Ctx, _: &mut Worker) -> Req {
    console_page(ctx, super::console::CONTACTS)
}

fn middleware_only(_: &Ctx, _: &mut Worker) -> Req {
    Req::get("/v1/automations-capabilities")
}

fn middleware_small_body(_: &Ctx, _: &mut Worker) -> Req {
    Req::get("/v1/settings")
}

fn hello(_: &Ctx, _: &mut Worker) -> Req {
    Req::get("/")
}

fn hello_body(_: &Ctx, _: &mut Worker) -> Req {
    Req::get("/body")
}

pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "create_contact",
        description: "POST /v1/contacts (with company, type and 3 custom fields; writes the contact and its event)",
        make: create_contact,
        after: None,
        baseline: Baseline::RawInsert,
        open_loop: true,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.70, sqlite: 0.50 }, Target::PostgresOpenP99 { max_ms: 15.0 }],
        all_concurrencies: true,
    },
    Scenario {
        name: "get_contact",
        description: "GET /v1/contacts/{id} (random id of the data set)",
        make: get_contact,
        after: None,
        baseline: Baseline::RawGet,
        open_loop: true,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.40, sqlite: 0.30 }, Target::PostgresOpenP99 { max_ms: 8.0 }],
        all_concurrencies: true,
    },
    Scenario {
        name: "list_filtered",
        description: "GET /v1/contacts?company_id=…&limit=25 (a page of 25, newest first, filtered)",
        make: list_filtered,
        after: None,
        baseline: Baseline::None,
        open_loop: false,
        per_request: 1,
        targets: &[],
        all_concurrencies: true,
    },
    Scenario {
        name: "custom_field_filter_newest_first",
        description: "GET /v1/contacts?custom_fields.region=<v>&limit=25: v on 1 contact in 5 or 1 in 5,000, newest first",
        make: custom_field_filter,
        after: None,
        baseline: Baseline::None,
        open_loop: true,
        per_request: 1,
        targets: &[Target::OpenP99 { max_ms: 300.0 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "update_deal_stage",
        description: "PATCH /v1/deals/{id} {stage} with If-Match (each worker moves its own deals)",
        make: update_deal_stage,
        after: Some(after_update_deal),
        baseline: Baseline::None,
        open_loop: false,
        per_request: 1,
        targets: &[],
        all_concurrencies: true,
    },
    Scenario {
        name: "search",
        description: "GET /v1/search?q=<3 letters>&limit=10 over all contacts, companies and deals",
        make: search,
        after: None,
        baseline: Baseline::None,
        open_loop: true,
        per_request: 1,
        targets: &[Target::OpenLatency { p50_ms: 50.0, p99_ms: 150.0 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "dry_run_create",
        description: "POST /v1/contacts?dry_run=true (create_contact's body: validated, its effects listed, nothing kept)",
        make: dry_run_create,
        after: None,
        baseline: Baseline::RawInsert,
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.50, sqlite: 0.50 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "upsert_contact",
        description: "POST /v1/contacts/upsert by email: half new emails, half the one just upserted (an update)",
        make: upsert_contact,
        after: None,
        baseline: Baseline::Scenario("create_contact"),
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.70, sqlite: 0.70 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "list_page",
        description: "GET /v1/contacts?type=partner&limit=25: a page of 25 contacts of 25 different companies",
        make: list_page,
        after: None,
        baseline: Baseline::None,
        open_loop: false,
        per_request: 1,
        targets: &[],
        all_concurrencies: false,
    },
    Scenario {
        name: "list_expand_company",
        description: "list_page with expand=company: each contact's company inline",
        make: list_expand_company,
        after: None,
        baseline: Baseline::Scenario("list_page"),
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.70, sqlite: 0.70 }],
        all_concurrencies: false,
    },
    // "No slower than without": at least 95 %, the spread of an alternated pair on this machine.
    Scenario {
        name: "list_fields",
        description: "list_page with fields=id,email",
        make: list_fields,
        after: None,
        baseline: Baseline::Scenario("list_page"),
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.95, sqlite: 0.95 }],
        all_concurrencies: false,
    },
    // Console pages rendered on the server (issue 38): p99 ≤ 100 ms each.
    Scenario {
        name: "console_board",
        description: "GET / (the board) of the 500-deal pipeline: 50 cards a column, totals from the server",
        make: console_board,
        after: None,
        baseline: Baseline::None,
        open_loop: true,
        per_request: 1,
        targets: &[Target::OpenP99 { max_ms: 100.0 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "console_contacts",
        description: "GET /contacts: the first page of the contact list over every contact",
        make: console_contacts,
        after: None,
        baseline: Baseline::None,
        open_loop: true,
        per_request: 1,
        targets: &[Target::OpenP99 { max_ms: 100.0 }],
        all_concurrencies: false,
    },
    Scenario {
        name: "batch_100",
        description: "POST /v1/batch with 100 contact creates (throughput counts requests; ×100 for contacts)",
        make: batch_100,
        after: None,
        baseline: Baseline::None,
        open_loop: false,
        per_request: 100,
        targets: &[],
        all_concurrencies: false,
    },
    // The stack on a no-database route, twice: each against hello-world answering a body of
    // its own answer's size, so that the ratio is the stack's cost and not the bytes' (a 4 KB
    // answer alone takes hello-world to about 81 % of its 13-byte self; docs/performance.md).
    Scenario {
        name: "middleware_only",
        description: "GET /v1/automations-capabilities: auth, rate limit, metering, tracing; no record read; a 4 KB body",
        make: middleware_only,
        after: None,
        baseline: Baseline::Hello(&HELLO_BODY),
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.80, sqlite: 0.80 }],
        all_concurrencies: true,
    },
    Scenario {
        name: "middleware_small_body",
        description: "GET /v1/settings: auth, rate limit, tracing (exempt from metering); a 45-byte body; no record read",
        make: middleware_small_body,
        after: None,
        baseline: Baseline::Hello(&HELLO),
        open_loop: false,
        per_request: 1,
        targets: &[Target::Ratio { concurrency: 32, postgres: 0.80, sqlite: 0.80 }],
        all_concurrencies: true,
    },
];

/// A scenario of the tiny axum server (not crm-server): a ceiling row, without a target.
const fn ceiling(
    name: &'static str,
    description: &'static str,
    make: fn(&Ctx, &mut Worker) -> Req,
) -> Scenario {
    Scenario {
        name,
        description,
        make,
        after: None,
        baseline: Baseline::None,
        open_loop: false,
        per_request: 1,
        targets: &[],
        all_concurrencies: true,
    }
}

/// The hello-world ceiling.
pub static HELLO: Scenario = ceiling("hello_world", "GET / on a bare axum hello-world", hello);

/// The hello-world answering a body of `middleware_only`'s size: that scenario's ceiling, and how
/// much a 4 KB answer costs by itself against `hello_world`.
pub static HELLO_BODY: Scenario = ceiling(
    "hello_world_body",
    "GET /body on the bare axum hello-world: a static body the size of middleware_only's",
    hello_body,
);

/// The scenario of [`SCENARIOS`] called `name`.
pub fn named(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Scenarios docs/performance.md asks for that cannot run yet, and why.
pub static PENDING: &[(&str, &str)] = &[];

/// The contact creates that drive `webhook_fanout` (open loop at a fixed rate; see background.rs).
pub static WEBHOOK_CREATES: Scenario = Scenario {
    name: "webhook_fanout",
    description: "POST /v1/contacts at a fixed rate, each event delivered to 5 test-mode webhooks at a local receiver",
    make: create_contact,
    after: None,
    baseline: Baseline::None,
    open_loop: true,
    per_request: 1,
    targets: &[],
    all_concurrencies: false,
};

/// The mixed load of the WAL and stability run: 60 % get, 20 % create, 10 % deal stage moves,
/// 10 % search.
fn mixed(ctx: &Ctx, w: &mut Worker) -> Req {
    w.last = usize::MAX;
    match w.rng.gen_range(0..10) {
        0..=5 => get_contact(ctx, w),
        6 | 7 => create_contact(ctx, w),
        8 => update_deal_stage(ctx, w),
        _ => search(ctx, w),
    }
}

fn after_mixed(ctx: &Ctx, w: &mut Worker, resp: &Resp) {
    if w.last != usize::MAX {
        after_update_deal(ctx, w, resp);
    }
}

pub static MIXED: Scenario = Scenario {
    name: "mixed",
    description:
        "60 % get, 20 % create, 10 % deal stage (If-Match), 10 % search; closed loop at 32",
    make: mixed,
    after: Some(after_mixed),
    baseline: Baseline::None,
    open_loop: false,
    per_request: 1,
    targets: &[],
    all_concurrencies: false,
};
