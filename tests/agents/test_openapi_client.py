"""A client generated from the committed OpenAPI document (docs/openapi.json) by
openapi-python-client names each body once: one `Contact` class for create, get, update and list,
checked by type-checking a small program against the generated package with mypy.

Needs no server: it reads the document `cargo xtask openapi` writes. Both tools come from
tests/agents/requirements.txt; when they are missing the test fails, it never skips.
"""

import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    from typing import assert_type

    from crm_client import AuthenticatedClient
    from crm_client.api.default import (
        svc_create_contact,
        svc_get_contact,
        svc_list_contacts,
        svc_update_contact,
    )
    from crm_client.models import (
        Contact,
        ContactListShaped,
        ContactShaped,
        DryRun,
        Problem,
        ContactCreate,
        ContactUpdate,
    )


    def contacts(client: AuthenticatedClient) -> list[Contact | ContactShaped]:
        created = svc_create_contact.sync(client=client, body=ContactCreate(first_name="Ada"))
        # 201 the contact; 200 the envelope of `dry_run=true`.
        assert_type(created, Contact | DryRun | Problem | None)
        assert isinstance(created, Contact)
        # Reads that `fields=` may shape answer the shaped record (only id and object required).
        fetched = svc_get_contact.sync(created.id, client=client)
        assert isinstance(fetched, ContactShaped)
        updated = svc_update_contact.sync(
            fetched.id, client=client, body=ContactUpdate(last_name="Lovelace")
        )
        assert isinstance(updated, Contact)
        page = svc_list_contacts.sync(client=client)
        assert isinstance(page, ContactListShaped)
        listed: list[ContactShaped] = page.data
        version: int = updated.version
        assert version >= created.version
        return [created, fetched, updated, *listed]
    """
)


def tool(module: str) -> None:
    try:
        __import__(module)
    except ImportError as e:
        pytest.fail(
            f"{module} is not installed ({e}): install tests/agents/requirements.txt "
            "(cargo xtask test does, into target/venv)"
        )


def run(*args: object, cwd: pathlib.Path) -> None:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args[2]} failed:\n{done.stdout}\n{done.stderr}"


def test_a_generated_client_has_one_contact_class(tmp_path: pathlib.Path) -> None:
    tool("openapi_python_client")
    tool("mypy")
    config = tmp_path / "config.yaml"
    # The default post hooks run ruff, which the document does not need.
    config.write_text("post_hooks: []\n")
    run(
        sys.executable, "-m", "openapi_python_client", "generate",
        "--path", ROOT / "docs" / "openapi.json",
        "--meta", "none",
        "--output-path", tmp_path / "crm_client",
        "--config", config,
        cwd=tmp_path,
    )
    models = {p.stem for p in (tmp_path / "crm_client" / "models").glob("*.py")}
    assert {"contact", "contact_shaped", "contact_list_shaped"} <= models, sorted(models)
    per_operation = sorted(
        m for m in models if "contact" in m and ("response_20" in m or "data_item" in m)
    )
    assert per_operation == [], per_operation
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    run(
        sys.executable, "-m", "mypy",
        "--strict", "--follow-imports=silent", "--no-incremental",
        program,
        cwd=tmp_path,
    )
