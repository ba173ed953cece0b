//! A submitted form or a query string: its pairs in order, read with `form_urlencoded`.

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    response::Response,
};

use crate::pages::error_page;

/// What a path segment or query value escapes: all but letters, digits and `-._~` (RFC 3986's
/// unreserved), so that ids (`con_...`) stay as they are.
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` escaped for a URL's path segment or query value.
pub fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, ESCAPED).to_string()
}

/// The most a console form may send: every form is a handful of short fields.
const MAX_FORM_BYTES: usize = 256 * 1024;

/// Name-value pairs, in the order sent.
#[derive(Debug, Default, Clone)]
pub struct Form(pub Vec<(String, String)>);

impl Form {
    pub fn parse(raw: &[u8]) -> Form {
        Form(
            form_urlencoded::parse(raw)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, trimmed, `None` when blank.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }
}

impl<S: Send + Sync> FromRequest<S> for Form {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Form, Response> {
        let is_form = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if !is_form {
            return Err(error_page(
                415,
                "Not a form",
                "The console takes forms (application/x-www-form-urlencoded).",
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|_| error_page(400, "The form did not arrive", "Try again."))?;
        if bytes.len() > MAX_FORM_BYTES {
            return Err(error_page(413, "The form is too large", "Send less."));
        }
        Ok(Form::parse(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_readable_in_urls() {
        assert_eq!(encode("con_01abc"), "con_01abc");
        assert_eq!(encode("a b&c/d"), "a%20b%26c%2Fd");
    }

    #[test]
    fn pairs_are_decoded_in_order() {
        let f = Form::parse(b"a=1&name=Kate+B%C3%B6hm&a=2&blank=+");
        assert_eq!(f.get("a"), Some("1"));
        assert_eq!(f.get("name"), Some("Kate Böhm"));
        assert_eq!(f.text("blank"), None);
        assert_eq!(f.0.len(), 4);
    }
}
