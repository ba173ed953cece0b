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
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from selenium import webdriver
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
