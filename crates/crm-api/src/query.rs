//! The query string (and path parameters) of a call, checked against what its operation or
//! alias route declares before anything reads them (decisions §22).

use crate::{
    operation::{Input, Operation, ParamKind, QueryParam},
    problem::Problem,
};

/// The path and query of a call of `op` (see [`check_query_params`]). A path parameter holding
/// NUL is refused as a query value is: no store can compare text containing it.
pub(crate) fn check_query(op: &Operation, input: &Input) -> Result<(), Problem> {
    if let Some((name, _)) = input.path.iter().find(|(_, v)| v.contains('\0')) {
        return Err(nul_problem(name));
    }
    check_query_params(op.query, &input.query)
}

/// 400 for a parameter (`field`) whose name or value holds U+0000 (decisions §22): a store would
/// fail on it (Postgres refuses NUL in text) or read it as the end of the text (SQLite's `LIKE`
/// pattern), so that `q=%00a` would match every record.
fn nul_problem(field: &str) -> Problem {
    Problem::bad_request(format!(
        "`{}` must not contain the NUL character (%00)",
        field.replace('\0', "%00")
    ))
    .with("field", field.replace('\0', "%00"))
}

/// Unknown or repeated query parameters are refused, naming the accepted ones (`params`), and
/// required ones must be given. A custom-field filter's two spellings (`custom_fields.k`,
/// `custom_fields[k]`) count as the same parameter. An alias route checks its own
/// query with it ([`crate::alias`]).
pub(crate) fn check_query_params(
    params: &[QueryParam],
    query: &[(String, String)],
) -> Result<(), Problem> {
    let canonical = |name: &str| {
        params.iter().find_map(|q| {
            q.key_of(name).map(|key| {
                if key.is_empty() {
                    q.name.to_owned()
                } else {
                    format!("{}.{key}", q.name)
                }
            })
        })
    };
    if let Some((name, _)) = query
        .iter()
        .find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(nul_problem(name));
    }
    let mut seen: Vec<String> = Vec::with_capacity(query.len());
    for (name, _) in query {
        let Some(param) = canonical(name) else {
            let valid: Vec<String> = params
                .iter()
                .map(|q| {
                    if matches!(q.kind, ParamKind::FieldMap) {
                        format!("{}.<key>", q.name)
                    } else {
                        q.name.to_owned()
                    }
                })
                .collect();
            let mut p = Problem::bad_request(format!("unknown query parameter `{name}`"))
                .with("field", name.as_str())
                .with("valid_options", valid.clone());
            if let Some(s) = crm_domain::suggest::closest(name, valid.iter().map(String::as_str)) {
                p = p.with("suggestion", format!("did you mean `{s}`?"));
            }
            return Err(p);
        };
        if seen.contains(&param) {
            return Err(Problem::bad_request(format!(
                "query parameter `{param}` is given more than once"
            ))
            .with("field", param.as_str()));
        }
        seen.push(param);
    }
    for q in params.iter().filter(|q| q.required) {
        if query
            .iter()
            .find(|(k, _)| k == q.name)
            .is_none_or(|(_, v)| v.is_empty())
        {
            return Err(Problem::validation(
                q.name,
                format!("{} is required", q.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::ErrorCode;

    #[test]
    fn nul_in_a_query_name_or_value_is_a_bad_request() {
        let params = [QueryParam::string("q", "text")];
        for query in [
            vec![("q".to_owned(), "a\0b".to_owned())],
            vec![("q".to_owned(), "\0a".to_owned())],
            vec![("q\0".to_owned(), "a".to_owned())],
        ] {
            let p = check_query_params(&params, &query).unwrap_err();
            assert_eq!(p.code, ErrorCode::BadRequest, "{query:?}");
            assert!(!p.extra["field"].as_str().unwrap().contains('\0'));
        }
        assert!(check_query_params(&params, &[("q".to_owned(), "ab".to_owned())]).is_ok());
    }
}
