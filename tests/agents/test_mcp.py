"""The MCP endpoint through the official `mcp` client over Streamable HTTP.

Each flow runs in two client modes: `legacy` (the initialize handshake, which negotiates
2025-11-25) and `2026-07-28` (the stateless revision, no handshake). 2025-06-18 is checked over
raw HTTP by the Rust black-box tests.
"""

import json
from contextlib import asynccontextmanager

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agent_flows import deal_arguments, has_deals, pipeline_arguments

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]


@asynccontextmanager
async def mcp_client(base_url: str, key: str | None, mode: str):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode) as client:
            yield client


async def call(client, tool: str, arguments: dict) -> dict:
    """Calls a tool that must succeed; returns its structuredContent, checked against the text."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.structured_content
    assert json.loads(result.content[0].text) == result.structured_content, "the text is the same JSON"
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_every_rest_operation_is_a_tool(mode, base_url, test_key, operations):
    async with mcp_client(base_url, test_key, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(operations), "one tool per REST operation, named as its operationId"
    for name, (method, _path, op) in operations.items():
        tool = tools[name]
        assert tool.description == op["description"]
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        hints = tool.annotations
        assert hints.open_world_hint is False
        assert hints.read_only_hint is (method == "GET"), name
        if name.startswith("svc_delete_"):
            assert hints.destructive_hint is True
            assert hints.idempotent_hint is True
    assert tools["svc_create_contact"].annotations.idempotent_hint is False
    assert "idempotency_key" in tools["svc_create_contact"].input_schema["properties"]
    assert "if_match" in tools["svc_update_contact"].input_schema["properties"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_company_and_a_contact_created_through_tools_read_back_over_rest(mode, base_url, test_key, rest, unique):
    async with mcp_client(base_url, test_key, mode) as client:
        company = await call(client, "svc_create_company", {"name": f"Acme {unique}", "domain": f"{unique}.example"})
        contact = await call(
            client,
            "svc_create_contact",
            {"first_name": "Ada", "email": f"ada-{unique}@example.com", "company_id": company["id"], "idempotency_key": f"mcp-{unique}"},
        )
        listed = await call(client, "svc_list_contacts", {"email": f"ada-{unique}@example.com", "limit": 10})
    assert rest.get(f"/companies/{company['id']}") == company
    assert rest.get(f"/contacts/{contact['id']}") == contact
    assert contact["company_id"] == company["id"]
    assert listed["object"] == "list" and [c["id"] for c in listed["data"]] == [contact["id"]]


@pytest.mark.parametrize("mode", MODES)
async def test_a_pipeline_and_a_deal_created_through_tools_read_back_over_rest(mode, base_url, test_key, operations, rest, unique):
    if not has_deals(operations):
        pytest.skip("the catalog has no svc_create_pipeline / svc_create_deal yet; this flow runs once it does")
    async with mcp_client(base_url, test_key, mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"svc_create_pipeline", "svc_create_deal", "svc_get_deal"} <= tools
        contact = await call(client, "svc_create_contact", {"email": f"deal-{unique}@example.com"})
        company = await call(client, "svc_create_company", {"name": f"Deal Co {unique}"})
        pipeline = await call(client, "svc_create_pipeline", pipeline_arguments(unique))
        deal = await call(client, "svc_create_deal", deal_arguments(unique, contact["id"], company["id"]))
    assert pipeline["key"] == f"agents_{unique}"
    assert [s["key"] for s in pipeline["stages"]] == ["new", "won", "lost"]
    assert (deal["pipeline"], deal["stage"], deal["primary_contact_id"], deal["value_cents"]) == (
        f"agents_{unique}",
        "new",
        contact["id"],
        125000,
    )
    assert rest.get_by("svc_get_deal", deal["id"]) == deal
    pipelines = rest.get("/pipelines")["data"]
    assert any(p["key"] == f"agents_{unique}" for p in pipelines)


@pytest.mark.parametrize("mode", MODES)
async def test_a_bad_call_returns_a_problem_document(mode, base_url, test_key):
    async with mcp_client(base_url, test_key, mode) as client:
        typo = await client.call_tool("svc_create_contact", {"frist_name": "Ada"})
        missing = await client.call_tool("svc_get_contact", {"id": "con_00000000000000000000000000"})
        with pytest.raises(MCPError) as unknown_tool:
            await client.call_tool("svc_create_contcat", {})
    assert typo.is_error
    problem = typo.structured_content
    assert (problem["status"], problem["code"], problem["field"]) == (422, "unknown_field", "frist_name")
    assert problem["suggestion"] == "did you mean `first_name`?"
    assert problem["type"] == f"{base_url}/errors/unknown_field"
    assert json.loads(typo.content[0].text) == problem
    assert missing.is_error and missing.structured_content["code"] == "not_found"
    assert "svc_create_contcat" in str(unknown_tool.value)


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in leaves(e)]
    return [error]


@pytest.mark.parametrize("key", [None, "svc_test_00000000000000000000000000000000"], ids=["missing", "unknown"])
async def test_a_missing_or_bad_key_is_refused(key, base_url):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    res = httpx.post(f"{base_url}/mcp", json=body, headers={**headers, "Accept": "application/json, text/event-stream"})
    assert res.status_code == 401
    assert res.headers["www-authenticate"] == "Bearer"
    assert res.headers["content-type"] == "application/problem+json"
    assert res.json()["code"] == "unauthorized"
    with pytest.raises(Exception) as refused:
        async with mcp_client(base_url, key, "legacy") as client:
            await client.list_tools()
    assert any(isinstance(e, MCPError) for e in leaves(refused.value)), refused.value
