//! `fields=` and `expand=` on the reads of contacts, companies, deals and activities (decisions
//! §19, §23, §24): which members each record carries, and which related records ride along.
//!
//! A read that names neither answers through its typed body as before, with nothing built here;
//! only a read that asks for a shape turns its bodies into documents to cut and extend.

use std::sync::LazyLock;

use crm_app::{
    related::{Related, RelatedIds},
    Caller, Scope,
};
use crm_domain::{CompanyId, ContactId, DealId, ObjectKind};
use serde_json::Value;

pub(crate) mod cells;
mod shaped;

pub use shaped::Record;
use shaped::{RelatedBodies, RelatedBody, Shaped};

use crate::{
    bodies::{CompanyBody, ContactBody, DealBody, ListBody, Versioned},
    operation::{Input, ParamKind, QueryParam, Reply},
    schema::{property_names, schema_of},
    Api, Problem,
};

/// `fields=a,b,custom_fields.k`.
pub const FIELDS: &str = "fields";

/// `expand=company,primary_contact`.
pub const EXPAND: &str = "expand";

/// What a list of names may hold between its items (and [`names`] trims): written out, since
/// `\s` differs between regular-expression dialects and from Rust's notion of white space.
const LIST_BLANKS: [char; 4] = [' ', '\t', '\n', '\r'];
const LIST_BLANKS_CLASS: &str = "[ \\t\\n\\r]*";

/// A regular expression matching exactly the comma-separated lists [`names`] accepts: items of
/// `names` (and `custom_fields.<key>` when `custom`), blanks around them and empty items allowed.
fn list_pattern(names: &[&str], custom: bool) -> String {
    let mut items: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
    if custom {
        let key = crm_domain::registry::KEY_PATTERN
            .trim_start_matches('^')
            .trim_end_matches('$');
        items.push(format!("custom_fields\\.{key}"));
    }
    let item = format!(
        "{LIST_BLANKS_CLASS}(?:{})?{LIST_BLANKS_CLASS}",
        items.join("|")
    );
    format!("^{item}(?:,{item})*$")
}

fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let escape = !(c.is_ascii_alphanumeric() || c == '_');
            escape.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// The `fields` parameter of one object's reads, its pattern built from the body's members.
macro_rules! fields_param {
    ($object:ident, $param:ident) => {
        pub const $param: QueryParam = QueryParam {
            name: FIELDS,
            kind: ParamKind::Computed(|| {
                static PATTERN: LazyLock<String> = LazyLock::new(|| {
                    let members: Vec<&str> = $object.members.iter().map(String::as_str).collect();
                    list_pattern(&members, true)
                });
                &PATTERN
            }),
            required: false,
            description: "Comma-separated members to return (id and object always come), e.g. `email,custom_fields.tier`.",
        };
    };
}

/// The `expand` parameter of one object's reads, its pattern built from the relations.
macro_rules! expand_param {
    ($object:ident, $param:ident, $description:literal) => {
        pub const $param: QueryParam = QueryParam {
            name: EXPAND,
            kind: ParamKind::Computed(|| {
                static PATTERN: LazyLock<String> = LazyLock::new(|| {
                    let names: Vec<&str> = $object.relations.iter().map(|r| r.name).collect();
                    list_pattern(&names, false)
                });
                &PATTERN
            }),
            required: false,
            description: $description,
        };
    };
}

fields_param!(CONTACT, CONTACT_FIELDS);
fields_param!(COMPANY, COMPANY_FIELDS);
fields_param!(DEAL, DEAL_FIELDS);
fields_param!(ACTIVITY, ACTIVITY_FIELDS);
expand_param!(
    CONTACT,
    CONTACT_EXPAND,
    "Related records to add: `company`."
);
expand_param!(
    DEAL,
    DEAL_EXPAND,
    "Related records to add: `company`, `primary_contact`."
);
expand_param!(
    ACTIVITY,
    ACTIVITY_EXPAND,
    "Related records to add: `contact`, `deal`."
);

/// Whether `op` answers records a request may shape with `fields=`.
pub fn is_shaped(op: &crate::Operation) -> bool {
    op.query.iter().any(|q| q.name == FIELDS)
}

/// The inline schema of what a shaped read answers (decisions §24): its records (a list's items,
/// or the body itself) require only `id` and `object`, since `fields=` may leave the rest out.
pub fn shaped_schema(mut schema: Value) -> Value {
    let record = match schema.pointer_mut("/properties/data/items") {
        Some(items) => items,
        None => &mut schema,
    };
    if let Some(required) = record.get_mut("required") {
        *required = Value::from(ALWAYS.to_vec());
    }
    schema
}

/// The members every projected record keeps.
const ALWAYS: [&str; 2] = ["id", "object"];

/// The kind of record a relation points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Contact,
    Company,
    Deal,
}

impl Target {
    /// The scope resource whose `:read` expanding it needs (decisions §24).
    fn resource(self) -> &'static str {
        match self {
            Target::Contact => "contacts",
            Target::Company => "companies",
            Target::Deal => "deals",
        }
    }
}

/// A relation `expand=` may name: the record `id_field` points at, added under `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relation {
    pub name: &'static str,
    pub id_field: &'static str,
    pub target: Target,
}

/// What one object's reads may be shaped by.
pub struct Object {
    pub kind: ObjectKind,
    /// The members of its body (`fields=` names these or `custom_fields.<key>`).
    members: &'static LazyLock<Vec<String>>,
    pub relations: &'static [Relation],
}

static CONTACT_MEMBERS: LazyLock<Vec<String>> =
    LazyLock::new(|| property_names(&schema_of::<ContactBody>()));
static COMPANY_MEMBERS: LazyLock<Vec<String>> =
    LazyLock::new(|| property_names(&schema_of::<CompanyBody>()));
static DEAL_MEMBERS: LazyLock<Vec<String>> =
    LazyLock::new(|| property_names(&schema_of::<DealBody>()));
static ACTIVITY_MEMBERS: LazyLock<Vec<String>> =
    LazyLock::new(|| property_names(&schema_of::<crate::bodies::ActivityBody>()));

pub static CONTACT: Object = Object {
    kind: ObjectKind::Contact,
    members: &CONTACT_MEMBERS,
    relations: &[Relation {
        name: "company",
        id_field: "company_id",
        target: Target::Company,
    }],
};
pub static COMPANY: Object = Object {
    kind: ObjectKind::Company,
    members: &COMPANY_MEMBERS,
    relations: &[],
};
pub static DEAL: Object = Object {
    kind: ObjectKind::Deal,
    members: &DEAL_MEMBERS,
    relations: &[
        Relation {
            name: "company",
            id_field: "company_id",
            target: Target::Company,
        },
        Relation {
            name: "primary_contact",
            id_field: "primary_contact_id",
            target: Target::Contact,
        },
    ],
};
pub static ACTIVITY: Object = Object {
    kind: ObjectKind::Activity,
    members: &ACTIVITY_MEMBERS,
    relations: &[
        Relation {
            name: "contact",
            id_field: "contact_id",
            target: Target::Contact,
        },
        Relation {
            name: "deal",
            id_field: "deal_id",
            target: Target::Deal,
        },
    ],
};

impl Object {
    /// The shape rules of `kind`'s reads.
    pub fn of(kind: ObjectKind) -> Option<&'static Object> {
        [&CONTACT, &COMPANY, &DEAL, &ACTIVITY]
            .into_iter()
            .find(|o| o.kind == kind)
    }
}

/// The members `fields=` kept: built-in ones by name, custom fields by key.
#[derive(Debug, Default, PartialEq)]
struct Selection {
    members: Vec<String>,
    custom: Vec<String>,
}

impl Selection {
    fn keeps(&self, member: &str) -> bool {
        ALWAYS.contains(&member)
            || self.members.iter().any(|m| m == member)
            || (member == "custom_fields" && !self.custom.is_empty())
    }

    /// Whether `custom_fields` is cut to the keys named (it was not named whole).
    fn cuts_custom(&self) -> bool {
        !self.members.iter().any(|m| m == "custom_fields")
    }
}

/// How a read's records are shaped; absent ([`Shape::read`] answers `None`) when the request
/// names neither `fields` nor `expand`.
#[derive(Debug)]
pub struct Shape {
    fields: Option<Selection>,
    expand: Vec<Relation>,
}

/// The names of a comma-separated parameter, blanks dropped; `None` when it is absent or blank.
fn names<'i>(input: &'i Input, param: &str) -> Option<Vec<&'i str>> {
    let names: Vec<&str> = input
        .query_str(param)?
        .split(',')
        .map(|n| n.trim_matches(LIST_BLANKS))
        .filter(|n| !n.is_empty())
        .collect();
    (!names.is_empty()).then_some(names)
}

fn unknown(param: &str, name: &str, valid: Vec<String>) -> Problem {
    let mut p = Problem::bad_request(format!("unknown name `{name}` in `{param}`"))
        .with("field", param)
        .with("valid_options", valid.clone());
    if let Some(s) = crm_domain::suggest::closest(name, valid.iter().map(String::as_str)) {
        p = p.with("suggestion", format!("did you mean `{s}`?"));
    }
    p
}

impl Shape {
    /// The shape `input` asks for on a read of `object`: unknown names are 400 `bad_request`
    /// with `valid_options`, and expanding a relation needs its object's `:read` scope (403).
    pub async fn read(
        api: &Api,
        caller: &Caller,
        input: &Input,
        object: &Object,
    ) -> Result<Option<Shape>, Problem> {
        let fields = names(input, FIELDS);
        let expand = names(input, EXPAND);
        if fields.is_none() && expand.is_none() {
            return Ok(None);
        }
        let mut relations: Vec<Relation> = Vec::new();
        for name in expand.unwrap_or_default() {
            let Some(relation) = object.relations.iter().find(|r| r.name == name) else {
                let valid = object.relations.iter().map(|r| r.name.to_owned()).collect();
                return Err(unknown(EXPAND, name, valid));
            };
            caller.require(Scope::read(relation.target.resource()))?;
            if !relations.contains(relation) {
                relations.push(*relation);
            }
        }
        let fields = match fields {
            None => None,
            Some(names) => Some(Self::selection(api, caller, object, &names).await?),
        };
        Ok(Some(Shape {
            fields,
            expand: relations,
        }))
    }

    async fn selection(
        api: &Api,
        caller: &Caller,
        object: &Object,
        names: &[&str],
    ) -> Result<Selection, Problem> {
        let members: &[String] = object.members;
        let mut selection = Selection::default();
        let mut registered: Option<Vec<String>> = None;
        for name in names {
            if members.iter().any(|m| m == name) {
                if !selection.members.iter().any(|m| m == name) {
                    selection.members.push((*name).to_owned());
                }
                continue;
            }
            let key = name.strip_prefix("custom_fields.");
            if registered.is_none() {
                // The registry (cached) is read only for a custom key or to list the valid names.
                registered = Some(api.app.custom_field_keys(caller, object.kind).await?);
            }
            let keys = registered.as_deref().unwrap_or_default();
            match key {
                Some(key) if keys.iter().any(|k| k == key) => {
                    if !selection.custom.iter().any(|k| k == key) {
                        selection.custom.push(key.to_owned());
                    }
                }
                _ => {
                    let valid = members
                        .iter()
                        .cloned()
                        .chain(keys.iter().map(|k| format!("custom_fields.{k}")))
                        .collect();
                    return Err(unknown(FIELDS, name, valid));
                }
            }
        }
        Ok(selection)
    }

    /// One record's answer in this shape; its version stays the `ETag`.
    pub async fn one<B: Record + Versioned>(
        &self,
        api: &Api,
        caller: &Caller,
        body: &B,
    ) -> Result<Reply, Problem> {
        let related = self
            .related(api, caller, std::slice::from_ref(body))
            .await?;
        let mut reply = Reply::serialized(&self.of(body, &related));
        reply.etag = Some(body.version());
        Ok(reply)
    }

    /// A page's answer in this shape: each relation read once for the whole page.
    pub async fn page<B: Record>(
        &self,
        api: &Api,
        caller: &Caller,
        list: ListBody<B>,
    ) -> Result<Reply, Problem> {
        let related = self.related(api, caller, &list.data).await?;
        Ok(Reply::serialized(&ListBody {
            object: list.object,
            data: list.data.iter().map(|b| self.of(b, &related)).collect(),
            has_more: list.has_more,
            next_cursor: list.next_cursor,
        }))
    }

    fn of<'a, B>(&'a self, body: &'a B, related: &'a RelatedBodies) -> Shaped<'a, B> {
        Shaped {
            body,
            shape: self,
            related,
        }
    }

    /// The related records of `records`, by id.
    async fn related<B: Record>(
        &self,
        api: &Api,
        caller: &Caller,
        records: &[B],
    ) -> Result<RelatedBodies, Problem> {
        if self.expand.is_empty() {
            return Ok(RelatedBodies::new());
        }
        let mut ids = RelatedIds::default();
        for relation in &self.expand {
            for id in records
                .iter()
                .filter_map(|r| r.related_id(relation.id_field))
            {
                match relation.target {
                    Target::Contact => {
                        push_new(&mut ids.contacts, ContactId::from_trusted(id.to_owned()))
                    }
                    Target::Company => {
                        push_new(&mut ids.companies, CompanyId::from_trusted(id.to_owned()))
                    }
                    Target::Deal => push_new(&mut ids.deals, DealId::from_trusted(id.to_owned())),
                }
            }
        }
        let Related {
            contacts,
            companies,
            deals,
        } = api.app.read_related(caller, ids).await?;
        let contacts = contacts
            .iter()
            .map(|c| (c.id.to_string(), RelatedBody::Contact(c.into())));
        let companies = companies
            .iter()
            .map(|c| (c.id.to_string(), RelatedBody::Company(c.into())));
        let deals = deals
            .iter()
            .map(|d| (d.id.to_string(), RelatedBody::Deal(d.into())));
        Ok(contacts.chain(companies).chain(deals).collect())
    }
}

fn push_new<T: PartialEq>(ids: &mut Vec<T>, id: T) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(fields: Option<Selection>, expand: &[Relation]) -> Shape {
        Shape {
            fields,
            expand: expand.to_vec(),
        }
    }

    fn custom(value: Value) -> crm_domain::JsonMap {
        value.as_object().cloned().unwrap()
    }

    fn contact() -> ContactBody {
        ContactBody {
            id: "con_1".into(),
            object: "contact",
            first_name: Some("Ada".into()),
            last_name: None,
            email: Some("a@b.c".into()),
            phone: None,
            linkedin_url: None,
            company_id: Some("cmp_1".into()),
            contact_type: None,
            owner_id: None,
            custom_fields: custom(json!({"tier": "gold", "score": 3})),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            version: 2,
            deleted_at: None,
            merged_into: None,
        }
    }

    fn company() -> CompanyBody {
        CompanyBody {
            id: "cmp_1".into(),
            object: "company",
            name: "Acme".into(),
            domain: None,
            owner_id: None,
            custom_fields: custom(json!({})),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            version: 1,
            deleted_at: None,
            merged_into: None,
        }
    }

    /// What `body` answers in `shape`, read back as a document.
    fn shaped<B: Record>(shape: &Shape, body: &B, related: &RelatedBodies) -> Value {
        let text = serde_json::to_string(&shape.of(body, related)).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn fields_keep_id_object_and_the_named_members_and_keys() {
        let s = shape(
            Some(Selection {
                members: vec!["email".into()],
                custom: vec!["tier".into()],
            }),
            &[],
        );
        assert_eq!(
            shaped(&s, &contact(), &RelatedBodies::new()),
            json!({"id": "con_1", "object": "contact", "email": "a@b.c", "custom_fields": {"tier": "gold"}})
        );
    }

    #[test]
    fn custom_fields_named_whole_keep_every_key() {
        let s = shape(
            Some(Selection {
                members: vec!["custom_fields".into()],
                custom: vec!["tier".into()],
            }),
            &[],
        );
        let out = shaped(&s, &contact(), &RelatedBodies::new());
        assert_eq!(out["custom_fields"], json!({"tier": "gold", "score": 3}));
    }

    #[test]
    fn no_fields_keeps_the_whole_body() {
        let out = shaped(&shape(None, &[]), &contact(), &RelatedBodies::new());
        assert_eq!(out, serde_json::to_value(contact()).unwrap());
    }

    #[test]
    fn an_expanded_relation_follows_its_id_and_is_null_without_one() {
        let deal = DealBody {
            id: "deal_1".into(),
            object: "deal",
            title: "x".into(),
            pipeline: "sales".into(),
            pipeline_id: "pip_1".into(),
            stage: "lead".into(),
            stage_type: "open",
            primary_contact_id: None,
            company_id: Some("cmp_1".into()),
            value_cents: None,
            currency: None,
            close_date: None,
            owner_id: None,
            custom_fields: custom(json!({})),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            version: 1,
            deleted_at: None,
        };
        let related = RelatedBodies::from([("cmp_1".into(), RelatedBody::Company(company()))]);
        let out = shaped(&shape(None, DEAL.relations), &deal, &related);
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(
            keys[..9],
            [
                "id",
                "object",
                "title",
                "pipeline",
                "pipeline_id",
                "stage",
                "stage_type",
                "primary_contact_id",
                "primary_contact",
            ]
        );
        assert_eq!(keys[9..11], ["company_id", "company"]);
        assert_eq!(out["primary_contact"], Value::Null);
        assert_eq!(out["company"], serde_json::to_value(company()).unwrap());
    }

    #[test]
    fn a_relation_is_added_when_fields_leave_its_id_out() {
        let s = shape(
            Some(Selection {
                members: vec!["email".into()],
                custom: vec![],
            }),
            CONTACT.relations,
        );
        let related = RelatedBodies::from([("cmp_1".into(), RelatedBody::Company(company()))]);
        let out = shaped(&s, &contact(), &related);
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["id", "object", "email", "company"]);
    }

    #[test]
    fn members_are_the_body_properties() {
        assert!(CONTACT_MEMBERS.iter().any(|m| m == "email"));
        assert!(DEAL_MEMBERS.iter().any(|m| m == "stage"));
        assert!(ACTIVITY_MEMBERS.iter().any(|m| m == "contact_id"));
        assert!(COMPANY_MEMBERS.iter().any(|m| m == "domain"));
    }

    /// What the documented pattern of `param` matches, [`names`] reads as known names only.
    fn pattern_names_are_known(param: QueryParam, known: &[&str]) {
        let ParamKind::Computed(pattern) = param.kind else {
            panic!("{} has no computed pattern", param.name);
        };
        let re = pattern().trim_start_matches('^').trim_end_matches('$');
        let strategy = proptest::string::string_regex(re).unwrap();
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&strategy, |value| {
                for item in value.split(',').map(|n| n.trim_matches(LIST_BLANKS)) {
                    let custom = item
                        .strip_prefix("custom_fields.")
                        .is_some_and(|k| !k.is_empty());
                    proptest::prop_assert!(
                        item.is_empty() || known.contains(&item) || custom,
                        "{value:?}"
                    );
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_documented_patterns_match_only_names_the_reads_know() {
        let members: Vec<&str> = CONTACT_MEMBERS.iter().map(String::as_str).collect();
        pattern_names_are_known(CONTACT_FIELDS, &members);
        pattern_names_are_known(DEAL_EXPAND, &["company", "primary_contact"]);
        let ParamKind::Computed(pattern) = CONTACT_FIELDS.kind else {
            unreachable!()
        };
        assert!(!pattern().contains("\\s"), "blanks are spelled out");
    }
}
