"""Browser tests of the web console (`/`, server-rendered HTML) in a real headless Chromium.

`cargo xtask console` (and `cargo xtask test`) starts `crm-server` on a fresh SQLite database and
on a fresh Postgres database, creates a workspace with an admin, a member and a viewer in each,
and runs this suite once per server with:

- CRM_CONSOLE_URL: the server, e.g. http://127.0.0.1:41234 (the console is at `/`)
- CRM_API_URL: the REST API, CRM_CONSOLE_URL + `/v1`
- CRM_API_KEY: the workspace's test-mode secret key (scope `*`), for setting up data
- CRM_{ADMIN,MEMBER,VIEWER}_{EMAIL,PASSWORD}: the three users
- CRM_STORE: `sqlite` or `postgres` (shown in the report)
- CRM_SCREENSHOTS: where `screenshot` writes the documentation's images (docs/console), on
  the SQLite run only; unset, `screenshot` does nothing
- CHROMIUM, CHROMEDRIVER: the browser and its driver
- CRM_CONSOLE_FAILURES: where a failed test leaves its screenshot and page source
  (default target/console-failures)

Tests share the workspace and its users, so each one makes its own records.
"""

import os
import re
import uuid
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROLES = ("admin", "member", "viewer")
SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise pytest.UsageError(f"{name} is not set: run this suite through `cargo xtask console` (or `cargo xtask test`)")
    return value


def pytest_report_header(config):
    return f"crm-server console at {os.environ.get('CRM_CONSOLE_URL', '?')} on {os.environ.get('CRM_STORE', '?')}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test's item, so `browser` knows whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def console_url() -> str:
    return _env("CRM_CONSOLE_URL").rstrip("/")


@pytest.fixture(scope="session")
def api_url() -> str:
    return _env("CRM_API_URL").rstrip("/")


@pytest.fixture(scope="session")
def users() -> dict:
    """{role: (email, password)} for admin, member and viewer."""
    return {role: (_env(f"CRM_{role.upper()}_EMAIL"), _env(f"CRM_{role.upper()}_PASSWORD")) for role in ROLES}


def _failures_dir() -> Path:
    configured = os.environ.get("CRM_CONSOLE_FAILURES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "target" / "console-failures"


@pytest.fixture
def browser(request):
    """A headless Chromium (1280x900) through chromedriver, one per test. When the test fails,
    its last screen and page source are saved under target/console-failures/."""
    options = webdriver.ChromeOptions()
    options.binary_location = _env("CHROMIUM")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=_env("CHROMEDRIVER")))
    try:
        yield driver
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            out = _failures_dir()
            out.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
            try:
                driver.save_screenshot(str(out / f"{stem}.png"))
                (out / f"{stem}.html").write_text(f"<!-- {driver.current_url} -->\n{driver.page_source}")
            except Exception as e:  # a dead browser must not hide the test's own failure
                print(f"could not save the failure of {request.node.name}: {e}")
        driver.quit()


@pytest.fixture
def sign_in(console_url, users):
    """sign_in(browser, role): signs `role` in through /login's form and waits until the browser
    has left /login (10 s). Answers the browser."""

    def sign_in(browser, role: str):
        email, password = users[role]
        browser.get(f"{console_url}/login")
        form = browser.find_element(By.CSS_SELECTOR, "form#sign-in")
        form.find_element(By.CSS_SELECTOR, "input[name=email]").send_keys(email)
        form.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(password)
        buttons = form.find_elements(By.CSS_SELECTOR, SUBMIT)
        if buttons:
            buttons[0].click()
        else:
            form.submit()
        try:
            WebDriverWait(browser, 10).until(lambda d: urlparse(d.current_url).path != "/login")
        except Exception as e:
            errors = [el.text for el in browser.find_elements(By.CSS_SELECTOR, ".error")]
            raise AssertionError(f"still on /login 10 s after signing in as {role} ({email}): {errors}") from e
        return browser

    return sign_in


@pytest.fixture(scope="session")
def api(api_url):
    """The REST API with the workspace's test key, for setting up data."""
    with httpx.Client(
        base_url=api_url,
        headers={"Authorization": f"Bearer {_env('CRM_API_KEY')}", "Content-Type": "application/json"},
    ) as client:
        yield client


@pytest.fixture(scope="session")
def screenshot():
    """screenshot(browser, name): saves CRM_SCREENSHOTS/<name>.png when CRM_SCREENSHOTS is set
    (the SQLite run), else does nothing."""
    target = os.environ.get("CRM_SCREENSHOTS")

    def screenshot(browser, name: str):
        if not target:
            return
        Path(target).mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(Path(target) / f"{name}.png")), f"could not save screenshot {name}"

    return screenshot


# --- Shared helpers of the console's must-show tests -------------------------------------------


def wait_for_next_page(browser, action, timeout: float = 10):
    """Runs `action()` (a click, a key, a script that submits a form) and waits until the
    browser has loaded another document. Marks the current document and waits for a complete one
    without the mark: unlike waiting for an element to go stale, no element of the old page is
    asked about while it goes (which chromedriver sometimes answers with an inspector error)."""
    browser.execute_script("window.__crm_old_page = true")
    action()
    WebDriverWait(browser, timeout, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return !window.__crm_old_page && document.readyState === 'complete'")
    )
    return browser


@pytest.fixture(scope="session")
def next_page():
    """next_page(browser, action): runs `action()` and waits for the next document (see
    `wait_for_next_page`)."""
    return wait_for_next_page


def switch_to_test_mode(browser):
    """Clicks the header's "Switch to test mode" (one POST to /mode) unless the session already
    works in test mode, and waits until `#mode` reads "Test mode". The `api` fixture's key is a
    test-mode key, so any test that sets data up through `api` looks at it in test mode."""
    mode = browser.find_element(By.CSS_SELECTOR, "#mode")
    if mode.text.strip() == "Test mode":
        return browser
    switch = browser.find_element(By.CSS_SELECTOR, "form#mode-switch")
    button = switch.find_element(By.CSS_SELECTOR, SUBMIT)
    assert button.text.strip() == "Switch to test mode", button.text
    try:
        wait_for_next_page(browser, button.click)
        WebDriverWait(browser, 10, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#mode").text.strip() == "Test mode"
        )
    except Exception as e:
        raise AssertionError(f"#mode does not read 'Test mode' 10 s after switching ({browser.current_url})") from e
    return browser


@pytest.fixture
def sign_in_test_mode(sign_in):
    """sign_in_test_mode(browser, role): signs `role` in (a new session works in live mode) and
    switches the session to test mode, where the `api` fixture's records are. Answers the browser."""

    def sign_in_test_mode(browser, role: str):
        sign_in(browser, role)
        return switch_to_test_mode(browser)

    return sign_in_test_mode


@pytest.fixture
def unique():
    """unique(prefix): `prefix-<8 hex>`, a name no other test (or run) uses."""
    return lambda prefix="t": f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def create(api):
    """create(path, body): POSTs `body` to the API with the test key, asserts 201 and answers the
    created record."""

    def create(path: str, body: dict) -> dict:
        res = api.post(path, json=body)
        assert res.status_code == 201, f"POST {path} {body}: {res.status_code} {res.text}"
        return res.json()

    return create
