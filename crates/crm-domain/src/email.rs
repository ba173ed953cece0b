//! E-mail addresses: trimmed, lower-cased, and checked for a plausible `local@domain.tld` shape.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Email(String);

impl Email {
    /// Normalises (trim, lower-case) and validates. The rules are deliberately those of a mail
    /// form, not RFC 5322: one `@`, a local part of 1-64 printable characters without spaces, and a
    /// domain of dot-separated labels (letters, digits, hyphens; not at a label's edge).
    pub fn parse(raw: &str) -> Option<Email> {
        let value = raw.trim().to_lowercase();
        if value.len() > 254 {
            return None;
        }
        let (local, domain) = value.split_once('@')?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.starts_with('.')
            && !local.ends_with('.')
            && !local.contains("..")
            && local
                .chars()
                .all(|c| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c));
        let labels: Vec<&str> = domain.split('.').collect();
        let domain_ok = labels.len() >= 2
            && labels.iter().all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.chars().all(|c| c.is_alphanumeric() || c == '-')
            })
            && labels
                .last()
                .is_some_and(|tld| tld.len() >= 2 && !tld.chars().all(|c| c.is_ascii_digit()));
        (local_ok && domain_ok).then_some(Email(value))
    }

    pub fn from_trusted(value: String) -> Email {
        Email(value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Email({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalises_case_and_whitespace() {
        assert_eq!(
            Email::parse("  Ada.Lovelace@Example.COM ")
                .unwrap()
                .as_str(),
            "ada.lovelace@example.com"
        );
    }

    #[test]
    fn rejects_malformed_addresses() {
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "ada@@example.com",
            "a da@example.com",
            "ada@exa mple.com",
            "ada@-example.com",
            "ada@example.c",
            ".ada@example.com",
            "ada..b@example.com",
            "ada@example..com",
            "ada@1.2.3.4",
        ] {
            assert!(Email::parse(bad).is_none(), "{bad} should be rejected");
        }
    }

    #[test]
    fn accepts_ordinary_addresses() {
        for good in [
            "a@b.co",
            "first.last+tag@sub.example.org",
            "o'brien@example.ie",
            "x@xn--80ak6aa92e.com",
        ] {
            assert!(Email::parse(good).is_some(), "{good} should be accepted");
        }
    }

    proptest! {
        #[test]
        fn parsing_is_idempotent(local in "[a-zA-Z0-9._+-]{1,20}", domain in "[a-zA-Z0-9-]{1,10}\\.[a-z]{2,6}") {
            if let Some(e) = Email::parse(&format!("{local}@{domain}")) {
                prop_assert_eq!(Email::parse(e.as_str()), Some(e.clone()));
            }
        }
    }
}
