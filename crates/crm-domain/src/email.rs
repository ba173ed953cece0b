//! E-mail addresses: normalised (NFKC, lower-cased, the domain in its ASCII form) and checked for a
//! plausible `local@domain.tld` shape.

use std::fmt;

use unicode_normalization::UnicodeNormalization;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Email(String);

impl Email {
    /// Normalises and validates. Normalising makes lookalike spellings of one address one value
    /// (decisions §22, §23), so that they compare and are stored alike: the address is trimmed,
    /// NFKC-normalised (a fullwidth `ｋ` is `k`) and lower-cased, and a non-ASCII domain is turned
    /// into its ASCII (punycode) form by UTS 46, as a mail client resolves it (`exämple.com` is
    /// `xn--exmple-cua.com`). An ASCII domain is only lower-cased.
    ///
    /// The rules are deliberately those of a mail form, not RFC 5322: one `@`, a local part of
    /// 1-64 printable characters without spaces, and a domain of dot-separated labels (letters,
    /// digits, hyphens; not at a label's edge).
    pub fn parse(raw: &str) -> Option<Email> {
        let value = normalise(raw)?;
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
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
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

/// `raw` trimmed, NFKC-normalised and lower-cased, with its domain (after the last `@`) in ASCII;
/// `None` when the domain has no ASCII form. Plain ASCII, the common case, is only lower-cased.
fn normalise(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_ascii() {
        return Some(raw.to_ascii_lowercase());
    }
    // Lower-casing can leave text that NFKC would change again (a few letters lower-case to a
    // base letter and a combining mark), so normalise on both sides of it.
    let folded: String = raw
        .nfkc()
        .collect::<String>()
        .to_lowercase()
        .nfkc()
        .collect();
    let folded = folded.trim();
    match folded.rsplit_once('@') {
        Some((local, domain)) if !domain.is_ascii() => {
            let domain = idna::domain_to_ascii(domain).ok()?;
            Some(format!("{local}@{domain}"))
        }
        _ => Some(folded.to_owned()),
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
    fn lookalike_spellings_are_one_address() {
        let want = "kate@xn--exmple-cua.com";
        for raw in [
            "kate@xn--exmple-cua.com",
            "kate@exämple.com",
            "KATE@EXÄMPLE.COM",
            "\u{ff4b}ate@exämple.com",
            "\u{ff2b}ATE@EXA\u{308}MPLE.COM",
            "kate@xn--exmple-cua.COM",
            "kate@ex\u{e4}mple\u{3002}com",
            " kate@exämple.com ",
        ] {
            assert_eq!(
                Email::parse(raw).map(|e| e.0),
                Some(want.to_owned()),
                "{raw}"
            );
        }
        // UTS 46 drops invisible characters from a domain, as a resolver would.
        assert_eq!(
            Email::parse("ada@exa\u{200b}mple.com").unwrap().as_str(),
            "ada@example.com"
        );
        // The local part keeps its letters, normalised.
        assert_eq!(
            Email::parse("J\u{d3}SE@example.com").unwrap().as_str(),
            "j\u{f3}se@example.com"
        );
        assert_eq!(
            Email::parse("jo\u{301}se@example.com").unwrap().as_str(),
            "j\u{f3}se@example.com"
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
            "ada@exa\u{fffd}mple.com",
            "ada@ex ämple.com",
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

        #[test]
        fn normalising_is_idempotent(local in "\\PC{1,12}", domain in "\\PC{1,10}\\.[a-zäöüé]{2,6}") {
            if let Some(e) = Email::parse(&format!("{local}@{domain}")) {
                prop_assert_eq!(Email::parse(e.as_str()), Some(e.clone()));
            }
        }
    }
}
