"""The A2A endpoint through the official `a2a-sdk` client: the agent card, then JSON-RPC at /a2a."""

import uuid
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor
from a2a.client.auth.credentials import CredentialService
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.errors import A2AClientError
from a2a.helpers import get_data_parts, get_text_parts, new_data_message
from a2a.types.a2a_pb2 import GetTaskRequest, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from agent_flows import deal_arguments, has_deals, pipeline_arguments

pytestmark = pytest.mark.anyio

TOOL_CALL_EXTENSION = "urn:crm:a2a:tool-call:v1"


class Key(CredentialService):
    """Hands the key to whichever bearer scheme the agent card declares."""

    def __init__(self, key: str | None):
        self.key = key

    async def get_credentials(self, security_scheme_name, context):
        return self.key


async def card_of(base_url: str):
    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, base_url).get_agent_card()


@asynccontextmanager
async def a2a_client(base_url: str, key: str | None, version: str = "1.0"):
    """A client built from the agent card, authenticating as the card's securitySchemes say."""
    card = await card_of(base_url)
    interfaces = [i for i in card.supported_interfaces if i.protocol_version == version]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(interfaces)
    async with httpx.AsyncClient(timeout=30) as http:
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card, interceptors=[AuthInterceptor(Key(key))])
        yield client


async def send(client, tool: str, arguments: dict | None = None, **part) -> Task:
    data = {"tool": tool, "arguments": arguments or {}} if tool else part
    message = new_data_message(data, role=Role.ROLE_USER)
    tasks = [event.task async for event in client.send_message(SendMessageRequest(message=message))]
    assert len(tasks) == 1 and tasks[0].id, tasks
    return tasks[0]


def result(task: Task) -> dict:
    """The REST body a completed task carries as its artifact's data part."""
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, MessageToDict(task.status)
    (data,) = get_data_parts(task.artifacts[0].parts)
    return data


def problem(task: Task, state) -> dict:
    """The problem document a failed or rejected task carries in its status message."""
    assert task.status.state == state, MessageToDict(task.status)
    assert task.status.message.role == Role.ROLE_AGENT
    (doc,) = get_data_parts(task.status.message.parts)
    assert get_text_parts(task.status.message.parts) == [doc["detail"]]
    return doc


async def test_the_agent_card_lists_every_rest_operation_as_a_skill(base_url, operations):
    card = await card_of(base_url)
    assert {s.id for s in card.skills} == set(operations), "one skill per REST operation, id = operationId"
    for skill in card.skills:
        assert skill.description == operations[skill.id][2]["description"]
        assert "application/json" in skill.input_modes
    (jsonrpc, legacy) = card.supported_interfaces
    assert (jsonrpc.url, jsonrpc.protocol_binding, jsonrpc.protocol_version) == (f"{base_url}/a2a", "JSONRPC", "1.0")
    assert (legacy.url, legacy.protocol_version) == (f"{base_url}/a2a", "0.3")
    (scheme_name,) = card.security_schemes
    assert card.security_schemes[scheme_name].http_auth_security_scheme.scheme.lower() == "bearer"
    assert scheme_name in card.security_requirements[0].schemes
    (extension,) = card.capabilities.extensions
    assert extension.uri == TOOL_CALL_EXTENSION
    schemas = MessageToDict(extension.params)["inputSchemas"]
    assert set(schemas) == set(operations)
    assert "idempotency_key" in schemas["svc_create_contact"]["properties"]


async def test_a_company_and_a_contact_created_through_skills_read_back_over_rest(base_url, test_key, rest, unique):
    async with a2a_client(base_url, test_key) as client:
        company = result(await send(client, "svc_create_company", {"name": f"Acme {unique}"}))
        task = await send(client, "svc_create_contact", {"email": f"a2a-{unique}@example.com", "company_id": company["id"]})
        contact = result(task)
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert rest.get(f"/companies/{company['id']}") == company
    assert rest.get(f"/contacts/{contact['id']}") == contact
    assert again.id == task.id and result(again) == contact


async def test_a_pipeline_and_a_deal_created_through_skills_read_back_over_rest(base_url, test_key, operations, rest, unique):
    if not has_deals(operations):
        pytest.skip("the catalog has no svc_create_pipeline / svc_create_deal yet; this flow runs once it does")
    card = await card_of(base_url)
    assert {"svc_create_pipeline", "svc_create_deal", "svc_get_deal"} <= {s.id for s in card.skills}
    async with a2a_client(base_url, test_key) as client:
        contact = result(await send(client, "svc_create_contact", {"email": f"a2a-deal-{unique}@example.com"}))
        company = result(await send(client, "svc_create_company", {"name": f"A2A Deal Co {unique}"}))
        pipeline = result(await send(client, "svc_create_pipeline", pipeline_arguments(unique)))
        deal = result(await send(client, "svc_create_deal", deal_arguments(unique, contact["id"], company["id"])))
    assert pipeline["key"] == f"agents_{unique}"
    assert (deal["pipeline"], deal["stage"], deal["primary_contact_id"], deal["value_cents"]) == (
        f"agents_{unique}",
        "new",
        contact["id"],
        125000,
    )
    assert rest.get_by("svc_get_deal", deal["id"]) == deal


async def test_a_failed_call_carries_a_problem_document_and_a_malformed_one_is_rejected(base_url, test_key):
    async with a2a_client(base_url, test_key) as client:
        failed = await send(client, "svc_create_contact", {"frist_name": "Ada"})
        missing = await send(client, "svc_get_company", {"id": "cmp_00000000000000000000000000"})
        unknown = await send(client, "svc_create_contcat", {})
        no_tool = await send(client, None, note="no tool here")
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
        kept = await client.get_task(GetTaskRequest(id=failed.id))
    doc = problem(failed, TaskState.TASK_STATE_FAILED)
    assert (doc["status"], doc["code"], doc["suggestion"]) == (422, "unknown_field", "did you mean `first_name`?")
    assert doc["type"] == f"{base_url}/errors/unknown_field"
    assert problem(missing, TaskState.TASK_STATE_FAILED)["code"] == "not_found"
    assert problem(unknown, TaskState.TASK_STATE_REJECTED)["suggestion"] == "did you mean `svc_create_contact`?"
    assert problem(no_tool, TaskState.TASK_STATE_REJECTED)["field"] == "parts"
    assert problem(kept, TaskState.TASK_STATE_FAILED) == doc


async def test_a_task_is_not_visible_to_the_other_mode(base_url, test_key, live_key):
    async with a2a_client(base_url, test_key) as client:
        task = await send(client, "svc_list_contacts", {"limit": 1})
    async with a2a_client(base_url, live_key) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id))


@pytest.mark.parametrize("key", [None, "svc_test_00000000000000000000000000000000"], ids=["missing", "unknown"])
async def test_a_missing_or_bad_key_is_refused_before_any_task_exists(key, base_url):
    async with a2a_client(base_url, key) as client:
        with pytest.raises(A2AClientError) as refused:
            await send(client, "svc_list_contacts", {})
    response = refused.value.__cause__.response
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "unauthorized"


async def test_a_0_3_client_gets_the_same_answers(base_url, test_key, rest, unique):
    async with a2a_client(base_url, test_key, version="0.3") as client:
        assert type(client._transport).__name__ == "CompatJsonRpcTransport"
        company = result(await send(client, "svc_create_company", {"name": f"Legacy {unique}"}))
        failed = await send(client, "svc_get_company", {"id": "cmp_00000000000000000000000000"})
    assert rest.get(f"/companies/{company['id']}") == company
    assert problem(failed, TaskState.TASK_STATE_FAILED)["code"] == "not_found"
