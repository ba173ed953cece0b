"""Narrow screens: at 375 px wide the contact list and a record page fit the width (no sideways
scrolling of the page), and the header's search box and sign-out button are on screen."""

import pytest
from selenium.webdriver.common.by import By

WIDTH = 375

FITS = """
const root = document.documentElement;
return {scrollWidth: root.scrollWidth, innerWidth: window.innerWidth,
        // The outermost elements that reach past the right edge: what to fix.
        widest: Array.from(document.querySelectorAll('body *'))
          .filter(e => e.checkVisibility() && e.getBoundingClientRect().right > window.innerWidth + 0.5)
          .filter(e => !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 0.5))
          .slice(0, 8)
          .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '')
                    + ' right=' + Math.round(e.getBoundingClientRect().right))};
"""

IN_VIEW = """
const r = arguments[0].getBoundingClientRect();
return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height};
"""


def overflow(browser, where: str):
    """None when the page fits the window's width, else what makes it wider."""
    m = browser.execute_script(FITS)
    assert m["innerWidth"] <= WIDTH + 1, f"{where}: the window is {m['innerWidth']} px wide, not {WIDTH}"
    if m["scrollWidth"] <= m["innerWidth"]:
        return None
    return f"{where}: the page is {m['scrollWidth']} px wide in a {m['innerWidth']} px window, past the edge: {m['widest']}"


def assert_on_screen(browser, css: str, where: str):
    element = browser.find_element(By.CSS_SELECTOR, css)
    assert element.is_displayed(), f"{where}: {css} is hidden"
    r = browser.execute_script(IN_VIEW, element)
    inner = browser.execute_script("return window.innerWidth")
    assert r["width"] > 0 and r["height"] > 0, f"{where}: {css} has no size: {r}"
    assert r["left"] >= 0 and r["right"] <= inner, f"{where}: {css} is off screen sideways: {r} (width {inner})"


@pytest.mark.parametrize("page", ["contact_list", "record_page"])
def test_the_page_fits_375_px_with_search_and_sign_out_on_screen(browser, sign_in_test_mode, console_url, create, unique, page):
    # An ordinary contact; the list is searched down to it, so other tests' records do not
    # change what is measured.
    last_name = unique("Lovelace")
    contact = create(
        "/contacts",
        {
            "first_name": "Ada",
            "last_name": last_name,
            "email": f"ada.{last_name[-8:]}@example.com",
            "phone": "+44 20 7946 0958",
        },
    )
    sign_in_test_mode(browser, "member")
    browser.set_window_size(WIDTH, 900)
    path = {"contact_list": f"/contacts?q={last_name}", "record_page": f"/contacts/{contact['id']}"}[page]
    browser.get(f"{console_url}{path}")
    browser.find_element(By.CSS_SELECTOR, "main")
    if page == "contact_list":
        assert browser.find_elements(By.LINK_TEXT, f"Ada {last_name}"), "the contact is not listed"
    else:
        assert browser.find_element(By.CSS_SELECTOR, "#record-name").text == f"Ada {last_name}"
    assert_on_screen(browser, "header #global-search", page)
    assert_on_screen(browser, "header form#sign-out button", page)
    problem = overflow(browser, page)
    assert problem is None, problem
