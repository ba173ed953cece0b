//! hyper answers a request head it cannot parse by itself, before any service sees it: a status
//! line, `content-length: 0` and nothing else. The edge's rule is that every error is a problem
//! document with a `Request-Id` (decisions §22), and hyper has no hook for those answers, so the
//! connection's socket (`io.rs`) swaps them as hyper writes them: an error status without a
//! `request-id` header can only be hyper's own, since every answer of the application carries one.

use crm_api::{ErrorCode, Problem};

/// The problem documents that stand in for hyper's own answers, rendered once.
pub(crate) struct OwnAnswers {
    bad_request: Vec<u8>,
    headers_too_large: Vec<u8>,
}

impl OwnAnswers {
    /// `errors_base_url`: where the problem `type`s point (`crm_api::Api::errors_base_url`).
    pub(crate) fn new(errors_base_url: &str) -> OwnAnswers {
        let render = |code: ErrorCode, detail: &str| {
            serde_json::to_vec(&Problem::new(code, detail).to_json(errors_base_url))
                .expect("a problem document serializes")
        };
        OwnAnswers {
            bad_request: render(
                ErrorCode::BadRequest,
                "the request line or a header is malformed",
            ),
            headers_too_large: render(
                ErrorCode::HeadersTooLarge,
                "the request head exceeds 64 KiB or 100 header lines",
            ),
        }
    }

    /// The whole answer to write instead of `head`, when `head` starts one of hyper's own.
    pub(crate) fn replacement_for(&self, head: &[u8]) -> Option<Vec<u8>> {
        let status = head
            .strip_prefix(b"HTTP/1.1 ")
            .or_else(|| head.strip_prefix(b"HTTP/1.0 "))?;
        if !matches!(status.first(), Some(b'4' | b'5')) {
            return None;
        }
        let end = find(head, b"\r\n\r\n")?;
        if find(&head[..end], b"\r\nrequest-id:").is_some() {
            return None;
        }
        let (status, body) = match &status[..3] {
            // 414 too: a request line over the limit is a head over it.
            b"431" | b"414" => (
                "431 Request Header Fields Too Large",
                &self.headers_too_large,
            ),
            _ => ("400 Bad Request", &self.bad_request),
        };
        let request_id = crate::request_context::new_request_id();
        let mut answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nrequest-id: {}\r\nconnection: close\r\n\r\n",
            body.len(),
            request_id.to_str().unwrap_or_default(),
        )
        .into_bytes();
        answer.extend_from_slice(body);
        tracing::debug!(status, "refused a request head that does not parse");
        Some(answer)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers() -> OwnAnswers {
        OwnAnswers {
            bad_request: b"{\"code\":\"bad_request\"}".to_vec(),
            headers_too_large: b"{\"code\":\"headers_too_large\"}".to_vec(),
        }
    }

    #[test]
    fn hypers_own_answers_become_problem_documents_with_a_request_id() {
        let own = answers();
        let replaced = own
            .replacement_for(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n")
            .unwrap();
        let text = String::from_utf8(replaced).unwrap();
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
        assert!(text.contains("\r\nrequest-id: req_"), "{text}");
        assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\n{\"code\":\"bad_request\"}"),
            "{text}"
        );
        for status in ["431 Request Header Fields Too Large", "414 URI Too Long"] {
            let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
            let text = String::from_utf8(own.replacement_for(head.as_bytes()).unwrap()).unwrap();
            assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
            assert!(text.ends_with("headers_too_large\"}"), "{text}");
        }
    }

    #[test]
    fn the_applications_answers_pass_untouched() {
        let own = answers();
        for head in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-type: application/problem+json\r\nrequest-id: req_1\r\ncontent-length: 2\r\n\r\n{}",
            b"{\"HTTP/1.1 400\": 1}",
            b"",
        ] {
            assert!(own.replacement_for(head).is_none());
        }
    }
}
