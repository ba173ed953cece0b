"""Signing in and out of the console: the login form, a refused password, the session cookie
(HttpOnly, killed on the server at sign-out), and the API's indifference to that cookie."""

from urllib.parse import urlparse

import httpx
from conftest import wait_for_next_page
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def path_of(url: str) -> str:
    return urlparse(url).path


def get_with_cookie(url: str, session: str) -> httpx.Response:
    """GET `url` with only the cookie crm_session=`session`, redirects not followed."""
    with httpx.Client(cookies={"crm_session": session}, follow_redirects=False) as client:
        return client.get(url)


def test_a_wrong_password_is_refused(browser, console_url, users, screenshot):
    browser.get(f"{console_url}/login")
    form = browser.find_element(By.CSS_SELECTOR, "form#sign-in")
    assert form.get_attribute("method").lower() == "post"
    assert path_of(form.get_attribute("action")) == "/login"
    email = form.find_element(By.CSS_SELECTOR, "input[name=email]")
    password = form.find_element(By.CSS_SELECTOR, "input[name=password]")
    csrf = form.find_element(By.CSS_SELECTOR, "input[name=csrf]")
    assert csrf.get_attribute("type") == "hidden"
    assert csrf.get_attribute("value"), "the sign-in form's csrf field is empty"
    submit = form.find_elements(By.CSS_SELECTOR, SUBMIT)
    assert submit, "the sign-in form has no submit button"
    screenshot(browser, "sign-in")

    email.send_keys(users["admin"][0])
    password.send_keys("not-the-password-1")
    wait_for_next_page(browser, submit[0].click)
    error = WebDriverWait(browser, 10).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".error")))
    assert "Wrong email or password" in error.text
    assert path_of(browser.current_url) == "/login"
    browser.find_element(By.CSS_SELECTOR, "form#sign-in")
    assert browser.get_cookie("crm_session") is None


def test_sign_in_then_sign_out_kills_the_session(browser, sign_in, console_url, screenshot):
    sign_in(browser, "admin")
    assert path_of(browser.current_url) == "/"
    cookie = browser.get_cookie("crm_session")
    assert cookie, "no crm_session cookie after signing in"
    assert cookie.get("httpOnly") is True, cookie

    header = browser.find_element(By.CSS_SELECTOR, "header")
    sign_out = header.find_element(By.CSS_SELECTOR, "form#sign-out")
    assert sign_out.get_attribute("method").lower() == "post"
    assert path_of(sign_out.get_attribute("action")) == "/logout"
    buttons = sign_out.find_elements(By.CSS_SELECTOR, SUBMIT)
    assert buttons, "the sign-out form has no submit button"
    mode = browser.find_element(By.CSS_SELECTOR, "#mode").text
    assert "Test mode" in mode or "Live mode" in mode, mode
    screenshot(browser, "home")

    old = cookie["value"]
    # While signed in, the cookie alone opens the console (so the 303 below means something).
    res = get_with_cookie(f"{console_url}/", old)
    assert res.status_code == 200, res.text

    buttons[0].click()
    WebDriverWait(browser, 10).until(lambda d: path_of(d.current_url) == "/login")

    # The session is dead on the server, not only the browser's cookie cleared.
    res = get_with_cookie(f"{console_url}/", old)
    assert res.status_code == 303, res.text
    assert path_of(res.headers["location"]) == "/login"


def test_the_api_ignores_the_session_cookie(browser, sign_in, api_url, api):
    sign_in(browser, "admin")
    cookie = browser.get_cookie("crm_session")
    assert cookie, "no crm_session cookie after signing in"

    res = get_with_cookie(f"{api_url}/contacts", cookie["value"])
    assert res.status_code == 401, res.text

    # The same request with the key is allowed: the 401 is for the missing key, nothing else.
    assert api.get("/contacts").status_code == 200
