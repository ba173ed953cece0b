"""Settings about people and access: an admin adds a user whose one-time sign-in link is shown
once and works once, changes a role, issues a new link and deletes a user; an admin creates an
API key whose secret is shown once and works against the API until it is revoked; a member sees
neither users nor keys and is refused them (403), and a viewer reads them without a write
control; a user changes their own password (the old one and the old session stop working); the
usage page shows the month and saves the spend cap, which the API's settings then show (settings
are the workspace's, the same in both modes)."""

import re
import time
from urllib.parse import urlparse

import httpx
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def path_of(url: str) -> str:
    return urlparse(url).path


def submit(browser, form, confirm: bool = False):
    """Clicks the form's submit button (accepting its data-confirm when `confirm`) and waits for
    the next page. Asked mid-navigation whether the old form is still there, chromedriver may
    answer "unknown error: Node with given id does not belong to the document" instead of a stale
    element: such an answer is asked again."""
    form.find_element(By.CSS_SELECTOR, SUBMIT).click()
    if confirm:
        WebDriverWait(browser, 5).until(EC.alert_is_present())
        browser.switch_to.alert.accept()
    WebDriverWait(browser, 10, ignored_exceptions=(WebDriverException,)).until(EC.staleness_of(form))


def text_of(browser, css: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, css).text.strip()


def errors(browser) -> list:
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".error")]


def fill(form, values: dict):
    for name, value in values.items():
        field = form.find_element(By.CSS_SELECTOR, f"[name={name}]")
        field.clear()
        field.send_keys(value)


def user_row(browser, email: str):
    rows = browser.find_elements(By.CSS_SELECTOR, f"table#users tr[data-user='{email}']")
    return rows[0] if rows else None


def new_user(api, unique, role: str = "member") -> dict:
    """A user created with the API's test key, with its one-time sign-in link."""
    email = f"{unique('person')}@example.test"
    res = api.post("/users", json={"email": email, "name": unique("Person"), "role": role})
    assert res.status_code == 201, res.text
    return res.json()


def set_password_with_link(browser, console_url: str, url: str, password: str):
    """Opens a sign-in link (its path on this server), sets `password` and waits for the board."""
    browser.delete_all_cookies()
    browser.get(f"{console_url}{path_of(url)}")
    form = browser.find_element(By.CSS_SELECTOR, "form#set-password")
    fill(form, {"password": password, "confirm": password})
    submit(browser, form)
    assert path_of(browser.current_url) == "/", (browser.current_url, errors(browser))


def sign_in_as(browser, console_url: str, email: str, password: str):
    browser.get(f"{console_url}/login")
    form = browser.find_element(By.CSS_SELECTOR, "form#sign-in")
    fill(form, {"email": email, "password": password})
    submit(browser, form)


def test_an_admin_adds_a_user_whose_link_is_shown_once(browser, sign_in, console_url, unique, screenshot):
    sign_in(browser, "admin")
    browser.get(f"{console_url}/settings")
    for path in ("/settings/account", "/settings/users", "/settings/keys", "/settings/usage"):
        assert browser.find_elements(By.CSS_SELECTOR, f"main a[href='{path}']"), f"no link to {path}"
    screenshot(browser, "settings")

    browser.get(f"{console_url}/settings/users")
    assert user_row(browser, "admin@console.test") is not None
    email = f"{unique('invited')}@example.test"
    form = browser.find_element(By.CSS_SELECTOR, "form#create-user")
    fill(form, {"email": email, "name": "Invited Person"})
    form.find_element(By.CSS_SELECTOR, "select[name=role] option[value=viewer]").click()
    submit(browser, form)

    # The link is on the POST's answer, not in its address.
    link = browser.find_element(By.CSS_SELECTOR, "#new-link input#sign-in-link").get_attribute("value")
    assert "/sign-in/" in link, link
    token = path_of(link).rsplit("/", 1)[-1]
    assert token and token not in browser.current_url
    assert path_of(browser.current_url) == "/settings/users"
    row = user_row(browser, email)
    assert row is not None, f"{email} is not listed"
    assert row.find_element(By.CSS_SELECTOR, "select[name=role] option:checked").get_attribute("value") == "viewer"

    # Shown once: the page read again has no link.
    browser.get(f"{console_url}/settings/users")
    assert not browser.find_elements(By.CSS_SELECTOR, "#sign-in-link")
    assert token not in browser.page_source

    # The same email again is refused on the page, the form keeping what was typed.
    form = browser.find_element(By.CSS_SELECTOR, "form#create-user")
    fill(form, {"email": email, "name": "Someone Else"})
    submit(browser, form)
    assert errors(browser), "a second user with the same email gave no .error"
    assert browser.find_element(By.CSS_SELECTOR, "#new-email").get_attribute("value") == email
    assert not browser.find_elements(By.CSS_SELECTOR, "#sign-in-link")

    # The link sets a password and signs the new user in, once.
    set_password_with_link(browser, console_url, link, "invited-pw-12345")
    assert "Invited Person (viewer)" in text_of(browser, "header .user")
    browser.delete_all_cookies()
    browser.get(f"{console_url}{path_of(link)}")
    assert not browser.find_elements(By.CSS_SELECTOR, "form#set-password"), "a used link works again"
    assert errors(browser)


def test_an_admin_changes_a_role_issues_a_link_and_deletes_a_user(browser, sign_in, console_url, api, unique):
    user = new_user(api, unique, "member")
    sign_in(browser, "admin")
    browser.get(f"{console_url}/settings/users")
    row = user_row(browser, user["email"])
    assert row is not None

    form = row.find_element(By.CSS_SELECTOR, "form.role-form")
    form.find_element(By.CSS_SELECTOR, "select[name=role] option[value=viewer]").click()
    submit(browser, form)
    assert "Role changed" in text_of(browser, "#notice")
    assert api.get(f"/users/{user['id']}").json()["role"] == "viewer"

    # A new link, shown once; the one made with the user no longer works.
    submit(browser, user_row(browser, user["email"]).find_element(By.CSS_SELECTOR, "form.link-form"))
    link = browser.find_element(By.CSS_SELECTOR, "#sign-in-link").get_attribute("value")
    assert "/sign-in/" in link and link != user["sign_in_link"]["url"]
    old = httpx.get(f"{console_url}{path_of(user['sign_in_link']['url'])}")
    assert old.status_code != 200, "the first link still works after a new one was issued"
    assert httpx.get(f"{console_url}{path_of(link)}").status_code == 200

    # Delete asks first (data-confirm), then the user is gone.
    form = user_row(browser, user["email"]).find_element(By.CSS_SELECTOR, "form.delete-form")
    assert form.get_attribute("data-confirm")
    submit(browser, form, confirm=True)
    assert "User deleted" in text_of(browser, "#notice")
    assert user_row(browser, user["email"]) is None
    assert api.get(f"/users/{user['id']}").status_code == 404


def test_an_admin_creates_a_key_whose_secret_is_shown_once(browser, sign_in, console_url, api_url, unique):
    sign_in(browser, "admin")
    browser.get(f"{console_url}/settings/keys")
    assert "live mode" in text_of(browser, "#keys-mode")
    name = unique("console-key")

    # No scope ticked: refused on the page, the name kept.
    form = browser.find_element(By.CSS_SELECTOR, "form#create-key")
    fill(form, {"name": name})
    submit(browser, form)
    assert any("scope" in e for e in errors(browser)), errors(browser)
    assert browser.find_element(By.CSS_SELECTOR, "#key-name").get_attribute("value") == name

    form = browser.find_element(By.CSS_SELECTOR, "form#create-key")
    form.find_element(By.CSS_SELECTOR, "#scope-contacts-read").click()
    submit(browser, form)
    secret = browser.find_element(By.CSS_SELECTOR, "#new-key input#new-secret").get_attribute("value")
    assert secret.startswith("svc_live_"), secret
    assert path_of(browser.current_url) == "/settings/keys" and secret not in browser.current_url
    row = browser.find_element(By.XPATH, f"//table[@id='keys']//tr[td[1][normalize-space()='{name}']]")
    assert "contacts:read" in row.text and "live" in row.text

    # The secret works against the API with the scope it was given.
    bearer = {"Authorization": f"Bearer {secret}"}
    res = httpx.get(f"{api_url}/contacts", headers=bearer)
    assert res.status_code == 200, res.text
    assert httpx.get(f"{api_url}/keys", headers=bearer).status_code == 403

    # Shown once: the page read again does not have it.
    browser.get(f"{console_url}/settings/keys")
    assert not browser.find_elements(By.CSS_SELECTOR, "#new-secret")
    assert secret not in browser.page_source

    # Revoked, it is refused.
    row = browser.find_element(By.XPATH, f"//table[@id='keys']//tr[td[1][normalize-space()='{name}']]")
    submit(browser, row.find_element(By.CSS_SELECTOR, "form.revoke-form"), confirm=True)
    assert "revoked" in text_of(browser, "#notice")
    deadline = time.monotonic() + 5
    while (status := httpx.get(f"{api_url}/contacts", headers=bearer).status_code) != 401:
        assert time.monotonic() < deadline, f"a revoked key still answers {status}"
        time.sleep(0.2)


def test_a_member_sees_neither_users_nor_keys(browser, sign_in, console_url, api, unique):
    sign_in(browser, "member")
    browser.get(f"{console_url}/settings")
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "main a")]
    paths = {path_of(h) for h in links if h}
    assert "/settings/account" in paths
    assert "/settings/users" not in paths and "/settings/keys" not in paths, paths
    session = browser.get_cookie("crm_session")["value"]
    csrf = browser.find_element(By.CSS_SELECTOR, "form#sign-out input[name=csrf]").get_attribute("value")

    browser.get(f"{console_url}/settings/users")
    assert errors(browser), "a member was shown /settings/users"
    assert not browser.find_elements(By.CSS_SELECTOR, "form#create-user")
    email = f"{unique('forged')}@example.test"
    with httpx.Client(cookies={"crm_session": session}, follow_redirects=False) as client:
        for path in ("/settings/users", "/settings/keys"):
            assert client.get(f"{console_url}{path}").status_code == 403, path
        # A create forged with the member's own session and token is refused too.
        res = client.post(
            f"{console_url}/settings/users",
            data={"csrf": csrf, "email": email, "name": "Forged", "role": "admin"},
        )
        assert res.status_code == 403, res.text
        res = client.post(f"{console_url}/settings/keys", data={"csrf": csrf, "name": "forged", "scopes": "*"})
        assert res.status_code == 403, res.text
    assert email not in api.get("/users", params={"limit": 100}).text


def test_a_viewer_reads_users_keys_and_settings_without_write_controls(browser, sign_in, console_url):
    sign_in(browser, "viewer")
    browser.get(f"{console_url}/settings/users")
    assert user_row(browser, "viewer@console.test") is not None
    for css in ("form#create-user", "form.role-form", "form.link-form", "form.delete-form"):
        assert not browser.find_elements(By.CSS_SELECTOR, css), f"a viewer is offered {css}"
    browser.get(f"{console_url}/settings/keys")
    assert browser.find_elements(By.CSS_SELECTOR, "table#keys")
    for css in ("form#create-key", "form.revoke-form"):
        assert not browser.find_elements(By.CSS_SELECTOR, css), f"a viewer is offered {css}"
    browser.get(f"{console_url}/settings/usage")
    assert browser.find_elements(By.CSS_SELECTOR, "dl#settings"), "a viewer does not see the settings"
    assert not browser.find_elements(By.CSS_SELECTOR, "form#settings-form")


def test_a_user_changes_their_own_password(browser, console_url, api, unique):
    user = new_user(api, unique, "member")
    set_password_with_link(browser, console_url, user["sign_in_link"]["url"], "first-password-1")
    # In test mode, to see the new session go on in it.
    switch = browser.find_element(By.CSS_SELECTOR, "form#mode-switch")
    assert switch.find_element(By.CSS_SELECTOR, SUBMIT).text.strip() == "Switch to test mode"
    submit(browser, switch)
    assert text_of(browser, "#mode") == "Test mode"
    browser.get(f"{console_url}/settings/account")
    assert text_of(browser, "#account-email") == user["email"]
    assert text_of(browser, "#account-name") == user["name"]
    assert text_of(browser, "#account-role") == "member"

    form = browser.find_element(By.CSS_SELECTOR, "form#change-password")
    fill(form, {"current_password": "not-my-password", "new_password": "second-password-2", "confirm_password": "second-password-2"})
    submit(browser, form)
    assert any("current password is wrong" in e for e in errors(browser)), errors(browser)

    form = browser.find_element(By.CSS_SELECTOR, "form#change-password")
    fill(form, {"current_password": "first-password-1", "new_password": "short", "confirm_password": "short"})
    submit(browser, form)
    assert any("at least 8" in e for e in errors(browser)), errors(browser)

    old_session = browser.get_cookie("crm_session")["value"]
    form = browser.find_element(By.CSS_SELECTOR, "form#change-password")
    fill(form, {"current_password": "first-password-1", "new_password": "second-password-2", "confirm_password": "second-password-2"})
    submit(browser, form)
    assert path_of(browser.current_url) == "/settings/account"
    assert "password is changed" in text_of(browser, "#notice")
    new_session = browser.get_cookie("crm_session")["value"]
    assert new_session != old_session
    assert text_of(browser, "#mode") == "Test mode"
    with httpx.Client(cookies={"crm_session": old_session}, follow_redirects=False) as client:
        res = client.get(f"{console_url}/")
        assert res.status_code == 303 and path_of(res.headers["location"]) == "/login"

    # The old password no longer signs in; the new one does.
    browser.delete_all_cookies()
    sign_in_as(browser, console_url, user["email"], "first-password-1")
    assert path_of(browser.current_url) == "/login"
    assert any("Wrong email or password" in e for e in errors(browser)), errors(browser)
    sign_in_as(browser, console_url, user["email"], "second-password-2")
    assert path_of(browser.current_url) == "/", errors(browser)


def settings_now(api) -> dict:
    res = api.get("/settings")
    assert res.status_code == 200, res.text
    return res.json()


def until_settings(api, key: str, value):
    """Waits (5 s) until GET /v1/settings (the test key's) shows `key` = `value`."""
    deadline = time.monotonic() + 5
    while (seen := settings_now(api)[key]) != value:
        assert time.monotonic() < deadline, f"GET /v1/settings shows {key} = {seen!r}, not {value!r}"
        time.sleep(0.2)


def test_usage_shows_the_month_and_saves_the_spend_cap(browser, sign_in, console_url, api):
    before = settings_now(api)
    sign_in(browser, "admin")
    browser.get(f"{console_url}/settings/usage")
    number = re.compile(r"^\d{1,3}(,\d{3})*$")
    for css in ("#usage-used", "#usage-included", "#usage-overage"):
        assert number.match(text_of(browser, css)), (css, text_of(browser, css))
    assert re.match(r"^\$\d+\.\d{2,4}$", text_of(browser, "#usage-cost")), text_of(browser, "#usage-cost")
    assert "live mode" in text_of(browser, "#usage-title")
    try:
        form = browser.find_element(By.CSS_SELECTOR, "form#settings-form")
        fill(form, {"overage_cap_usd": "37.25"})
        submit(browser, form)
        assert "saved" in text_of(browser, "#notice")
        assert browser.find_element(By.CSS_SELECTOR, "#overage_cap_usd").get_attribute("value") == "37.25"
        assert text_of(browser, "#usage-cap") == "$37.25"
        # The settings are the workspace's: the test-mode key sees the cap set in live mode.
        until_settings(api, "overage_cap_usd", 37.25)

        # A retention under 30 days is refused on the page, with what was typed.
        form = browser.find_element(By.CSS_SELECTOR, "form#settings-form")
        fill(form, {"history_retention_days": "5"})
        submit(browser, form)
        assert any("history_retention_days" in e for e in errors(browser)), errors(browser)
        assert browser.find_element(By.CSS_SELECTOR, "#history_retention_days").get_attribute("value") == "5"

        # Blank is unlimited.
        browser.get(f"{console_url}/settings/usage")
        form = browser.find_element(By.CSS_SELECTOR, "form#settings-form")
        form.find_element(By.CSS_SELECTOR, "#overage_cap_usd").clear()
        submit(browser, form)
        assert text_of(browser, "#usage-cap") == "unlimited"
        until_settings(api, "overage_cap_usd", None)
    finally:
        patch = {k: before[k] for k in ("overage_cap_usd", "history_retention_days", "email_retention_days")}
        assert api.patch("/settings", json=patch).status_code == 200
