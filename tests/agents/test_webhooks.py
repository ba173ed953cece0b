"""Webhook signatures verified by independent implementations: the Standard Webhooks reference
library (`standardwebhooks`) for the `webhook-*` headers, and Python's own `hmac` for
`Svc-Signature`. A real delivery from the server to a receiver started here."""

import hashlib
import hmac
import json
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class _Receiver(BaseHTTPRequestHandler):
    got: "queue.Queue[tuple[dict, bytes]]"

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.got.put(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.got = queue.Queue()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def _rest(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=f"{base_url}/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_a_real_delivery_verifies_with_standardwebhooks_and_hmac(base_url, test_key, receiver):
    rest = _rest(base_url, test_key)
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    res = rest.post("/webhooks", json={"url": url, "events": ["contact.created"]})
    assert res.status_code == 201, res.text
    hook = res.json()
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    try:
        email = f"wh-{uuid.uuid4().hex}@example.com"
        res = rest.post("/contacts", json={"email": email})
        assert res.status_code == 201, res.text
        contact_id = res.json()["id"]

        deadline = time.monotonic() + 30
        while True:
            headers, body = receiver.got.get(timeout=max(0.1, deadline - time.monotonic()))
            if json.loads(body)["data"]["id"] == contact_id:
                break

        # The Standard Webhooks reference implementation accepts it...
        payload = Webhook(secret).verify(body, headers)
        assert payload["type"] == "contact.created"
        assert payload["data"]["email"] == email
        assert headers["webhook-id"] == headers["svc-delivery"]
        # ...and refuses it when a byte of the body or another secret is used.
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body.replace(b"contact.created", b"contact.updated"), headers)
        other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
        with pytest.raises(WebhookVerificationError):
            Webhook(other).verify(body, headers)

        # Svc-Signature: hex HMAC-SHA256 of "t.body" keyed with the whole secret string.
        parts = dict(p.split("=", 1) for p in headers["svc-signature"].split(","))
        expected = hmac.new(secret.encode(), parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(parts["v1"], expected)
        assert headers["svc-event"] == "contact.created"
    finally:
        rest.delete(f"/webhooks/{hook['id']}")
