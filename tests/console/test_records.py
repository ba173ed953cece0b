"""Record pages: quick create ("New" in the header) opens the new-record form with every field
of the live schema, registered custom fields included, each with its input (a select field is a
select of its enum group's values); the created record's page shows what was entered, and the
API holds it."""

from urllib.parse import unquote, urlparse

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

# A select custom field on contacts and its values; registering them again changes nothing, so
# every run (and both tests of a run) may do it.
FIELD = "tier"
VALUES = (("gold", "Gold"), ("silver", "Silver"), ("bronze", "Bronze"))


def register_tier(api):
    res = api.post("/fields", json={"object": "contact", "key": FIELD, "label": "Tier", "data_type": "select"})
    assert res.status_code in (200, 201), res.text
    for value, label in VALUES:
        res = api.post("/enums", json={"group": f"contact.{FIELD}", "value": value, "label": label})
        assert res.status_code in (200, 201), res.text


def test_quick_create_a_contact_with_a_custom_select_field(browser, sign_in_test_mode, api, unique, screenshot, next_page):
    register_tier(api)
    last_name = unique("Lovelace")
    sign_in_test_mode(browser, "member")

    # Quick create: the header's "New" menu, then "New contact".
    menu = browser.find_element(By.CSS_SELECTOR, "header details.quick-create")
    menu.find_element(By.CSS_SELECTOR, "summary").click()
    link = WebDriverWait(browser, 5).until(EC.element_to_be_clickable((By.LINK_TEXT, "New contact")))
    next_page(browser, link.click)
    WebDriverWait(browser, 10).until(lambda d: urlparse(d.current_url).path == "/contacts/new")

    form = browser.find_element(By.CSS_SELECTOR, "form#record-form")
    assert urlparse(form.get_attribute("action")).path == "/contacts"
    form.find_element(By.CSS_SELECTOR, "input[name=first_name]").send_keys("Ada")
    form.find_element(By.CSS_SELECTOR, "input[name=last_name]").send_keys(last_name)
    tier = Select(form.find_element(By.CSS_SELECTOR, f"select[name='custom_fields.{FIELD}']"))
    offered = {o.get_attribute("value"): o.text for o in tier.options if o.get_attribute("value")}
    assert offered == dict(VALUES), f"the Tier select offers {offered}"
    tier.select_by_value("silver")
    next_page(browser, form.find_element(By.XPATH, ".//button[normalize-space()='Create contact']").click)

    # The new record's page.
    # (The redirect percent-encodes the id's `_`: /contacts/con%5F...; the same path.)
    WebDriverWait(browser, 10).until(lambda d: unquote(urlparse(d.current_url).path).startswith("/contacts/con_"))
    contact_id = unquote(urlparse(browser.current_url).path).rsplit("/", 1)[1]
    assert browser.find_element(By.CSS_SELECTOR, "#record-name").text == f"Ada {last_name}"
    shown = Select(browser.find_element(By.CSS_SELECTOR, f"#record-form select[name='custom_fields.{FIELD}']"))
    assert shown.first_selected_option.get_attribute("value") == "silver"
    assert shown.first_selected_option.text == "Silver"
    assert browser.find_element(By.CSS_SELECTOR, "#record-form input[name=first_name]").get_attribute("value") == "Ada"
    # The creation is on the timeline, made by this user through the console.
    created = browser.find_element(By.CSS_SELECTOR, "#timeline li.entry-change")
    assert "Console member" in created.text and "console" in created.text, created.text
    # Tall enough for the documentation's image to reach the custom field.
    browser.set_window_size(1280, 1100)
    screenshot(browser, "record")

    # The API has the contact with the custom field set.
    res = api.get(f"/contacts/{contact_id}")
    assert res.status_code == 200, res.text
    contact = res.json()
    assert contact["first_name"] == "Ada"
    assert contact["last_name"] == last_name
    assert contact["custom_fields"].get(FIELD) == "silver", contact
