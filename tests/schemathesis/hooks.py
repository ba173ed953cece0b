"""schemathesis hooks for `cargo xtask schemathesis` (loaded by schemathesis.toml beside it).

Two things only, both about the run's own test data, never about the document:

- The run must keep its credentials. The fuzzer reads key ids from `GET /keys` and then rolls or
  revokes them, the key it is calling with among them; every later request would answer 401 and
  test nothing. Requests that would roll or revoke a key the run was started with are pointed at
  a well-formed key id that does not exist (404) instead.
- The only schema-valid requests the server may refuse are those whose answer depends on live
  state that a document cannot describe (see EXCLUDED below). Any other refusal of a
  schema-valid request is the document's fault and fails the run.
"""

import json
import os
import re
import urllib.request

import schemathesis

# A well-formed key id (`key_` + 26 lowercase Crockford characters, first at most 7) that no
# workspace holds.
ABSENT_KEY_ID = "key_00000000000000000000000000"

_protected = None


def protected_key_ids():
    """The ids of the keys the run was started with, read once from `GET /keys`."""
    global _protected
    if _protected is None:
        request = urllib.request.Request(
            os.environ["CRM_ST_URL"].rstrip("/") + "/keys?limit=100",
            headers={"Authorization": "Bearer " + os.environ["CRM_ST_KEY"]},
        )
        with urllib.request.urlopen(request) as response:
            _protected = {key["id"] for key in json.load(response)["data"]}
    return _protected


@schemathesis.hook
def before_call(context, case, kwargs):
    if not case.operation.path.startswith("/keys/{id}") or case.method.upper() == "GET":
        return
    key_id = (case.path_parameters or {}).get("id")
    if key_id in protected_key_ids():
        case.path_parameters["id"] = ABSENT_KEY_ID


# The problem codes a schema-valid request may be answered with: each depends on state the
# document cannot know. A `field` prefix, where given, narrows the code to those fields.
EXCLUDED = {
    # A well-formed id of a record that does not exist in this workspace and mode: the schema
    # can give an id's shape, not which ids exist.
    "invalid_reference": None,
    # A value outside a live enum group (`contact.type`, `company.industry`, ... which POST /enums
    # extends at run time): the schema cannot list values that are registered later.
    "unknown_value": None,
    # A custom field key that is not registered (POST /fields registers them at run time), also
    # where a condition or a set_field action names a field.
    "unknown_field": ("custom_fields",),
    # A contact needs at least one identifier, which only a top-level `anyOf` could say, and
    # tool-calling clients refuse such a root schema (docs/decisions.md, "Errors and HTTP").
    "identifier_required": None,
    # A well-formed cursor that this server did not issue for this list.
    "invalid_cursor": None,
    # An If-Match version other than the record's current one.
    "version_conflict": None,
}

# `validation_failed` on these fields depends on live state too.
LIVE_FIELDS = {
    # Making the default pipeline not the default is refused (a workspace always has one);
    # `false` on any other pipeline is a no-op. Which one is the default is live state.
    "is_default",
    # A stage's position is from 0 to the pipeline's current number of stages.
    "position",
    # `pipeline` (a key or id) and `pipeline_id` naming two different pipelines: which pipeline
    # a key names is live state, and OpenAPI cannot say that two parameters exclude each other.
    "pipeline_id",
}


# `validation_failed` whose field and detail match: rules between the items of an array that
# JSON Schema cannot state. A new pipeline's stages may each be a key or a `{key, ...}` object,
# and no two may share a key; `uniqueItems` compares whole items, so `["a", {"key": "a"}]`
# passes it. The document says the rule in words (the create body's `stages` description).
CROSS_ITEM = [
    (re.compile(r"^stages\[\d+\]\.key$"), "appears twice"),
]


def _problem(response):
    try:
        return json.loads(response.content)
    except (ValueError, TypeError):
        return {}


# Contacts, companies and deals are soft-deleted: after DELETE the record still answers 200 with
# `deleted_at` set (and can be restored), by design (docs/decisions.md), where the
# `use_after_free` check expects 404.
SOFT_DELETED = ("/contacts/", "/companies/", "/deals/")


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep a failure unless it is a refusal that EXCLUDED explains or a soft-deleted record."""
    if failure.code == "ST301":
        return not case.path.startswith(SOFT_DELETED)
    if failure.code != "ST202" or response is None:
        return True
    problem = _problem(response)
    code = problem.get("code") if isinstance(problem, dict) else None
    if code == "validation_failed" and problem.get("field") in LIVE_FIELDS:
        return False
    if code == "validation_failed" and any(
        field.match(problem.get("field") or "") and detail in (problem.get("detail") or "")
        for field, detail in CROSS_ITEM
    ):
        return False
    if code not in EXCLUDED:
        return True
    fields = EXCLUDED[code]
    if fields is None:
        return False
    field = problem.get("field") or ""
    return not any(field == f or field.startswith(f + ".") for f in fields)
