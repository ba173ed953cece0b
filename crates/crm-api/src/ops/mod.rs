//! The operations, one module per resource. Each module declares its request DTOs (with JSON
//! Schemas), converts them to domain types, answers with the response bodies of
//! [`crate::bodies`], and lists its [`Operation`]s.

pub mod activities;
pub mod audit;
pub mod automations;
pub mod batch;
pub mod companies;
pub mod contacts;
pub mod deals;
pub mod discovery;
pub mod email;
pub mod erase;
pub mod events;
pub mod exports;
pub mod history;
pub mod imports;
pub mod keys;
pub mod merges;
pub mod pipeline_totals;
pub mod pipelines;
pub mod registry;
pub mod search;
pub mod sequences;
pub mod usage;
pub mod users;
pub mod webhooks;

/// Declares a handler: an async body turned into the catalog's boxed-future fn pointer.
macro_rules! handler {
    ($name:ident($api:ident, $caller:ident, $input:ident) $body:block) => {
        fn $name<'a>(
            $api: &'a $crate::Api,
            $caller: &'a crm_app::Caller,
            $input: $crate::operation::Input,
        ) -> $crate::operation::HandlerFuture<'a> {
            Box::pin(async move $body)
        }
    };
}
pub(crate) use handler;

/// A version no record has (versions start at 1): what a weak `If-Match` tag stands for, so that
/// the update answers 412 `version_conflict` with `current_version`, as any other mismatch does.
const NO_VERSION: i64 = 0;

/// What [`if_match`] accepts, for the OpenAPI document: `*`, or a version bare, quoted or in a
/// weak tag (up to 18 digits, so that every such value fits an `i64`); a weak tag is well-formed
/// but never matches.
pub(crate) const IF_MATCH_PATTERN: &str = r#"^(\*|[0-9]{1,18}|"[0-9]{1,18}"|W/"[0-9]{1,18}")$"#;

/// `If-Match` (decisions §2, §22): `"<version>"`, a bare version or `*` (no precondition). The
/// comparison is strong (RFC 9110 §13.1.1): a weak tag such as `W/"3"` never matches. Anything
/// else, an unbalanced quote included, is 400 `bad_request`, never a match.
pub(crate) fn if_match(raw: Option<&str>) -> Result<Option<i64>, crate::Problem> {
    let Some(raw) = raw.map(str::trim) else {
        return Ok(None);
    };
    if raw == "*" {
        return Ok(None);
    }
    let bad = || {
        crate::Problem::bad_request("If-Match must be a record version such as \"3\", or *")
            .with("field", "If-Match")
    };
    let (weak, tag) = match raw.strip_prefix("W/") {
        Some(tag) => (true, tag),
        None => (false, raw),
    };
    let version = match tag.strip_prefix('"') {
        Some(quoted) => quoted.strip_suffix('"').ok_or_else(bad)?,
        None if weak => return Err(bad()),
        None => tag,
    };
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let version = version.parse::<i64>().map_err(|_| bad())?;
    Ok(Some(if weak { NO_VERSION } else { version }))
}

/// `match` of an upsert: the unique custom field to match on (decisions §24), spelled
/// `custom_fields.<key>` with a key's shape (`crm_domain::registry::KEY_PATTERN`).
pub(crate) const MATCH_PATTERN: &str = r"^custom_fields\.[a-z][a-z0-9_]{0,63}$";

pub(crate) const MATCH: crate::operation::QueryParam = crate::operation::QueryParam::pattern(
    "match",
    MATCH_PATTERN,
    "`custom_fields.<key>` of a unique field to match on.",
);

/// The key `match=custom_fields.<key>` names, if given; anything not in [`MATCH_PATTERN`]'s
/// shape is 400 `bad_request`, so that the server takes exactly what the document states.
pub(crate) fn match_key(input: &crate::Input) -> Result<Option<String>, crate::Problem> {
    parse_match(input.query_str("match"))
}

/// The key a `match` of `custom_fields.<key>` (query parameter, or a batch upsert's member)
/// names; anything not in that shape is 400 `bad_request`.
pub(crate) fn parse_match(raw: Option<&str>) -> Result<Option<String>, crate::Problem> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match raw
        .strip_prefix("custom_fields.")
        .filter(|key| crm_domain::registry::check_key("match", key).is_ok())
    {
        Some(key) => Ok(Some(key.to_owned())),
        None => Err(crate::Problem::bad_request(
            "match must be custom_fields.<key> of a unique custom field",
        )
        .with("field", "match")),
    }
}

/// A string filter that may be given empty: empty means "not filtered".
pub(crate) fn filter_value(input: &crate::Input, name: &str) -> Option<String> {
    input
        .query_str(name)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `owner_id=`: the records a user owns (decisions §24), on the contact, company and deal lists.
pub(crate) const OWNER_FILTER: crate::operation::QueryParam =
    crate::operation::QueryParam::id_filter(
        "owner_id",
        crm_domain::UserId::PATTERN,
        "The owner's `usr_` id.",
    );

/// The `owner_id` filter as `input` sends it; blank is no filter.
pub(crate) fn owner_filter(
    input: &crate::Input,
) -> Result<Option<crm_domain::UserId>, crate::Problem> {
    filter_value(input, OWNER_FILTER.name)
        .map(|raw| {
            crm_domain::UserId::parse(&raw)
                .map_err(|e| crate::Problem::validation(OWNER_FILTER.name, e.to_string()))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_takes_a_custom_field_key_in_the_registrys_shape() {
        let key = crm_domain::registry::KEY_PATTERN.trim_start_matches('^');
        assert_eq!(MATCH_PATTERN, format!("^custom_fields\\.{key}"));
        let input = |raw: &str| crate::Input {
            query: vec![("match".into(), raw.into())],
            ..Default::default()
        };
        assert_eq!(
            match_key(&input("custom_fields.ext_id")).unwrap(),
            Some("ext_id".into())
        );
        for bad in [
            "",
            " custom_fields.a",
            "custom_fields.",
            "custom_fields.A",
            "email",
        ] {
            assert_eq!(
                match_key(&input(bad)).unwrap_err().code,
                crate::problem::ErrorCode::BadRequest,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn if_match_accepts_the_documented_spellings() {
        assert_eq!(if_match(Some("\"3\"")).unwrap(), Some(3));
        assert_eq!(if_match(Some("3")).unwrap(), Some(3));
        assert_eq!(if_match(Some("*")).unwrap(), None);
        assert_eq!(if_match(None).unwrap(), None);
        assert!(if_match(Some("abc")).is_err());
    }

    #[test]
    fn if_match_compares_strongly() {
        // A weak tag never matches: it stands for a version no record has.
        assert_eq!(if_match(Some("W/\"4\"")).unwrap(), Some(NO_VERSION));
        assert_eq!(if_match(Some("W/\"1\"")).unwrap(), Some(NO_VERSION));
        for bad in [
            "\"1",
            "1\"",
            "\"",
            "\"\"",
            "W/1",
            "W/\"1",
            "\"-1\"",
            "+1",
            "\"1\"\"",
            "\"1 \"",
            "99999999999999999999",
        ] {
            let p = if_match(Some(bad)).unwrap_err();
            assert_eq!(p.code, crate::ErrorCode::BadRequest, "{bad}");
        }
    }
}
