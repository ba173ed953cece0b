"""The board: a card dragged onto a column moves its deal there (the console's own drag-and-drop
handlers submit the move form), the counts come from the server, the move runs the automations a
REST write runs and lands on the deal's timeline; a card moves by keyboard too (its Move button);
and a move of a deal someone else changed first is refused, the board showing the newer state and
saying so."""

import time
from urllib.parse import unquote, urlparse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

# HTML5 drag and drop is not driven by WebDriver's mouse actions in Chrome: the events are
# dispatched, with one shared DataTransfer, so that console.js's own handlers run.
DRAG_AND_DROP = """
const [card, column] = arguments;
const dataTransfer = new DataTransfer();
const fire = (target, type) => target.dispatchEvent(
  new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer}));
fire(card, "dragstart");
const into = column.querySelector("ol.cards") || column;
fire(into, "dragenter");
fire(into, "dragover");
fire(into, "drop");
fire(card, "dragend");
"""


def column(browser, stage: str):
    return browser.find_element(By.CSS_SELECTOR, f"section[data-stage='{stage}']")


def count(browser, stage: str) -> int:
    """The column's count as the server wrote it: `3 deals`."""
    text = column(browser, stage).find_element(By.CSS_SELECTOR, "[data-count]").text
    return int(text.split()[0])


def card_stage(browser, deal_id: str) -> str:
    """The stage of the column that holds the deal's card."""
    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal_id}']")
    return card.find_element(By.XPATH, "ancestor::section[@data-stage]").get_attribute("data-stage")


@pytest.fixture
def won_note(api, unique):
    """An automation on deal.stage_changed to `won` that adds a note naming the deal; deleted
    afterwards (the free plan allows two active automations)."""
    text = unique("Won by automation")
    res = api.post(
        "/automations",
        json={
            "name": text,
            "trigger_event": "deal.stage_changed",
            "conditions": [{"field": "stage", "op": "eq", "value": "won"}],
            "actions": [{"type": "create_activity", "activity_type": "note", "body": text + ": {{title}}"}],
        },
    )
    assert res.status_code == 201, res.text
    yield text
    api.delete(f"/automations/{res.json()['id']}")


def test_dragging_a_card_to_won_moves_the_deal_and_runs_its_automation(
    browser, sign_in_test_mode, api, create, unique, won_note, screenshot, next_page
):
    title = unique("Rocket deal")
    deal = create("/deals", {"title": title, "value_cents": 1250000, "currency": "USD"})
    assert deal["stage"] == "lead", deal
    sign_in_test_mode(browser, "member")
    assert urlparse(browser.current_url).path == "/"

    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")
    assert card.get_attribute("draggable") == "true"
    assert card_stage(browser, deal["id"]) == "lead"
    lead, won = count(browser, "lead"), count(browser, "won")

    # The move form is submitted: the board is loaded again, the card in won.
    next_page(browser, lambda: browser.execute_script(DRAG_AND_DROP, card, column(browser, "won")))
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"section[data-stage='won'] li[data-deal='{deal['id']}']"))
    assert card_stage(browser, deal["id"]) == "won"
    assert count(browser, "lead") == lead - 1
    assert count(browser, "won") == won + 1
    assert not browser.find_elements(By.CSS_SELECTOR, "#notice")
    screenshot(browser, "board")
    assert api.get(f"/deals/{deal['id']}").json()["stage"] == "won"

    # The deal's timeline: the user's stage change through the console, and the automation's
    # note (automations run in the write's transaction; poll a little all the same).
    next_page(browser, browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}'] a.title").click)
    WebDriverWait(browser, 10).until(lambda d: unquote(urlparse(d.current_url).path) == f"/deals/{deal['id']}")
    expected_note = f"{won_note}: {title}"
    deadline = time.monotonic() + 5
    while True:
        notes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline li.entry-note .entry-body")]
        if expected_note in notes or time.monotonic() > deadline:
            break
        time.sleep(0.5)
        browser.refresh()
    assert expected_note in notes, f"no automation note {expected_note!r} on the timeline: {notes}"

    changes = browser.find_elements(By.CSS_SELECTOR, "#timeline li.entry-change")
    moved = [c for c in changes if any("stage" in li.text and "won" in li.text for li in c.find_elements(By.CSS_SELECTOR, ".changes li"))]
    assert moved, f"no stage change to won on the timeline: {[c.text for c in changes]}"
    entry = moved[0]
    assert entry.find_element(By.CSS_SELECTOR, ".who").text == "by Console member (user)", entry.text
    assert "console" in entry.find_element(By.CSS_SELECTOR, ".channel").text, entry.text
    stage_change = [li.text for li in entry.find_elements(By.CSS_SELECTOR, ".changes li") if li.text.startswith("stage")]
    assert stage_change == ["stage: lead → won"], stage_change


def card_version(card) -> str:
    """The version of the deal the card was drawn from, which its move sends as If-Match."""
    version = card.get_attribute("data-version")
    if version is None:  # the earlier design: a move form per card
        version = card.find_element(By.CSS_SELECTOR, "form.move input[name=version]").get_attribute("value")
    return version


def move_without_dragging(browser, next_page, deal_id: str, stage: str):
    """Moves the card by keyboard: its Move button (Enter) opens the board's move form in a
    dialog for this card, where the stage is chosen and Move sent. (An earlier design had a
    move form on each card: its select and Move button.)"""
    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal_id}']")
    own_forms = card.find_elements(By.CSS_SELECTOR, "form.move")
    if own_forms:
        form = own_forms[0]
    else:
        card.find_element(By.CSS_SELECTOR, "button[data-move]").send_keys(Keys.ENTER)
        dialog = WebDriverWait(browser, 5).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog#move-dialog")))
        form = dialog.find_element(By.CSS_SELECTOR, "form#move-form")
        assert form.find_element(By.CSS_SELECTOR, "input[name=deal]").get_attribute("value") == deal_id
        assert form.find_element(By.CSS_SELECTOR, "input[name=version]").get_attribute("value") == card_version(card)
        stage_select = form.find_element(By.CSS_SELECTOR, "select[name=stage]")
        assert browser.switch_to.active_element == stage_select, "the dialog does not focus its stage select"
    Select(form.find_element(By.CSS_SELECTOR, "select[name=stage]")).select_by_value(stage)
    next_page(browser, form.find_element(By.XPATH, ".//button[normalize-space()='Move']").click)


def test_a_move_of_a_deal_changed_by_someone_else_first_shows_its_newer_state(
    browser, sign_in_test_mode, api, create, unique, next_page
):
    title = unique("Contested deal")
    deal = create("/deals", {"title": title})
    sign_in_test_mode(browser, "member")
    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")
    assert card_stage(browser, deal["id"]) == "lead"
    assert card_version(card) == str(deal["version"])

    # Someone else moves it meanwhile, which bumps its version.
    res = api.patch(f"/deals/{deal['id']}", json={"stage": "qualified"})
    assert res.status_code == 200, res.text
    newer = res.json()["version"]
    assert newer > deal["version"]

    # The board still shows the old version: moving it from there is refused.
    move_without_dragging(browser, next_page, deal["id"], "proposal")

    notice = WebDriverWait(browser, 10).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#notice")))
    assert "changed by someone else first" in notice.text, notice.text
    assert title in notice.text, notice.text
    assert card_stage(browser, deal["id"]) == "qualified"
    card = browser.find_element(By.CSS_SELECTOR, f"li[data-deal='{deal['id']}']")
    assert card_version(card) == str(newer)
    assert api.get(f"/deals/{deal['id']}").json()["stage"] == "qualified"


def test_the_move_button_moves_a_card_by_keyboard(browser, sign_in_test_mode, api, create, unique, next_page):
    """The control of the test above: the same move of an unchanged deal goes through."""
    deal = create("/deals", {"title": unique("Keyboard deal")})
    sign_in_test_mode(browser, "member")
    proposal = count(browser, "proposal")
    move_without_dragging(browser, next_page, deal["id"], "proposal")
    assert not browser.find_elements(By.CSS_SELECTOR, "#notice")
    assert card_stage(browser, deal["id"]) == "proposal"
    assert count(browser, "proposal") == proposal + 1
    assert api.get(f"/deals/{deal['id']}").json()["stage"] == "proposal"
