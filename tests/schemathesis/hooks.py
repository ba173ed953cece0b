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
    # where a condition (automation `conditions`, sequence `exit_when` and `trigger.filter`) or a
    # set_field action names a field: the fields it may name are the built-in ones and the
    # registered ones.
    "unknown_field": (
        "custom_fields",
        re.compile(r"^(conditions|exit_when|trigger\.filter)\[\d+\]\.field$"),
        re.compile(r"^actions\[\d+\]\.field$"),
    ),
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


# `validation_failed` whose field and detail match: refusals that depend on live state, and
# rules between the items of an array that JSON Schema cannot state.
#
# A custom field registered at run time (POST /fields) takes values of its registered type, and
# one registered with `required: true` must then be given on every new record of its object:
# which keys exist, their types and which are required is registry state.
#
# Enrolling a contact in a sequence needs the contact to have an e-mail address: that is the
# stored contact's data, which the enroll request only names by id (like `invalid_reference`).
#
# A new pipeline's stages may each be a key or a `{key, ...}` object, A new pipeline's stages may each be a key or a `{key, ...}` object,
# and no two may share a key; `uniqueItems` compares whole items, so `["a", {"key": "a"}]`
# passes it. The document says the rule in words (the create body's `stages` description).
#
# An upsert creates a company only when no active company has the domain, and then needs `name`;
# whether one matches is live state (the schema requires `name` wherever it always is).
#
# A company domain is converted to ASCII by IDNA (UTS #46), whose table of allowed code points no
# regular expression in the document can carry; the document states the shape around it.
#
# A pipeline keeps at least one stage: whether the stage deleted is its last is live state.
#
# Registering a key again with `unique: true` and no `data_type` makes the registered field unique:
# whether its type (registered earlier) can be unique is registry state. The document states the
# rule where the request names the type.
CROSS_ITEM = [
    (re.compile(r"^unique$"), "only text, email, url and number fields can be unique"),
    (re.compile(r"^key$"), "a pipeline keeps at least one stage"),
    (re.compile(r"^domain$"), "must be a domain such as example.com"),
    (re.compile(r"^name$"), "is required"),
    (re.compile(r"^custom_fields\.[a-z][a-z0-9_]*$"), ""),
    (re.compile(r"^contact_id$"), "has no email address"),
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


def _batch_refused_each_bad_operation(case, response):
    """Whether a non-atomic batch answered 200 with a failure for every operation the schema
    refuses. A batch reports each operation's outcome in its own result (docs/decisions.md,
    "Batch"): one bad operation among good ones is answered in its result, not by refusing the
    request, so a schema-violating operation is rejected there."""
    if case.path != "/batch" or response.status_code != 200:
        return False
    answer = _problem(response) or {}
    # A dry run (`dry_run=true`) answers the envelope, holding what the real call would answer.
    if answer.get("object") == "dry_run" and isinstance(answer.get("result"), dict):
        answer = answer["result"]
    results = answer.get("results") or []
    operations = (case.body or {}).get("operations") if isinstance(case.body, dict) else None
    if not isinstance(operations, list) or len(results) != len(operations):
        return False
    by_index = {r.get("index"): r for r in results if isinstance(r, dict)}
    for i, operation in enumerate(operations):
        if not _valid_operation(operation):
            status = (by_index.get(i) or {}).get("status") or 0
            if not 400 <= status < 500:
                return False
    return True


def _valid_operation(operation):
    """The envelope of one batch operation as the document states it."""
    if not isinstance(operation, dict):
        return False
    if operation.get("op") not in ("create", "update", "delete"):
        return False
    if operation.get("object") not in ("contact", "deal"):
        return False
    if operation.get("op") != "create" and not (
        isinstance(operation.get("id"), str) and operation["id"]
    ):
        return False
    data = operation.get("data")
    return data is None or isinstance(data, dict)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep a failure unless it is a refusal that EXCLUDED explains or a soft-deleted record."""
    if failure.code == "ST301":
        return not case.path.startswith(SOFT_DELETED)
    if failure.code == "ST201" and response is not None:
        return not _batch_refused_each_bad_operation(case, response)
    if failure.code != "ST202" or response is None:
        return True
    problem = _problem(response)
    if not isinstance(problem, dict):
        return True
    return not (
        _forgiven(problem)
        or _upsert_key_required(case, problem)
        or _import_file(case, problem)
        or _export_filter_of_another_object(case, problem)
    )


# An export takes its object's list filters and refuses another object's (`include_deleted` is
# no filter of activities, `email` none of deals): which filters apply depends on the `object`
# parameter beside them, a rule between query parameters that OpenAPI cannot state. Each
# parameter's description names the objects it filters.
EXPORT_FILTER = re.compile(r"^`[a-z_.]+` is not a filter of the (contact|company|deal|activity) list")


def _export_filter_of_another_object(case, problem):
    """Whether `problem` refuses an export's filter for the object it names."""
    return (
        case.path == "/exports"
        and case.method.upper() == "POST"
        and problem.get("code") == "validation_failed"
        and EXPORT_FILTER.match(problem.get("detail") or "") is not None
    )


def _import_file(case, problem):
    """Whether `problem` refuses an import's CSV file for its content (see CSV_CONTENT)."""
    return (
        case.path == "/imports"
        and case.method.upper() == "POST"
        and problem.get("code") in CSV_CONTENT
        and problem.get("field") not in ("object", "on_duplicate", "mapping", "dry_run")
    )


# An upsert without `match` matches on the contact's email or the company's domain, which it then
# needs; with `match=custom_fields.<key>` it needs neither. A rule between a query parameter and
# the body that OpenAPI cannot state, so the body schema leaves both optional.
UPSERT_KEYS = {"/contacts/upsert": "email", "/companies/upsert": "domain"}


def _upsert_key_required(case, problem):
    """Whether `problem` is an upsert's refusal of a body without its key, sent without `match`."""
    key = UPSERT_KEYS.get(case.path)
    return (
        key is not None
        and "match" not in (case.query or {})
        and problem.get("code") == "validation_failed"
        and problem.get("field") == key
        and "is required to upsert" in (problem.get("detail") or "")
    )


# `fields=custom_fields.<key>` names a custom field, which must be registered (POST /fields, at
# run time): the document gives the key's shape, the registry decides which keys exist.
UNREGISTERED_PROJECTION = re.compile(r"^unknown name `custom_fields\.[a-z][a-z0-9_]*` in `fields`$")


# `match=custom_fields.<key>` names a unique custom field of the object (POST /fields registers it
# with `unique: true`, at run time): the document gives the key's shape, the registry decides
# which keys exist and are unique.
UNREGISTERED_MATCH = re.compile(
    r"^match must be custom_fields\.<key> of a unique (contact|company|deal) field$"
)

# An import's file is CSV text, whose header row must name the object's fields (built-in ones and
# the custom fields registered at run time): the document states a string, and CSV's grammar and
# the registry are more than a schema of a string can carry. The file's refusals are
# `validation_failed` (no header row, a malformed line) and `unknown_field` (a column naming no
# field); the query parameters beside it are stated exactly.
CSV_CONTENT = ("validation_failed", "unknown_field")


def _forgiven(problem):
    """Whether a refusal depends only on live state (EXCLUDED, LIVE_FIELDS, CROSS_ITEM). An
    atomic batch that wrote nothing is forgiven when each operation's own refusal is: a
    well-formed id of a record that does not exist is `not_found` there."""
    code = problem.get("code")
    errors = problem.get("errors")
    if code == "bad_request" and UNREGISTERED_MATCH.match(problem.get("detail") or ""):
        return True
    if (
        code == "bad_request"
        and problem.get("field") == "fields"
        and UNREGISTERED_PROJECTION.match(problem.get("detail") or "")
    ):
        return True
    if code == "validation_failed" and problem.get("field") == "operations" and errors:
        return all(
            isinstance(e, dict)
            and isinstance(e.get("error"), dict)
            and (e["error"].get("code") == "not_found" or _forgiven(e["error"]))
            for e in errors
        )
    if code == "validation_failed" and problem.get("field") in LIVE_FIELDS:
        return True
    if code == "validation_failed" and any(
        field.match(problem.get("field") or "") and detail in (problem.get("detail") or "")
        for field, detail in CROSS_ITEM
    ):
        return True
    if code not in EXCLUDED:
        return False
    fields = EXCLUDED[code]
    if fields is None:
        return True
    field = problem.get("field") or ""
    return any(_names(f, field) for f in fields)


def _names(pattern, field):
    """Whether `field` is `pattern` (a name, and the names under it) or matches it (a regex)."""
    if isinstance(pattern, str):
        return field == pattern or field.startswith(pattern + ".")
    return pattern.match(field) is not None
