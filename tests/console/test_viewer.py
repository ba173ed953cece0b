"""A viewer reads and never writes: no write controls on the board (no move forms, nothing to
drag, no quick create) or on record pages (no Save, Delete, Merge or timeline form, every input
read-only or disabled); and a write forged with the viewer's own session and CSRF token is
refused by the server (403), creating nothing."""

import httpx
from urllib.parse import unquote, urlparse

from selenium.webdriver.common.by import By

SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def forge_contact_create(browser, console_url: str, first_name: str) -> httpx.Response:
    """POST /contacts as the browser's session: its crm_session cookie and the CSRF token the
    page gave it (the sign-out form's), outside the page's own forms."""
    csrf = browser.find_element(By.CSS_SELECTOR, "form#sign-out input[name=csrf]").get_attribute("value")
    assert csrf, "no CSRF token in form#sign-out"
    session = browser.get_cookie("crm_session")
    assert session, "no crm_session cookie"
    with httpx.Client(cookies={"crm_session": session["value"]}, follow_redirects=False) as client:
        return client.post(f"{console_url}/contacts", data={"csrf": csrf, "first_name": first_name})


def contacts_named(api, name: str) -> list:
    res = api.get("/contacts", params={"q": name})
    assert res.status_code == 200, res.text
    return [c for c in res.json()["data"] if c["first_name"] == name]


def test_a_viewer_sees_no_write_controls(browser, sign_in_test_mode, console_url, create, unique):
    deal = create("/deals", {"title": unique("Viewed deal")})
    contact = create("/contacts", {"first_name": "Viewed", "last_name": unique("Contact")})
    sign_in_test_mode(browser, "viewer")
    assert "(viewer)" in browser.find_element(By.CSS_SELECTOR, "header .user").text

    # The board: the card is there, but nothing moves it, and there is nothing to create.
    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")
    assert card.get_attribute("draggable") in (None, "false")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.move")
    assert not browser.find_elements(By.CSS_SELECTOR, "#board [data-move], #move-dialog, form[action$='/move']")
    assert not browser.find_elements(By.CSS_SELECTOR, "details.quick-create")
    assert not browser.find_elements(By.XPATH, "//header//summary[normalize-space()='New']")

    # The list: no "New contact".
    browser.get(f"{console_url}/contacts")
    assert not browser.find_elements(By.XPATH, "//main//a[normalize-space()='New contact']")

    # The record page: every field shown, none editable, no write form.
    for path in (f"/contacts/{contact['id']}", f"/deals/{deal['id']}"):
        browser.get(f"{console_url}{path}")
        assert unquote(urlparse(browser.current_url).path) == path
        form = browser.find_element(By.CSS_SELECTOR, "form#record-form")
        assert not form.find_elements(By.CSS_SELECTOR, SUBMIT), f"{path}: the record form has a submit button"
        assert not browser.find_elements(By.XPATH, "//main//button[normalize-space()='Save']")
        assert not browser.find_elements(By.XPATH, "//main//button[normalize-space()='Delete']")
        for css in ("form#delete", "form#restore", "form#merge", "form#add-activity"):
            assert not browser.find_elements(By.CSS_SELECTOR, css), f"{path}: a viewer is offered {css}"
        inputs = form.find_elements(By.CSS_SELECTOR, "input:not([type=hidden]), select, textarea")
        assert inputs, f"{path}: no fields shown"
        editable = [
            el.get_attribute("name")
            for el in inputs
            if el.get_attribute("readonly") is None and el.get_attribute("disabled") is None
        ]
        assert not editable, f"{path}: editable inputs for a viewer: {editable}"
    # Typing into a read-only input changes nothing.
    first = browser.find_element(By.CSS_SELECTOR, "#record-form input[name=title]")
    before = first.get_attribute("value")
    first.send_keys("x")
    assert first.get_attribute("value") == before


def test_a_write_forged_with_a_viewers_session_is_refused(browser, sign_in_test_mode, console_url, api, unique):
    name = unique("Forged")
    sign_in_test_mode(browser, "viewer")
    res = forge_contact_create(browser, console_url, name)
    assert res.status_code == 403, f"{res.status_code}: {res.text[:500]}"
    # Refused for the role, not for a bad token: the token was the session's own.
    assert "This form has expired" not in res.text, res.text[:500]
    assert contacts_named(api, name) == []


def test_the_same_forged_write_works_for_a_member(browser, sign_in_test_mode, console_url, api, unique):
    """The control of the test above: the same request from a member's session creates the
    contact, so the viewer's 403 is the role's, not the way the request was made."""
    name = unique("Forged")
    sign_in_test_mode(browser, "member")
    res = forge_contact_create(browser, console_url, name)
    assert res.status_code == 303, f"{res.status_code}: {res.text[:500]}"
    assert unquote(res.headers["location"]).startswith("/contacts/con_")
    assert len(contacts_named(api, name)) == 1
