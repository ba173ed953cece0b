//! Cursor paging. A cursor names the list it belongs to, a fingerprint of its workspace, mode and
//! filters, and the last id seen, with a checksum: a cursor that was tampered with, or used in
//! another workspace or mode, on another list or with other filters, is refused as
//! `invalid_cursor` rather than silently giving a wrong page (decisions §4, §22).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use sha2::{Digest, Sha256};

use crm_domain::Tenant;

use crate::{error::AppError, ports::Slice};

pub const DEFAULT_LIMIT: u32 = 25;
pub const MAX_LIMIT: u32 = 100;

/// Paging controls as the client sent them (already range-checked by the transport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageParams {
    pub limit: u32,
    pub cursor: Option<String>,
}

impl Default for PageParams {
    fn default() -> Self {
        PageParams {
            limit: DEFAULT_LIMIT,
            cursor: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            has_more: self.has_more,
            next_cursor: self.next_cursor,
        }
    }
}

/// Not a secret: the checksum detects edits, and a forged cursor still only reads the caller's own
/// tenant, since every query is scoped by it. The server recomputes the fingerprint from the
/// request, so a cursor carried to another tenant, list or filter set does not match it.
const CHECKSUM_SALT: &[u8] = b"crm-cursor-v1";

fn checksum(payload: &str) -> String {
    let digest = Sha256::new()
        .chain_update(CHECKSUM_SALT)
        .chain_update(payload.as_bytes())
        .finalize();
    hex::encode(&digest[..8])
}

/// What a cursor is bound to: its tenant and its filters (the list is carried in clear).
fn fingerprint(tenant: &Tenant, filters: &str) -> String {
    let digest = Sha256::new()
        .chain_update(tenant.workspace_id.as_str().as_bytes())
        .chain_update(b"|")
        .chain_update(tenant.mode.as_str().as_bytes())
        .chain_update(b"|")
        .chain_update(filters.as_bytes())
        .finalize();
    hex::encode(&digest[..8])
}

pub fn encode_cursor(tenant: &Tenant, list: &str, filters: &str, last_id: &str) -> String {
    let payload = format!("{list}|{}|{last_id}", fingerprint(tenant, filters));
    let sum = checksum(&payload);
    URL_SAFE_NO_PAD.encode(format!("{payload}|{sum}"))
}

/// The last id of the previous page, if the cursor is valid for this tenant, list and filters.
pub fn decode_cursor(
    cursor: &str,
    tenant: &Tenant,
    list: &str,
    filters: &str,
) -> Result<String, AppError> {
    let raw = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| AppError::InvalidCursor)?;
    let text = String::from_utf8(raw).map_err(|_| AppError::InvalidCursor)?;
    let (payload, sum) = text.rsplit_once('|').ok_or(AppError::InvalidCursor)?;
    if checksum(payload) != sum {
        return Err(AppError::InvalidCursor);
    }
    let mut parts = payload.splitn(3, '|');
    let (Some(l), Some(fp), Some(last)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(AppError::InvalidCursor);
    };
    if l != list || fp != fingerprint(tenant, filters) {
        return Err(AppError::InvalidCursor);
    }
    Ok(last.to_owned())
}

/// Turns paging params into the slice to fetch (one more than the limit, to learn `has_more`).
pub fn slice_for(
    params: &PageParams,
    tenant: &Tenant,
    list: &str,
    filters: &str,
) -> Result<Slice, AppError> {
    let before = params
        .cursor
        .as_deref()
        .map(|c| decode_cursor(c, tenant, list, filters))
        .transpose()?;
    Ok(Slice {
        before,
        limit: params.limit + 1,
    })
}

/// Cuts the fetched rows to the page and makes the next cursor from the last id kept.
pub fn page_from<T>(
    mut rows: Vec<T>,
    params: &PageParams,
    tenant: &Tenant,
    list: &str,
    filters: &str,
    key_of: impl Fn(&T) -> String,
) -> Page<T> {
    let has_more = rows.len() > params.limit as usize;
    rows.truncate(params.limit as usize);
    let next_cursor = if has_more {
        rows.last()
            .map(|r| encode_cursor(tenant, list, filters, &key_of(r)))
    } else {
        None
    };
    Page {
        data: rows,
        has_more,
        next_cursor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{Mode, WorkspaceId};

    fn tenant(mode: Mode) -> Tenant {
        Tenant {
            workspace_id: WorkspaceId::from_uuid(uuid::Uuid::nil()),
            mode,
        }
    }

    #[test]
    fn a_cursor_round_trips_only_on_its_own_list_and_filters() {
        let t = tenant(Mode::Test);
        let c = encode_cursor(&t, "contacts", "q=ada", "con_x");
        assert_eq!(decode_cursor(&c, &t, "contacts", "q=ada").unwrap(), "con_x");
        assert!(decode_cursor(&c, &t, "companies", "q=ada").is_err());
        assert!(decode_cursor(&c, &t, "contacts", "q=bob").is_err());
    }

    #[test]
    fn a_cursor_is_bound_to_its_workspace_and_mode() {
        let t = tenant(Mode::Test);
        let c = encode_cursor(&t, "contacts", "", "con_x");
        assert!(decode_cursor(&c, &tenant(Mode::Live), "contacts", "").is_err());
        let other = Tenant {
            workspace_id: WorkspaceId::from_uuid(uuid::Uuid::max()),
            mode: Mode::Test,
        };
        assert!(decode_cursor(&c, &other, "contacts", "").is_err());
    }

    #[test]
    fn tampered_cursors_are_refused() {
        let t = tenant(Mode::Test);
        let c = encode_cursor(&t, "contacts", "", "con_x");
        let forged = URL_SAFE_NO_PAD.encode(
            String::from_utf8(URL_SAFE_NO_PAD.decode(&c).unwrap())
                .unwrap()
                .replace("con_x", "con_y"),
        );
        assert!(decode_cursor(&forged, &t, "contacts", "").is_err());
        assert!(decode_cursor("not-a-cursor!", &t, "contacts", "").is_err());
        assert!(decode_cursor("", &t, "contacts", "").is_err());
    }

    #[test]
    fn page_sets_has_more_and_cursor() {
        let t = tenant(Mode::Test);
        let params = PageParams {
            limit: 2,
            cursor: None,
        };
        let p = page_from(vec!["c", "b", "a"], &params, &t, "l", "", |s| s.to_string());
        assert_eq!(p.data, vec!["c", "b"]);
        assert!(p.has_more);
        assert_eq!(
            decode_cursor(p.next_cursor.as_deref().unwrap(), &t, "l", "").unwrap(),
            "b"
        );
        let last = page_from(vec!["a"], &params, &t, "l", "", |s| s.to_string());
        assert!(!last.has_more && last.next_cursor.is_none());
    }
}
