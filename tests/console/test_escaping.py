"""Record text is text: a contact whose first name is a script tag is shown as those characters
on the list page, its record page and the search page, and never runs.

The console's Content-Security-Policy would block an inline script even if a page let one
through, so `window.__pwned` staying undefined is not proof enough on its own: each page must
also show the name's characters as text, and hold no inline script element at all."""

from urllib.parse import quote

from selenium.webdriver.common.by import By

PAYLOAD = "<script>window.__pwned=1</script>"


def assert_inert(browser, where: str):
    assert browser.execute_script("return typeof window.__pwned") == "undefined", f"{where}: the script ran"
    inline = browser.execute_script(
        "return Array.from(document.scripts).filter(s => !s.src).map(s => s.textContent)"
    )
    assert inline == [], f"{where}: inline script elements {inline}"


def test_a_script_in_a_contact_name_renders_as_text_everywhere(browser, sign_in_test_mode, console_url, create, unique):
    last_name = unique("Escaped")
    contact = create("/contacts", {"first_name": PAYLOAD, "last_name": last_name})
    shown = f"{PAYLOAD} {last_name}"
    sign_in_test_mode(browser, "member")

    # The list page (searched down to this contact).
    browser.get(f"{console_url}/contacts?q={quote(last_name)}")
    rows = browser.find_elements(By.CSS_SELECTOR, "table#records tbody td:first-child a")
    assert [a.text for a in rows] == [shown], [a.text for a in rows]
    assert PAYLOAD in browser.find_element(By.CSS_SELECTOR, "main").text
    assert_inert(browser, "list")

    # The record page: the heading, the title and the first-name input's value.
    browser.get(f"{console_url}/contacts/{contact['id']}")
    assert browser.find_element(By.CSS_SELECTOR, "#record-name").text == shown
    assert browser.title.startswith(shown)
    assert browser.find_element(By.CSS_SELECTOR, "#record-form input[name=first_name]").get_attribute("value") == PAYLOAD
    assert_inert(browser, "record")

    # The search page.
    browser.get(f"{console_url}/search?q={quote(last_name)}")
    links = browser.find_elements(By.CSS_SELECTOR, "section.results ul.related a")
    assert [a.text for a in links] == [shown], [a.text for a in links]
    assert_inert(browser, "search")
