"""Global search from the keyboard: `/` (when not typing in a field) or Ctrl+K puts the focus in
the header's search box from any page; Enter opens the search page, which lists the matching
contact with a link to its record page."""

from urllib.parse import parse_qs, unquote, urlparse

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait


def focused_id(browser) -> str:
    return browser.execute_script("return document.activeElement && document.activeElement.id")


def press_slash(browser):
    ActionChains(browser).send_keys("/").perform()


def press_ctrl_k(browser):
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("k").key_up(Keys.CONTROL).perform()


@pytest.mark.parametrize("shortcut", [press_slash, press_ctrl_k], ids=["slash", "ctrl_k"])
def test_a_shortcut_on_the_board_focuses_search_and_enter_finds_the_contact(
    browser, sign_in_test_mode, create, unique, shortcut, next_page
):
    last_name = unique("Searchable")
    contact = create("/contacts", {"first_name": "Grace", "last_name": last_name})
    sign_in_test_mode(browser, "member")
    assert urlparse(browser.current_url).path == "/"
    browser.find_element(By.CSS_SELECTOR, "#board")
    # Nothing is focused to begin with: the key goes to the page.
    browser.execute_script("document.activeElement && document.activeElement.blur()")
    assert focused_id(browser) != "global-search"

    shortcut(browser)
    WebDriverWait(browser, 5).until(lambda d: focused_id(d) == "global-search")
    search = browser.find_element(By.CSS_SELECTOR, "#global-search")
    # The shortcut's key is not typed into the box.
    assert search.get_attribute("value") == ""

    next_page(browser, ActionChains(browser).send_keys(last_name, Keys.ENTER).perform)
    WebDriverWait(browser, 10).until(lambda d: urlparse(d.current_url).path == "/search")
    assert parse_qs(urlparse(browser.current_url).query)["q"] == [last_name]
    assert browser.find_element(By.CSS_SELECTOR, "#search-q").get_attribute("value") == last_name

    section = browser.find_element(By.XPATH, "//section[h2[@id='results-contacts']]")
    links = section.find_elements(By.CSS_SELECTOR, "ul.related a")
    assert [a.text for a in links] == [f"Grace {last_name}"], [a.text for a in links]
    assert unquote(urlparse(links[0].get_attribute("href")).path) == f"/contacts/{contact['id']}"

    next_page(browser, links[0].click)
    WebDriverWait(browser, 10).until(lambda d: unquote(urlparse(d.current_url).path) == f"/contacts/{contact['id']}")
    assert browser.find_element(By.CSS_SELECTOR, "#record-name").text == f"Grace {last_name}"


def test_slash_typed_in_a_field_stays_in_the_field(browser, sign_in_test_mode, console_url):
    """`/` is a shortcut only outside fields: typed into the list's own search box, it is text."""
    sign_in_test_mode(browser, "member")
    browser.get(f"{console_url}/contacts")
    box = browser.find_element(By.CSS_SELECTOR, "#q")
    box.click()
    box.send_keys("a/b")
    assert box.get_attribute("value") == "a/b"
    assert focused_id(browser) == "q"
