"""Settings of the schema: an admin registers a custom select field and its values on the fields
page, and the new-contact form offers them at once; an admin creates a pipeline and adds a stage on
the pipelines page, and the board shows that pipeline's columns. A viewer reads both pages but
sees no form on them."""

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select


def submit(browser, next_page, form):
    next_page(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]").click)


def test_a_field_registered_in_settings_is_offered_by_the_new_record_form(browser, sign_in_test_mode, console_url, unique, next_page, api):
    key = unique("size").replace("-", "_")
    sign_in_test_mode(browser, "admin")
    browser.get(f"{console_url}/settings/fields")
    form = browser.find_element(By.CSS_SELECTOR, "form#field-form")
    Select(form.find_element(By.CSS_SELECTOR, "select[name=object]")).select_by_value("contact")
    form.find_element(By.CSS_SELECTOR, "input[name=key]").send_keys(key)
    form.find_element(By.CSS_SELECTOR, "input[name=label]").send_keys("Size")
    Select(form.find_element(By.CSS_SELECTOR, "select[name=data_type]")).select_by_value("select")
    submit(browser, next_page, form)
    assert browser.find_element(By.CSS_SELECTOR, "#notice").text == "Field registered."
    for value in ("small", "large"):
        form = browser.find_element(By.CSS_SELECTOR, "form#value-form")
        form.find_element(By.CSS_SELECTOR, "input[name=group]").send_keys(f"contact.{key}")
        form.find_element(By.CSS_SELECTOR, "input[name=value]").send_keys(value)
        submit(browser, next_page, form)
        assert browser.find_element(By.CSS_SELECTOR, "#notice").text == "Value added."
    # A bad key is refused on the page, naming the field.
    form = browser.find_element(By.CSS_SELECTOR, "form#field-form")
    form.find_element(By.CSS_SELECTOR, "input[name=key]").send_keys("Not A Key")
    submit(browser, next_page, form)
    assert "(key)" in browser.find_element(By.CSS_SELECTOR, ".error").text

    browser.get(f"{console_url}/contacts/new")
    select = Select(browser.find_element(By.CSS_SELECTOR, f"select[name='custom_fields.{key}']"))
    assert [o.get_attribute("value") for o in select.options if o.get_attribute("value")] == ["small", "large"]
    # The registry is the API's: the field is there for keys too.
    fields = api.get("/schema").json()
    contact = next(o for o in fields["objects"] if o["name"] == "contact")
    assert any(f["key"] == key and f["type"] == "select" for f in contact["fields"])


def test_a_pipeline_made_in_settings_is_a_board(browser, sign_in_test_mode, console_url, unique, next_page):
    key = unique("hire").replace("-", "_")
    sign_in_test_mode(browser, "admin")
    browser.get(f"{console_url}/settings/pipelines")
    form = browser.find_element(By.CSS_SELECTOR, "form#pipeline-form")
    form.find_element(By.CSS_SELECTOR, "input[name=key]").send_keys(key)
    form.find_element(By.CSS_SELECTOR, "input[name=name]").send_keys("Hiring " + key)
    form.find_element(By.CSS_SELECTOR, "input[name=stages]").send_keys("applied, interview, hired")
    submit(browser, next_page, form)
    assert browser.find_element(By.CSS_SELECTOR, "#notice").text == "Pipeline created."
    section = browser.find_element(By.XPATH, f"//section[.//h2[contains(., '{key}')]]")
    add = section.find_element(By.XPATH, ".//form[.//input[@name='action' and @value='add']]")
    add.find_element(By.CSS_SELECTOR, "input[name=key]").send_keys("offer")
    add.find_element(By.CSS_SELECTOR, "input[name=label]").send_keys("Offer")
    submit(browser, next_page, add)
    assert browser.find_element(By.CSS_SELECTOR, "#notice").text == "Stages saved."

    browser.get(f"{console_url}/?pipeline={key}")
    columns = [c.get_attribute("data-stage") for c in browser.find_elements(By.CSS_SELECTOR, "section[data-stage]")]
    assert columns == ["applied", "interview", "hired", "offer"]


def test_a_viewer_reads_the_schema_settings_without_forms(browser, sign_in, console_url):
    sign_in(browser, "viewer")
    for path, form in (("/settings/fields", "form#field-form"), ("/settings/pipelines", "form#pipeline-form")):
        browser.get(f"{console_url}{path}")
        assert browser.find_elements(By.CSS_SELECTOR, "main h1"), path
        assert not browser.find_elements(By.CSS_SELECTOR, form), f"{path} offers {form} to a viewer"
