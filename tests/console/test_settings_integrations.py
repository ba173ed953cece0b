"""Settings for integrations: webhooks, automations, imports and the email connection, driven
through the console's own forms in test mode (where the `api` fixture's test key sees the same
data), each checked against the API.

- A webhook created in the console shows its signing secret once, on the page that answers the
  create, and never again; its page lists its deliveries; it is disabled and deleted there.
- An automation created with the console's form is listed, and its runs show on its page once a
  contact created through the API triggers it.
- A CSV pasted into the import form runs to `completed` on its page, whose progress bar reloads
  itself meanwhile; its failed row is listed; the API lists the imported contacts.
- The email page shows the connection it saved, never its provider key, not even when the form
  is refused.

Each test makes its own uniquely named data and removes what would act on other tests' data.
"""

import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

import pytest
from conftest import switch_to_test_mode, wait_for_next_page
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _signed_in_test_mode(browser, sign_in, role: str):
    sign_in(browser, role)
    return switch_to_test_mode(browser)


def _submit(browser, form, confirm: bool = False):
    """Clicks the form's submit button and waits for the next page (accepting the console's
    confirmation dialog first when the form asks for one). Waits for a new document rather than
    for the button to go stale, which chromedriver sometimes answers with an inspector error."""
    button = form.find_element(By.CSS_SELECTOR, SUBMIT)

    def click():
        button.click()
        if confirm:
            WebDriverWait(browser, 5).until(EC.alert_is_present()).accept()

    wait_for_next_page(browser, click)


def _path(browser) -> str:
    return unquote(urlparse(browser.current_url).path)


def _wait_for_text(browser, url: str, css: str, wanted, seconds: int = 30):
    """Reloads `url` until the element at `css` has text for which `wanted(text)` holds."""
    def ready(d):
        d.get(url)
        found = d.find_elements(By.CSS_SELECTOR, css)
        return found and wanted(found[0].text)

    try:
        WebDriverWait(browser, seconds, poll_frequency=1).until(ready)
    except Exception as e:
        shown = [el.text for el in browser.find_elements(By.CSS_SELECTOR, css)]
        raise AssertionError(f"{css} on {url} never showed what was awaited: {shown}") from e


class _Receiver:
    """A local HTTP endpoint answering 200 to every POST, counting them."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                received.append((self.path, dict(self.headers), self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = _Receiver()
    yield r
    r.close()


def test_a_webhook_secret_is_shown_once_and_its_deliveries_are_listed(
    browser, sign_in, api, console_url, receiver, screenshot
):
    url = f"http://127.0.0.1:{receiver.port}/{_unique('hook')}"
    description = _unique("Console webhook")
    _signed_in_test_mode(browser, sign_in, "admin")
    browser.get(f"{console_url}/settings/webhooks")

    form = browser.find_element(By.CSS_SELECTOR, "form#webhook-form")
    # Every input is labelled.
    for field in form.find_elements(By.CSS_SELECTOR, "input[id], textarea[id], select[id]"):
        assert form.find_elements(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']"), field.get_attribute("id")
    offered = {box.get_attribute("value") for box in form.find_elements(By.CSS_SELECTOR, "input[type=checkbox][name=events]")}
    assert offered == {"*", "contact.created", "contact.updated", "deal.created", "deal.updated", "deal.stage_changed"}, offered
    form.find_element(By.CSS_SELECTOR, "input[name=url]").send_keys(url)
    form.find_element(By.CSS_SELECTOR, "input[name=events][value='contact.created']").click()
    form.find_element(By.CSS_SELECTOR, "input[name=description]").send_keys(description)
    _submit(browser, form)

    # The answer to the create shows the secret, once.
    secret = browser.find_element(By.CSS_SELECTOR, "#secret").get_attribute("value")
    assert secret.startswith("whsec_"), secret
    assert browser.find_element(By.CSS_SELECTOR, "#webhook-url").text == url
    screenshot(browser, "settings-webhook-secret")
    hooks = api.get("/webhooks", params={"limit": 100}).json()["data"]
    hook = next(h for h in hooks if h["url"] == url)
    assert hook["events"] == ["contact.created"] and hook["description"] == description, hook
    assert "secret" not in hook

    # Never again: not on its page, not in the list.
    page = f"{console_url}/settings/webhooks/{hook['id']}"
    browser.get(page)
    assert not browser.find_elements(By.CSS_SELECTOR, "#secret")
    assert secret not in browser.page_source
    browser.get(f"{console_url}/settings/webhooks")
    row = browser.find_element(By.CSS_SELECTOR, f"tr#webhook-{hook['id']}")
    assert url in row.text and "enabled" in row.text, row.text
    assert secret not in browser.page_source

    # A contact created through the API is delivered, and the delivery is listed on its page.
    contact = api.post("/contacts", json={"first_name": "Hook", "last_name": _unique("Delivered")})
    assert contact.status_code == 201, contact.text
    _wait_for_text(browser, page, "#deliveries tbody tr", lambda t: "contact.created" in t and "succeeded" in t)
    delivered = browser.find_element(By.CSS_SELECTOR, "#deliveries tbody tr").text
    assert "HTTP 200" in delivered, delivered
    assert any(contact.json()["id"].encode() in body for _, _, body in receiver.received)

    # Disabled, then deleted, from its page.
    _submit(browser, browser.find_element(By.CSS_SELECTOR, "form#webhook-enabled"))
    assert browser.find_element(By.CSS_SELECTOR, "#webhook-state").text == "disabled"
    assert api.get(f"/webhooks/{hook['id']}").json()["enabled"] is False
    _submit(browser, browser.find_element(By.CSS_SELECTOR, "form#webhook-delete"), confirm=True)
    assert _path(browser) == "/settings/webhooks"
    assert "deleted" in browser.find_element(By.CSS_SELECTOR, "#notice").text
    assert api.get(f"/webhooks/{hook['id']}").status_code == 404


def test_an_automation_made_in_the_console_runs_on_a_contact_created_through_the_api(
    browser, sign_in, api, console_url, screenshot
):
    name = _unique("Welcome rule")
    last_name = _unique("Automated")
    _signed_in_test_mode(browser, sign_in, "member")
    browser.get(f"{console_url}/settings/automations")

    form = browser.find_element(By.CSS_SELECTOR, "form#automation-form")
    form.find_element(By.CSS_SELECTOR, "input[name=name]").send_keys(name)
    Select(form.find_element(By.CSS_SELECTOR, "select[name=trigger_event]")).select_by_value("contact.created")
    form.find_element(By.CSS_SELECTOR, "input[name=condition_field]").send_keys("last_name")
    Select(form.find_element(By.CSS_SELECTOR, "select[name=condition_op]")).select_by_value("eq")
    form.find_element(By.CSS_SELECTOR, "input[name=condition_value]").send_keys(last_name)
    Select(form.find_element(By.CSS_SELECTOR, "select[name=activity_type]")).select_by_value("note")
    form.find_element(By.CSS_SELECTOR, "textarea[name=body]").send_keys("Welcome {{first_name}}")
    _submit(browser, form)

    # Its page: the definition, readably, and no runs yet.
    assert _path(browser).startswith("/settings/automations/aut_"), browser.current_url
    automation_id = _path(browser).rsplit("/", 1)[1]
    try:
        assert browser.find_element(By.CSS_SELECTOR, "#automation-name").text == name
        definition = browser.find_element(By.CSS_SELECTOR, "#definition").text
        assert "contact.created" in definition and f'last_name eq "{last_name}"' in definition, definition
        assert "create_activity" in definition and "Welcome {{first_name}}" in definition, definition
        assert "No runs yet" in browser.find_element(By.CSS_SELECTOR, "#runs").text

        # Listed.
        browser.get(f"{console_url}/settings/automations")
        row = browser.find_element(By.CSS_SELECTOR, f"tr#automation-{automation_id}")
        assert name in row.text and "contact.created" in row.text and "enabled" in row.text, row.text

        # A contact created through the API triggers it: the run is on its page.
        res = api.post("/contacts", json={"first_name": "Ada", "last_name": last_name})
        assert res.status_code == 201, res.text
        contact_id = res.json()["id"]
        page = f"{console_url}/settings/automations/{automation_id}"
        _wait_for_text(browser, page, "#runs tbody tr.run", lambda t: contact_id in t, seconds=15)
        run = browser.find_element(By.CSS_SELECTOR, "#runs tbody tr.run").text
        assert "contact.created" in run and "create_activity: succeeded" in run, run
        link = browser.find_element(By.CSS_SELECTOR, "#runs tbody tr.run a")
        assert unquote(urlparse(link.get_attribute("href")).path) == f"/contacts/{contact_id}"
        screenshot(browser, "settings-automation")
        activities = api.get("/activities", params={"contact_id": contact_id}).json()["data"]
        assert any(a["type"] == "note" and a.get("body") == "Welcome Ada" for a in activities), activities

        # Disabled, then deleted, from its page.
        _submit(browser, browser.find_element(By.CSS_SELECTOR, "form#automation-enabled"))
        assert browser.find_element(By.CSS_SELECTOR, "#automation-state").text == "disabled"
        assert api.get(f"/automations/{automation_id}").json()["enabled"] is False
        _submit(browser, browser.find_element(By.CSS_SELECTOR, "form#automation-delete"), confirm=True)
        assert _path(browser) == "/settings/automations"
        assert not browser.find_elements(By.CSS_SELECTOR, f"tr#automation-{automation_id}")
    finally:
        # A rule left enabled would log activities on other tests' contacts.
        api.delete(f"/automations/{automation_id}")
    assert api.get(f"/automations/{automation_id}").status_code == 404


def test_a_pasted_csv_import_completes_on_its_page_and_its_rows_reach_the_api(
    browser, sign_in, api, console_url, screenshot
):
    last_name = _unique("Imported")
    mail = last_name.lower()
    csv_text = (
        "first_name,last_name,email\n"
        f"Ada,{last_name},ada.{mail}@example.com\n"
        f"Grace,{last_name},grace.{mail}@example.com\n"
        f"Bad,{last_name},not-an-email\n"
    )
    _signed_in_test_mode(browser, sign_in, "member")
    browser.get(f"{console_url}/settings/imports")

    form = browser.find_element(By.CSS_SELECTOR, "form#import-form")
    assert "paste" in browser.find_element(By.CSS_SELECTOR, "#new-import").find_element(By.XPATH, "..").text.lower()
    Select(form.find_element(By.CSS_SELECTOR, "select[name=object]")).select_by_value("contact")
    Select(form.find_element(By.CSS_SELECTOR, "select[name=on_duplicate]")).select_by_value("skip")
    form.find_element(By.CSS_SELECTOR, "textarea[name=csv]").send_keys(csv_text)
    _submit(browser, form)

    # Its page: a progress bar, reloading itself until the import ends.
    assert _path(browser).startswith("/settings/imports/imp_"), browser.current_url
    import_id = _path(browser).rsplit("/", 1)[1]
    browser.find_element(By.CSS_SELECTOR, "progress#import-progress")
    try:
        WebDriverWait(browser, 60, poll_frequency=1, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#import-status").text == "completed"
        )
    except Exception as e:
        raise AssertionError(f"the import page never showed `completed`: {api.get(f'/imports/{import_id}').text}") from e
    # Completed: no longer reloading, and no Cancel.
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-refresh]")
    assert not browser.find_elements(By.CSS_SELECTOR, "form#import-cancel")
    progress = browser.find_element(By.CSS_SELECTOR, "progress#import-progress")
    assert (progress.get_attribute("value"), progress.get_attribute("max")) == ("3", "3")
    assert browser.find_element(By.CSS_SELECTOR, "#count-created").text == "2"
    assert browser.find_element(By.CSS_SELECTOR, "#count-failed").text == "1"
    errors = browser.find_elements(By.CSS_SELECTOR, "#import-errors tbody tr")
    assert len(errors) == 1 and errors[0].text.startswith("4") and "email" in errors[0].text, [e.text for e in errors]
    screenshot(browser, "settings-import")

    # Listed, and its rows are the API's contacts.
    browser.get(f"{console_url}/settings/imports")
    row = browser.find_element(By.CSS_SELECTOR, f"tr#import-{import_id}")
    assert "completed" in row.text and "3 of 3" in row.text, row.text
    found = api.get("/contacts", params={"q": last_name, "limit": 10}).json()["data"]
    assert sorted(c["email"] for c in found) == [f"ada.{mail}@example.com", f"grace.{mail}@example.com"], found


def test_the_email_page_never_shows_the_provider_key(browser, sign_in, api, console_url, screenshot):
    key = f"pm-{uuid.uuid4().hex}"
    sender = f"{_unique('console')}@example.com"
    _signed_in_test_mode(browser, sign_in, "admin")
    browser.get(f"{console_url}/settings/email")

    def fill(provider: str, api_key: str, base_url: str = ""):
        form = browser.find_element(By.CSS_SELECTOR, "form#connection-form")
        Select(form.find_element(By.CSS_SELECTOR, "select[name=provider]")).select_by_value(provider)
        key_input = form.find_element(By.CSS_SELECTOR, "input[name=api_key]")
        assert key_input.get_attribute("type") == "password"
        assert key_input.get_attribute("value") == "", "the key input is never filled back"
        key_input.send_keys(api_key)
        sender_input = form.find_element(By.CSS_SELECTOR, "input[name=from]")
        sender_input.clear()
        sender_input.send_keys(f"Console Test <{sender}>")
        base = form.find_element(By.CSS_SELECTOR, "input[name=base_url]")
        base.clear()
        base.send_keys(base_url)
        _submit(browser, form)

    # Refused (smtp needs a server): the form comes back with the problem, without the key.
    fill("smtp", key)
    assert "base_url" in browser.find_element(By.CSS_SELECTOR, "#error").text
    assert key not in browser.page_source

    # Saved: the page names the provider and sender, never the key.
    fill("postmark", key)
    notice = browser.find_element(By.CSS_SELECTOR, "#notice").text.lower()
    assert "saved" in notice or "replaced" in notice, notice
    assert browser.find_element(By.CSS_SELECTOR, "#connection-provider").text == "postmark"
    assert sender in browser.find_element(By.CSS_SELECTOR, "#connection-from").text
    assert key not in browser.page_source
    assert browser.find_element(By.CSS_SELECTOR, "input[name=api_key]").get_attribute("value") == ""
    screenshot(browser, "settings-email")
    browser.get(f"{console_url}/settings/email")
    assert key not in browser.page_source

    # Replaced: the new one sends, the old one is gone; the API agrees.
    second_key = f"re-{uuid.uuid4().hex}"
    fill("resend", second_key)
    assert "replaced" in browser.find_element(By.CSS_SELECTOR, "#notice").text.lower()
    assert browser.find_element(By.CSS_SELECTOR, "#connection-provider").text == "resend"
    assert key not in browser.page_source and second_key not in browser.page_source
    connections = api.get("/connections").json()["data"]
    assert [c["provider"] for c in connections] == ["resend"], connections
    assert second_key not in str(connections)

    # Removed.
    _submit(browser, browser.find_element(By.CSS_SELECTOR, "form#connection-remove"), confirm=True)
    assert browser.find_element(By.CSS_SELECTOR, "#no-connection")
    assert api.get("/connections").json()["data"] == []
