"""Test and live mode: a new session works in live mode; one click on the header's button
switches it (and one click back); in test mode every page says so, with a banner and the
header's `#mode` (error pages too), and shows the test-mode records (those the test key made)."""

from urllib.parse import quote, urlparse

from selenium.webdriver.common.by import By

SUBMIT = "button:not([type]), button[type=submit], input[type=submit]"


def mode_button(browser):
    return browser.find_element(By.CSS_SELECTOR, "form#mode-switch").find_element(By.CSS_SELECTOR, SUBMIT)


def assert_test_mode_marked(browser, where: str):
    assert browser.find_element(By.CSS_SELECTOR, "#mode").text == "Test mode", where
    banners = browser.find_elements(By.CSS_SELECTOR, ".test-banner")
    assert len(banners) == 1 and banners[0].is_displayed(), f"{where}: no visible .test-banner"
    assert "Test mode" in banners[0].text, banners[0].text
    assert mode_button(browser).text == "Switch to live mode", where


def test_switching_mode_is_one_click_and_test_mode_is_marked_on_every_page(
    browser, sign_in, console_url, create, unique, next_page
):
    last_name = unique("Moded")
    contact = create("/contacts", {"first_name": "Tess", "last_name": last_name})
    deal = create("/deals", {"title": unique("Moded deal")})
    sign_in(browser, "member")

    # A new session is in live mode: no banner, and the test key's records are not shown.
    assert browser.find_element(By.CSS_SELECTOR, "#mode").text == "Live mode"
    assert not browser.find_elements(By.CSS_SELECTOR, ".test-banner")
    assert not browser.find_elements(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")

    # One click: test mode, on the board, with the test-mode deal on it.
    button = mode_button(browser)
    assert button.text == "Switch to test mode"
    next_page(browser, button.click)
    assert urlparse(browser.current_url).path == "/"
    assert_test_mode_marked(browser, "board")
    browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")

    # Every page marks it.
    pages = {
        "contact list": "/contacts",
        "deal list": "/deals",
        "company list": "/companies",
        "contact record": f"/contacts/{contact['id']}",
        "deal record": f"/deals/{deal['id']}",
        "new contact": "/contacts/new",
        "search": f"/search?q={quote(last_name)}",
    }
    for where, path in pages.items():
        browser.get(f"{console_url}{path}")
        assert_test_mode_marked(browser, where)
    # The search found the test-mode contact.
    assert browser.find_elements(By.LINK_TEXT, f"Tess {last_name}")
    # An error page too: a record that is not there is a 404 page inside the header.
    browser.get(f"{console_url}/contacts/con_{'0' * 26}")
    assert "HTTP 404" in browser.find_element(By.CSS_SELECTOR, "#problem").text
    assert_test_mode_marked(browser, "a 404 page")

    # And one click back to live mode: no banner, the test-mode deal gone from the board.
    next_page(browser, mode_button(browser).click)
    assert browser.find_element(By.CSS_SELECTOR, "#mode").text == "Live mode"
    assert not browser.find_elements(By.CSS_SELECTOR, ".test-banner")
    assert mode_button(browser).text == "Switch to test mode"
    assert not browser.find_elements(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")
