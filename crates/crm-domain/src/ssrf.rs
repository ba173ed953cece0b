//! SSRF defence for webhook URLs (decisions §11): which hosts a webhook may reach.
//!
//! Hosts are parsed as a browser parses them (WHATWG URL, through the `url` crate), so every
//! numeric spelling of an address (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `[::ffff:7f00:1]`)
//! becomes the address it names before it is classified. An address is *public* only when it is
//! none of the blocked kinds below; for IPv6 only global unicast (`2000::/3`) can be public, and
//! prefixes that embed or translate IPv4 (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are
//! blocked whole, whatever address they carry.
//!
//! Pure: resolving a name is the caller's job (the outbound adapter resolves, checks every address
//! with [`classify_ip`], and connects only to an address that passed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address or host is not a public destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    Loopback,
    Private,
    LinkLocal,
    UniqueLocal,
    /// Shared address space of carrier-grade NAT, 100.64.0.0/10.
    Cgnat,
    Multicast,
    Unspecified,
    /// Broadcast, documentation, benchmarking, IETF-reserved and other non-global ranges.
    Reserved,
    /// A cloud provider's instance metadata service (address or name).
    Metadata,
    /// IPv4-mapped (`::ffff:0:0/96`) or IPv4-compatible (`::/96`) IPv6.
    Ipv4Embedded,
    /// NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`).
    Nat64,
    /// 6to4 (`2002::/16`) and Teredo (`2001::/32`).
    Tunnel,
    /// `localhost`, `*.localhost`, and names of private-use domains (`.internal`, `.local`, ...).
    LocalName,
}

impl Blocked {
    pub fn describe(self) -> &'static str {
        match self {
            Blocked::Loopback => "a loopback address",
            Blocked::Private => "a private address",
            Blocked::LinkLocal => "a link-local address",
            Blocked::UniqueLocal => "a unique-local address",
            Blocked::Cgnat => "a carrier-grade NAT address",
            Blocked::Multicast => "a multicast address",
            Blocked::Unspecified => "an unspecified address",
            Blocked::Reserved => "a reserved or non-global address",
            Blocked::Metadata => "a cloud metadata endpoint",
            Blocked::Ipv4Embedded => "an IPv4-mapped or IPv4-compatible IPv6 address",
            Blocked::Nat64 => "a NAT64 address",
            Blocked::Tunnel => "a 6to4 or Teredo address",
            Blocked::LocalName => "a local host name",
        }
    }
}

/// Cloud metadata service addresses (AWS, GCP, Azure, DigitalOcean, OpenStack: 169.254.169.254;
/// AWS ECS task metadata: 169.254.170.2; Alibaba: 100.100.100.200; Oracle: 192.0.0.192).
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(192, 0, 0, 192),
];

/// AWS IMDS over IPv6.
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)];

/// Host names of metadata services.
const METADATA_NAMES: [&str; 6] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
];

/// Private-use top-level names: never public.
const LOCAL_SUFFIXES: [&str; 6] = [
    "localhost",
    "internal",
    "local",
    "localdomain",
    "home.arpa",
    "intranet",
];

/// The kind of a non-public IPv4 address, or `None` for a public one.
pub fn classify_v4(ip: Ipv4Addr) -> Option<Blocked> {
    if METADATA_V4.contains(&ip) {
        return Some(Blocked::Metadata);
    }
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => Some(Blocked::Unspecified),
        (10, _, _) => Some(Blocked::Private),
        (100, 64..=127, _) => Some(Blocked::Cgnat),
        (127, _, _) => Some(Blocked::Loopback),
        (169, 254, _) => Some(Blocked::LinkLocal),
        (172, 16..=31, _) => Some(Blocked::Private),
        (192, 168, _) => Some(Blocked::Private),
        // IETF protocol assignments, documentation (TEST-NET-1..3), 6to4 relay anycast, benchmarking.
        (192, 0, 0)
        | (192, 0, 2)
        | (192, 88, 99)
        | (198, 51, 100)
        | (203, 0, 113)
        | (198, 18..=19, _) => Some(Blocked::Reserved),
        (224..=239, _, _) => Some(Blocked::Multicast),
        // 240.0.0.0/4 (reserved) including 255.255.255.255 (broadcast).
        (240..=255, _, _) => Some(Blocked::Reserved),
        _ => None,
    }
}

/// The kind of a non-public IPv6 address, or `None` for a public one.
pub fn classify_v6(ip: Ipv6Addr) -> Option<Blocked> {
    if METADATA_V6.contains(&ip) {
        return Some(Blocked::Metadata);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(Blocked::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Blocked::Loopback);
    }
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => {
            return Some(Blocked::Ipv4Embedded)
        }
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, ..] => return Some(Blocked::Nat64),
        [0x2002, ..] | [0x2001, 0, ..] => return Some(Blocked::Tunnel),
        _ => {}
    }
    let first = s[0];
    if first & 0xfe00 == 0xfc00 {
        return Some(Blocked::UniqueLocal);
    }
    if first & 0xffc0 == 0xfe80 {
        return Some(Blocked::LinkLocal);
    }
    if first & 0xffc0 == 0xfec0 {
        // Site-local: deprecated, but still private where it is used.
        return Some(Blocked::Private);
    }
    if first & 0xff00 == 0xff00 {
        return Some(Blocked::Multicast);
    }
    // Documentation (2001:db8::/32, 3fff::/20), ORCHID (2001:10::/28, 2001:20::/28), other
    // IETF special-purpose blocks under 2001::/23, and anything outside global unicast 2000::/3.
    if (first == 0x2001 && s[1] == 0x0db8)
        || (first == 0x3fff && s[1] < 0x1000)
        || (first == 0x2001 && s[1] < 0x0200)
    {
        return Some(Blocked::Reserved);
    }
    if first & 0xe000 != 0x2000 {
        return Some(Blocked::Reserved);
    }
    None
}

pub fn classify_ip(ip: IpAddr) -> Option<Blocked> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The kind of a non-public host name, or `None` when the name may be resolved and its
/// addresses checked. `name` is a host as the URL parser gives it (lower-case, IDNA-encoded).
pub fn classify_name(name: &str) -> Option<Blocked> {
    let name = name.trim_end_matches('.');
    if METADATA_NAMES.contains(&name) {
        return Some(Blocked::Metadata);
    }
    if LOCAL_SUFFIXES
        .iter()
        .any(|s| name == *s || name.ends_with(&format!(".{s}")))
    {
        return Some(Blocked::LocalName);
    }
    // A single-label name is resolved through the server's search domains: never public.
    if !name.contains('.') {
        return Some(Blocked::LocalName);
    }
    None
}

/// What a mode lets a webhook reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `http` as well as `https`.
    pub allow_http: bool,
    /// Loopback addresses and `localhost` (test mode, for a receiver on the same machine).
    pub allow_loopback: bool,
}

impl Policy {
    /// Live mode: public https only.
    pub const LIVE: Policy = Policy {
        allow_http: false,
        allow_loopback: false,
    };
    /// Test mode: http and loopback too; every other blocked kind stays blocked.
    pub const TEST: Policy = Policy {
        allow_http: true,
        allow_loopback: true,
    };

    /// Whether an address may be connected to under this policy.
    pub fn allows_ip(self, ip: IpAddr) -> Result<(), Blocked> {
        match classify_ip(ip) {
            None => Ok(()),
            Some(Blocked::Loopback) if self.allow_loopback => Ok(()),
            Some(b) => Err(b),
        }
    }

    /// Whether a host name may be resolved under this policy (its addresses are checked then).
    pub fn allows_name(self, name: &str) -> Result<(), Blocked> {
        let trimmed = name.trim_end_matches('.');
        let is_localhost = trimmed == "localhost" || trimmed.ends_with(".localhost");
        match classify_name(name) {
            None => Ok(()),
            Some(Blocked::LocalName) if self.allow_loopback && is_localhost => Ok(()),
            Some(b) => Err(b),
        }
    }
}

/// A URL's host after browser-style parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A name still to be resolved (and each of its addresses checked).
    Name(String),
}

/// A webhook URL that passed the static checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedUrl {
    /// The URL as the parser normalises it (this is what is stored and requested).
    pub url: String,
    pub host: Host,
    pub port: u16,
}

/// Why a URL is refused. `detail` is shown to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRejected {
    pub detail: String,
    pub blocked: Option<Blocked>,
}

fn reject(detail: impl Into<String>) -> UrlRejected {
    UrlRejected {
        detail: detail.into(),
        blocked: None,
    }
}

fn blocked(what: &str, b: Blocked) -> UrlRejected {
    UrlRejected {
        detail: format!(
            "url: the host {what} is {}, which webhooks may not reach",
            b.describe()
        ),
        blocked: Some(b),
    }
}

/// The longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// Parses `raw` as a browser would and checks everything that can be checked without DNS:
/// scheme, credentials, and the host (an address in any spelling, or a name).
pub fn check_url(raw: &str, policy: Policy) -> Result<CheckedUrl, UrlRejected> {
    // Only the blanks the documented pattern allows around it; inside, a browser's parser would
    // drop tabs and line breaks, which would let a different URL through than the one shown.
    let raw = raw.trim_matches([' ', '\t', '\r', '\n']);
    if raw.is_empty() {
        return Err(reject("url is required"));
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(reject(
            "url must not contain white space or control characters",
        ));
    }
    if raw.len() > MAX_URL_LEN {
        return Err(reject(format!("url is at most {MAX_URL_LEN} characters")));
    }
    let url = url::Url::parse(raw).map_err(|e| reject(format!("url is not a valid URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        "http" => return Err(reject("url must use https in live mode")),
        other => return Err(reject(format!("url must be an https URL, not {other}:"))),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(reject("url must not carry a user name or password"));
    }
    let host = match url.host() {
        Some(url::Host::Ipv4(v4)) => Host::Ip(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Host::Ip(IpAddr::V6(v6)),
        Some(url::Host::Domain(d)) => Host::Name(d.to_owned()),
        None => return Err(reject("url must name a host")),
    };
    match &host {
        Host::Ip(ip) => policy
            .allows_ip(*ip)
            .map_err(|b| blocked(&ip.to_string(), b))?,
        Host::Name(name) => policy.allows_name(name).map_err(|b| blocked(name, b))?,
    }
    let port = url.port_or_known_default().unwrap_or(443);
    Ok(CheckedUrl {
        url: url.to_string(),
        host,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spellings a live webhook must never reach, by kind (shared with the reliability row that
    /// registers each against the real server). Each is checked with the live policy.
    fn blocked() -> Vec<String> {
        let groups: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(include_str!("ssrf_blocked.json")).unwrap();
        groups
            .values()
            .flat_map(|urls| urls.as_array().unwrap().iter())
            .map(|u| u.as_str().unwrap().to_owned())
            .collect()
    }

    const PUBLIC: &[&str] = &[
        "https://example.com/webhooks",
        "https://hooks.example.co.uk:8443/in?x=1",
        "https://8.8.8.8/",
        "https://1.1.1.1/hook",
        "https://134744072/",
        "https://93.184.216.34/",
        "https://172.32.0.1/",
        "https://100.128.0.1/",
        "https://192.169.0.1/",
        "https://[2606:4700:4700::1111]/",
        "https://[2001:4860:4860::8888]/",
        "https://xn--bcher-kva.example/",
        "https://bücher.example/",
    ];

    #[test]
    fn blanks_inside_a_url_are_refused_and_only_ascii_blanks_trimmed_around_it() {
        for raw in [
            "https://a.example/x\n\t*",
            "https://a.exa\tmple/",
            "https://a.example/\u{0}",
            "\u{a0}https://a.example/",
        ] {
            assert!(check_url(raw, Policy::TEST).is_err(), "{raw:?}");
        }
        assert!(check_url(" \thttps://a.example/x\r\n", Policy::TEST).is_ok());
    }

    #[test]
    fn live_policy_refuses_every_blocked_spelling() {
        let blocked = blocked();
        assert!(blocked.len() >= 80);
        for raw in &blocked {
            assert!(
                check_url(raw, Policy::LIVE).is_err(),
                "{raw} must be refused, got {:?}",
                check_url(raw, Policy::LIVE)
            );
        }
    }

    #[test]
    fn live_policy_accepts_public_hosts() {
        for raw in PUBLIC {
            let checked = check_url(raw, Policy::LIVE).unwrap_or_else(|e| panic!("{raw}: {e:?}"));
            assert!(checked.port == 443 || checked.port == 8443, "{raw}");
        }
    }

    #[test]
    fn numeric_spellings_are_parsed_as_a_browser_does() {
        for raw in [
            "https://2130706433/",
            "https://0x7f.1/",
            "https://0177.0.0.1/",
            "https://127.1/",
        ] {
            assert_eq!(
                check_url(raw, Policy::TEST).unwrap().host,
                Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                "{raw}"
            );
        }
        let e = check_url("https://0xa9fea9fe/", Policy::LIVE).unwrap_err();
        assert_eq!(e.blocked, Some(Blocked::Metadata));
        assert_eq!(
            check_url("https://[::ffff:7f00:1]/", Policy::TEST)
                .unwrap_err()
                .blocked,
            Some(Blocked::Ipv4Embedded)
        );
    }

    #[test]
    fn test_policy_allows_http_and_loopback_only() {
        assert!(check_url("http://127.0.0.1:9000/hook", Policy::TEST).is_ok());
        assert!(check_url("http://localhost:9000/hook", Policy::TEST).is_ok());
        assert!(check_url("http://[::1]:9000/hook", Policy::TEST).is_ok());
        assert!(check_url("http://example.com/", Policy::TEST).is_ok());
        assert_eq!(
            check_url("http://169.254.169.254/", Policy::TEST)
                .unwrap_err()
                .blocked,
            Some(Blocked::Metadata)
        );
        assert_eq!(
            check_url("http://10.1.2.3/", Policy::TEST)
                .unwrap_err()
                .blocked,
            Some(Blocked::Private)
        );
        assert!(check_url("ftp://127.0.0.1/", Policy::TEST).is_err());
    }

    // ---- an independent reference: the special-purpose registries as CIDR tables ----

    fn in_v4(ip: u32, net: [u8; 4], len: u32) -> bool {
        let net = u32::from_be_bytes(net);
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        ip & mask == net & mask
    }

    fn reference_v4_blocked(ip: Ipv4Addr) -> bool {
        const TABLE: &[([u8; 4], u32)] = &[
            ([0, 0, 0, 0], 8),
            ([10, 0, 0, 0], 8),
            ([100, 64, 0, 0], 10),
            ([127, 0, 0, 0], 8),
            ([169, 254, 0, 0], 16),
            ([172, 16, 0, 0], 12),
            ([192, 0, 0, 0], 24),
            ([192, 0, 2, 0], 24),
            ([192, 88, 99, 0], 24),
            ([192, 168, 0, 0], 16),
            ([198, 18, 0, 0], 15),
            ([198, 51, 100, 0], 24),
            ([203, 0, 113, 0], 24),
            ([224, 0, 0, 0], 4),
            ([240, 0, 0, 0], 4),
            ([100, 100, 100, 200], 32),
        ];
        let n = u32::from(ip);
        TABLE.iter().any(|(net, len)| in_v4(n, *net, *len))
    }

    fn in_v6(ip: u128, net: u128, len: u32) -> bool {
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        ip & mask == net & mask
    }

    fn reference_v6_blocked(ip: Ipv6Addr) -> bool {
        let n = u128::from(ip);
        // Only global unicast can be public...
        if !in_v6(n, 0x2000 << 112, 3) {
            return true;
        }
        // ...minus these.
        const TABLE: &[(u128, u32)] = &[
            (0x2001_0000 << 96, 23),
            (0x2001_0db8 << 96, 32),
            (0x2002 << 112, 16),
            (0x3fff << 112, 20),
        ];
        TABLE.iter().any(|(net, len)| in_v6(n, *net, *len))
    }

    fn arb_v6() -> impl Strategy<Value = Ipv6Addr> {
        // Uniform u128s are almost all outside 2000::/3; mix in addresses under interesting prefixes.
        let prefixes = prop::sample::select(vec![
            0u16, 0x0064, 0x2001, 0x2002, 0x2400, 0x2a00, 0x3fff, 0xfc00, 0xfd00, 0xfe80, 0xfec0,
            0xff02,
        ]);
        prop_oneof![
            any::<u128>().prop_map(Ipv6Addr::from),
            (prefixes, any::<u128>())
                .prop_map(|(p, rest)| Ipv6Addr::from((u128::from(p) << 112) | (rest >> 16))),
            any::<u32>().prop_map(|v4| Ipv6Addr::from(0xffff_0000_0000u128 | u128::from(v4))),
            any::<u32>().prop_map(|v4| Ipv6Addr::from((0x0064_ff9bu128 << 96) | u128::from(v4))),
        ]
    }

    proptest! {
        #[test]
        fn v4_matches_the_reference(n in any::<u32>()) {
            let ip = Ipv4Addr::from(n);
            prop_assert_eq!(classify_v4(ip).is_some(), reference_v4_blocked(ip), "{}", ip);
        }

        #[test]
        fn v6_matches_the_reference(ip in arb_v6()) {
            prop_assert_eq!(classify_v6(ip).is_some(), reference_v6_blocked(ip), "{}", ip);
        }

        /// Any spelling of an address (dotted decimal, one number, hex, octal) is the same host.
        #[test]
        fn every_spelling_of_a_v4_address_is_classified_alike(n in any::<u32>(), form in 0u8..4) {
            let ip = Ipv4Addr::from(n);
            let [a, b, c, d] = ip.octets();
            let host = match form {
                0 => ip.to_string(),
                1 => n.to_string(),
                2 => format!("0x{n:x}"),
                _ => format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
            };
            let result = check_url(&format!("https://{host}/"), Policy::LIVE);
            prop_assert_eq!(result.is_err(), reference_v4_blocked(ip), "{} -> {:?}", host, result);
        }
    }
}
