"""Black-box tests of the agent endpoints with the official Python clients.

`cargo xtask test` starts `crm-server` on a fresh SQLite database and on a fresh Postgres
database, creates a workspace in each, and runs this suite once per server with:

- CRM_BASE_URL: the server, e.g. http://127.0.0.1:41234
- CRM_TEST_KEY, CRM_LIVE_KEY: the workspace's keys
- CRM_BACKEND: `sqlite` or `postgres` (shown in the report)

Tests share the workspace, so each one makes its own records (unique emails and keys).
"""

import os
import uuid

import httpx
import pytest


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise pytest.UsageError(f"{name} is not set: run this suite through `cargo xtask test` (or `cargo xtask agents`)")
    return value


def pytest_report_header(config):
    return f"crm-server at {os.environ.get('CRM_BASE_URL', '?')} on {os.environ.get('CRM_BACKEND', '?')}"


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def base_url() -> str:
    return _env("CRM_BASE_URL").rstrip("/")


@pytest.fixture(scope="session")
def test_key() -> str:
    return _env("CRM_TEST_KEY")


@pytest.fixture(scope="session")
def live_key() -> str:
    return _env("CRM_LIVE_KEY")


@pytest.fixture(scope="session")
def openapi(base_url) -> dict:
    """The REST surface: the OpenAPI document the server generates from its operation catalog."""
    res = httpx.get(f"{base_url}/v1/openapi.json")
    res.raise_for_status()
    return res.json()


@pytest.fixture(scope="session")
def operations(openapi) -> dict:
    """Every REST operation by operationId (the catalog's name for it): {name: (method, path, op)}."""
    ops = {}
    for path, item in openapi["paths"].items():
        for method, op in item.items():
            # Alias routes (`x-alias-of`) are extra REST paths of an operation, not operations.
            if "x-alias-of" not in op:
                ops[op["operationId"]] = (method.upper(), path, op)
    return ops


class Rest:
    """Reads over REST, to check what the agent endpoints wrote."""

    def __init__(self, base_url: str, key: str, operations: dict):
        self.client = httpx.Client(base_url=f"{base_url}/v1", headers={"Authorization": f"Bearer {key}"})
        self.operations = operations

    def get(self, path: str) -> dict:
        res = self.client.get(path)
        assert res.status_code == 200, res.text
        return res.json()

    def get_by(self, operation: str, id: str) -> dict:
        """GET the record `id` through the REST route of `operation` (e.g. svc_get_deal)."""
        method, path, _ = self.operations[operation]
        assert method == "GET", operation
        return self.get(path.replace("{id}", id))


@pytest.fixture
def rest(base_url, test_key, operations):
    r = Rest(base_url, test_key, operations)
    yield r
    r.client.close()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:12]
