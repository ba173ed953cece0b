"""Owners (decisions §24) in the console: a new record is its creator's unless they choose
another owner; "My deals" on the board and "Mine only" on a list show the signed-in user's
records alone, counts included."""

from urllib.parse import unquote, urlparse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def user_id(api, users, role: str) -> str:
    email = users[role][0]
    res = api.get("/users", params={"limit": 100})
    assert res.status_code == 200, res.text
    found = [u["id"] for u in res.json()["data"] if u["email"] == email]
    assert found, f"no user {email}"
    return found[0]


def card_ids(browser) -> set:
    return {card.get_attribute("data-deal") for card in browser.find_elements(By.CSS_SELECTOR, "li[data-deal]")}


def test_my_deals_on_the_board_shows_only_the_members_deals(
    browser, sign_in_test_mode, console_url, api, users, create, unique, next_page
):
    member = user_id(api, users, "member")
    mine = create("/deals", {"title": unique("Mine"), "owner_id": member, "value_cents": 100, "currency": "EUR"})
    theirs = create("/deals", {"title": unique("Theirs")})
    sign_in_test_mode(browser, "member")
    browser.get(f"{console_url}/")
    shown = card_ids(browser)
    assert {mine["id"], theirs["id"]} <= shown, "the whole board shows both new deals"

    toggle = browser.find_element(By.CSS_SELECTOR, "form#board-filter input#mine")
    assert not toggle.is_selected()
    next_page(browser, toggle.click)
    assert browser.find_element(By.CSS_SELECTOR, "input#mine").is_selected()
    shown = card_ids(browser)
    assert mine["id"] in shown and theirs["id"] not in shown, shown
    listed = api.get("/deals", params={"owner_id": member, "limit": 100}).json()["data"]
    owned = [d for d in listed if d["stage"] == mine["stage"]]
    text = browser.find_element(By.CSS_SELECTOR, f"section[data-stage='{mine['stage']}'] [data-count]").text
    assert int(text.split()[0]) == len(owned), f"{text} for {len(owned)} deals of the member"


def test_a_new_record_is_its_creators_and_mine_only_lists_it(
    browser, sign_in_test_mode, console_url, api, users, create, unique, next_page
):
    member = user_id(api, users, "member")
    last_name = unique("Owned")
    create("/contacts", {"first_name": "Not", "last_name": last_name})
    sign_in_test_mode(browser, "member")
    browser.get(f"{console_url}/contacts/new")
    form = browser.find_element(By.CSS_SELECTOR, "form#record-form")
    owner = Select(form.find_element(By.CSS_SELECTOR, "select[name=owner_id]"))
    assert owner.first_selected_option.get_attribute("value") == member
    assert owner.first_selected_option.text.startswith("Me (")
    form.find_element(By.CSS_SELECTOR, "input[name=first_name]").send_keys("Mine")
    form.find_element(By.CSS_SELECTOR, "input[name=last_name]").send_keys(last_name)
    next_page(browser, form.find_element(By.XPATH, ".//button[normalize-space()='Create contact']").click)
    WebDriverWait(browser, 10).until(lambda d: unquote(urlparse(d.current_url).path).startswith("/contacts/con_"))
    contact_id = unquote(urlparse(browser.current_url).path).rsplit("/", 1)[1]
    assert api.get(f"/contacts/{contact_id}").json()["owner_id"] == member

    browser.get(f"{console_url}/contacts?q={last_name}")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#records tbody td:first-child a")]
    assert sorted(names) == sorted([f"Mine {last_name}", f"Not {last_name}"]), names
    filters = browser.find_element(By.CSS_SELECTOR, "form.filters")
    filters.find_element(By.CSS_SELECTOR, "input#mine").click()
    next_page(browser, filters.find_element(By.XPATH, ".//button[normalize-space()='Apply']").click)
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#records tbody td:first-child a")]
    assert names == [f"Mine {last_name}"], names
