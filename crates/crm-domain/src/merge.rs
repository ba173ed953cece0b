//! Merge tags: `{{field}}` placeholders in action and email text, filled from a record snapshot,
//! its custom fields and its company (`{{company.name}}`). Used by automation actions and by
//! sequence steps. Also the plain-text part derived from an HTML body.
//!
//! Rules: a tag names a built-in field, a custom field (bare key or `custom_fields.<key>`) or a
//! field of the record's company (`company.<field>`); whitespace inside the braces is ignored.
//! Strings render as they are, numbers and booleans in JSON form, arrays joined with `, `, and
//! null, missing or unknown fields render empty. In an HTML part every value is HTML-escaped.

use serde_json::Value;

use crate::{condition::lookup, registry::Registry};

/// How values are written into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// Plain text (subjects, text parts, activity bodies, field values).
    None,
    /// HTML: `& < > " '` are escaped.
    Html,
}

/// What tags are filled from.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeData<'a> {
    pub record: Option<&'a Value>,
    pub company: Option<&'a Value>,
    /// On `deal.stage_changed`: the stage the deal left (`{{previous_stage}}`).
    pub previous_stage: Option<&'a Value>,
}

/// Escapes text for HTML element content and attribute values.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn display(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(display)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

impl MergeData<'_> {
    /// The value of one tag, or `None` when nothing provides it.
    pub fn value(&self, tag: &str) -> Option<&Value> {
        if tag == "previous_stage" && self.previous_stage.is_some() {
            return self.previous_stage;
        }
        match tag.strip_prefix("company.") {
            Some(field) => self.company.and_then(|c| lookup(c, field)),
            None => self.record.and_then(|r| lookup(r, tag)),
        }
    }
}

enum Piece<'a> {
    Literal(&'a str),
    Tag(&'a str),
}

/// Splits `text` into literal pieces and tags (trimmed).
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        out.push(Piece::Literal(&rest[..start]));
        out.push(Piece::Tag(rest[start + 2..start + 2 + len].trim()));
        rest = &rest[start + 2 + len + 2..];
    }
    out.push(Piece::Literal(rest));
    out
}

/// Fills every `{{tag}}` of `text`. Unknown tags render empty.
pub fn render(text: &str, data: &MergeData<'_>, escape: Escape) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Literal(lit) => out.push_str(lit),
            Piece::Tag(tag) => {
                let value = data.value(tag).map(display).unwrap_or_default();
                match escape {
                    Escape::Html => out.push_str(&escape_html(&value)),
                    Escape::None => out.push_str(&value),
                }
            }
        }
    }
    out
}

/// The tags of `text`, in order of appearance, without repeats.
pub fn tags(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in pieces(text) {
        if let Piece::Tag(t) = piece {
            if !out.iter().any(|o| o == t) {
                out.push(t.to_owned());
            }
        }
    }
    out
}

/// Whether `text` holds any tag.
pub fn has_tags(text: &str) -> bool {
    !tags(text).is_empty()
}

pub use crate::object::{
    COMPANY_TAG_FIELDS as COMPANY_FIELDS, CONTACT_TAG_FIELDS as CONTACT_FIELDS,
    DEAL_TAG_FIELDS as DEAL_FIELDS,
};

/// The tags of `texts` that no field provides: not a built-in field of the record
/// (`builtin`), not a custom field of `fields`, not a company field of `company_fields`. For
/// warnings (a sequence preview): such tags render empty.
pub fn unknown_tags(
    texts: &[&str],
    builtin: &[&str],
    fields: &Registry,
    company_fields: &Registry,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for text in texts {
        for tag in tags(text) {
            let known = match tag.strip_prefix("company.") {
                Some(f) => {
                    let f = f.strip_prefix("custom_fields.").unwrap_or(f);
                    COMPANY_FIELDS.contains(&f) || company_fields.field(f).is_some()
                }
                None => {
                    let f = tag.strip_prefix("custom_fields.");
                    match f {
                        Some(key) => fields.field(key).is_some(),
                        None => builtin.contains(&tag.as_str()) || fields.field(&tag).is_some(),
                    }
                }
            };
            if !known && !out.contains(&tag) {
                out.push(tag);
            }
        }
    }
    out
}

/// A plain-text rendering of an HTML body: tags dropped, block ends and `<br>` as line breaks,
/// links as `text (url)`, the common entities decoded, runs of blank lines collapsed.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    let mut pending_href: Vec<Option<String>> = Vec::new();
    while let Some(lt) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..lt]));
        let Some(gt) = rest[lt..].find('>') else {
            out.push_str(&decode_entities(&rest[lt..]));
            rest = "";
            break;
        };
        let tag = &rest[lt + 1..lt + gt];
        rest = &rest[lt + gt + 1..];
        let lower = tag.trim().to_ascii_lowercase();
        let name: String = lower
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let closing = lower.starts_with('/');
        match name.as_str() {
            "br" => out.push('\n'),
            "p" | "div" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "tr" | "table" | "ul"
            | "ol"
                if closing =>
            {
                out.push_str("\n\n")
            }
            "li" if !closing => out.push_str("\n- "),
            "a" if !closing => pending_href.push(href(tag)),
            "a" => {
                if let Some(Some(url)) = pending_href.pop() {
                    out.push_str(&format!(" ({url})"));
                }
            }
            "style" | "script" if !closing => {
                let end = format!("</{name}");
                match rest.to_ascii_lowercase().find(&end) {
                    Some(i) => rest = &rest[i..],
                    None => rest = "",
                }
            }
            _ => {}
        }
    }
    out.push_str(&decode_entities(rest));
    // Trim each line, collapse more than one blank line.
    let mut text = String::new();
    let mut blank = 0;
    for line in out.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !text.is_empty() {
            text.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        text.push_str(&line);
    }
    text
}

fn href(tag: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let i = lower.find("href=")?;
    let v = &tag[i + 5..];
    let v = v.trim_start();
    let (quote, body) = match v.chars().next()? {
        q @ ('"' | '\'') => (Some(q), &v[1..]),
        _ => (None, v),
    };
    let end = match quote {
        Some(q) => body.find(q)?,
        None => body.find(|c: char| c.is_whitespace()).unwrap_or(body.len()),
    };
    Some(decode_entities(&body[..end]))
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{DataType, FieldDef, ObjectKind};
    use proptest::prelude::*;
    use serde_json::json;

    fn data() -> (Value, Value) {
        (
            json!({"first_name": "Ada", "last_name": null, "value_cents": 1200, "custom_fields": {"tier": "<gold>", "tags": ["a", "b"]}}),
            json!({"name": "Acme & Co", "custom_fields": {}}),
        )
    }

    #[test]
    fn fills_record_custom_and_company_fields() {
        let (record, company) = data();
        let d = MergeData {
            record: Some(&record),
            company: Some(&company),
            previous_stage: None,
        };
        assert_eq!(
            render("Hi {{first_name}} of {{ company.name }}", &d, Escape::None),
            "Hi Ada of Acme & Co"
        );
        assert_eq!(
            render("{{tier}}/{{custom_fields.tier}}/{{tags}}", &d, Escape::None),
            "<gold>/<gold>/a, b"
        );
        assert_eq!(render("{{value_cents}}", &d, Escape::None), "1200");
        assert_eq!(
            render(
                "[{{last_name}}][{{nope}}][{{company.nope}}]",
                &d,
                Escape::None
            ),
            "[][][]",
            "null and unknown render empty"
        );
        assert_eq!(
            render("{{ first_name", &d, Escape::None),
            "{{ first_name",
            "an unclosed tag is text"
        );
    }

    #[test]
    fn html_parts_escape_values_but_not_the_template() {
        let (record, company) = data();
        let d = MergeData {
            record: Some(&record),
            company: Some(&company),
            previous_stage: None,
        };
        assert_eq!(
            render("<b>{{tier}}</b> {{company.name}}", &d, Escape::Html),
            "<b>&lt;gold&gt;</b> Acme &amp; Co"
        );
        assert_eq!(render("{{x}}", &MergeData::default(), Escape::Html), "");
    }

    #[test]
    fn lists_tags_nothing_provides() {
        let mut fields = Registry::default();
        fields.fields.push(
            FieldDef::new(
                ObjectKind::Contact,
                "tier",
                None,
                DataType::Text,
                None,
                false,
            )
            .unwrap(),
        );
        let unknown = unknown_tags(
            &[
                "Hi {{first_name}} {{tier}} {{custom_fields.tier}} {{company.name}}",
                "{{nickname}} {{company.size}} {{nickname}}",
            ],
            CONTACT_FIELDS,
            &fields,
            &Registry::default(),
        );
        assert_eq!(unknown, ["nickname", "company.size"]);
        assert_eq!(tags("{{a}}{{ b }}{{a}}"), ["a", "b"]);
        assert!(has_tags("x {{y}}") && !has_tags("x {y}"));
    }

    #[test]
    fn derives_plain_text_from_html() {
        let html = "<h1>Hello&nbsp;Ada</h1><p>Your <b>order</b> &amp; <a href=\"https://x.co/o?a=1&amp;b=2\">receipt</a></p>\
                    <ul><li>one</li><li>two</li></ul><style>p{}</style>bye<br>now";
        assert_eq!(html_to_text(html), "Hello Ada\n\nYour order & receipt (https://x.co/o?a=1&b=2)\n\n- one\n- two\n\nbye\nnow");
        assert_eq!(html_to_text("plain text"), "plain text");
        assert_eq!(html_to_text("a < b"), "a < b");
    }

    proptest! {
        /// Text without tags renders as itself; HTML rendering never lets a value open a tag.
        #[test]
        fn rendering_is_safe(text in "[a-z <>&{}]{0,30}", value in "[a-z<>&\"']{0,10}") {
            let record = json!({"v": value});
            let d = MergeData { record: Some(&record), company: None, previous_stage: None };
            if !text.contains("{{") {
                prop_assert_eq!(render(&text, &d, Escape::None), text.clone());
            }
            let html = render("{{v}}", &d, Escape::Html);
            prop_assert!(!html.contains('<') && !html.contains('"'));
            prop_assert_eq!(render("{{v}}", &d, Escape::None), value);
        }
    }
}
