"""The playground page in a real browser: headless Chromium driven by Selenium 4.

The live test talks to the playground server of `playground_url` (a tiny
trained run, see conftest.py); the static test opens the one-file export of
`attention_html` from disk. Both need Debian's `chromium` and `chromedriver`
on PATH and skip with the command that installs them otherwise (browser.py).
"""

import math
import os
import re
import shutil
import time

import pytest

from tests.helpers import api_call
from tests.playground import browser  # skips this module without selenium or a browser
from tests.playground.browser import SENTENCE

pytestmark = pytest.mark.browser

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

ONE_WORD = "book"
NONSENSE = "Xqz vrbb plomk grzzt."
FORCED_TARGET = "el libro rojo está en la mesa ."


# -- helpers -----------------------------------------------------------------------------------


def _lines(driver):
    """The head view's lines as `(head, query, key, color, opacity)` tuples."""
    return [tuple(line) for line in driver.execute_script(
        "return Array.from(document.querySelectorAll('#head-view line')).map(l => ["
        "l.getAttribute('data-head'), l.getAttribute('data-q'), l.getAttribute('data-k'),"
        "l.getAttribute('stroke'), l.getAttribute('stroke-opacity')]);")]


def _token(driver, side, index):
    return driver.find_element(
        By.CSS_SELECTOR, f'#head-view .token[data-side="{side}"][data-index="{index}"]')


def _hover(driver, element):
    browser.scroll_to(driver, element)
    ActionChains(driver).move_to_element(element).perform()


def _step_probabilities(driver):
    """The step-by-step table's cells as `(position, id, probability)`."""
    return [tuple(cell) for cell in driver.execute_script(
        "return Array.from(document.querySelectorAll('#steps-table td.step-cell[data-id]'))"
        ".map(c => [c.getAttribute('data-position'), c.getAttribute('data-id'),"
        " Number(c.getAttribute('data-probability'))]);")]


def _alternatives_and_redecoding(driver, base, expected, tmp_path, record_property):
    """"Why this word, what else?" on `expected` (the page's answer, beam 2):
    the step-by-step table, a click on a target word opens its alternatives,
    picking one re-decodes from it (the new translation, score and attention
    shown), the temperature reshapes the table, and the page goes back to
    the original translation."""
    steps = expected["steps"]
    assert browser.count(driver, "#steps-table th.step-head") == len(steps)
    # One chosen cell per position.
    assert browser.count(driver, "#steps-table td.step-cell.chosen") == len(steps)
    ranked = [int(rank.text.split()[-1]) for rank in
              driver.find_elements(By.CSS_SELECTOR, "#steps-table th.step-head .step-rank")]
    assert ranked == [step["rank"] for step in steps if step["rank"] > 1]

    # Click the last target word (the sentence's [END] for this tiny model): its alternatives.
    t = len(steps) - 1
    chip = driver.find_element(By.CSS_SELECTOR, f'#target-tokens .token[data-index="{t}"]')
    browser.scroll_to(driver, chip)
    chip.click()
    browser.wait(driver, lambda d: d.find_element(By.ID, "alternatives").is_displayed(),
                 "clicking a target word did not show its alternatives")
    buttons = driver.find_elements(By.CSS_SELECTOR, "#alternatives button.alternative")
    assert [int(b.get_attribute("data-id")) for b in buttons] == [
        a["id"] for a in steps[t]["alternatives"]]
    assert [b.get_attribute("disabled") is not None for b in buttons] == [
        a["id"] == steps[t]["id"] for a in steps[t]["alternatives"]]
    pick = next(b for b in buttons if b.get_attribute("disabled") is None
                and not b.get_attribute("data-token").startswith("["))  # [END] ends prefixes
    picked, picked_id = pick.get_attribute("data-token"), int(pick.get_attribute("data-id"))
    prefix = expected["target_ids"][:t] + [picked_id]
    pick.click()
    browser.wait_for_response(driver, SENTENCE, "prefix")
    status, redecoded = api_call(base, "api/translate", {"text": SENTENCE, "beam_size": 2,
                                                         "target_prefix": prefix})
    assert status == 200, redecoded
    best = driver.find_element(By.CSS_SELECTOR, "#translations li .hyp-text").text
    assert best == redecoded["translations"][0]["text"].strip()
    chips = driver.find_elements(By.CSS_SELECTOR, "#target-tokens .token .tok-text")
    assert [c.text for c in chips] == redecoded["target_tokens"] and chips[t].text == picked
    if t == 0 and not picked.startswith("##"):
        assert best.startswith(picked), (best, picked)
    score = driver.find_element(By.CSS_SELECTOR, "#translations li .score").text
    assert score == f"score {redecoded['translations'][0]['score']:.3f}".replace("-", "−")
    # The views follow the new translation: one query per target position it reads.
    browser.wait(driver, lambda d: browser.count(d, '#head-view .token[data-side="query"]') == len(
        redecoded["target_input_tokens"]), "the head view did not follow the new translation")
    assert browser.count(driver, "#steps-table th.step-head") == len(redecoded["steps"])
    assert browser.count(driver, "#target-tokens .token.fixed") == len(prefix)

    screenshot = tmp_path / "alternatives.png"
    browser.full_page_screenshot(driver, screenshot)
    assert screenshot.stat().st_size > 10_000
    record_property("alternatives_screenshot", str(screenshot))
    print(f"screenshot of a re-decoded translation: {screenshot}")
    if os.environ.get("PLAYGROUND_ALTERNATIVES_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["PLAYGROUND_ALTERNATIVES_SCREENSHOT"])

    # The temperature: other probabilities, the same order (api/alternatives, no new search).
    before = _step_probabilities(driver)
    slider = driver.find_element(By.ID, "steps-temperature")
    browser.scroll_to(driver, slider)
    driver.execute_script("arguments[0].value = '3'; arguments[0].dispatchEvent("
                          "new Event('input', {bubbles: true}));", slider)
    browser.wait(driver, lambda d: _step_probabilities(d) != before,
                 "moving the temperature did not change the step-by-step probabilities")
    after = _step_probabilities(driver)
    assert [cell[:2] for cell in after] == [cell[:2] for cell in before]
    assert max(p for *_, p in after) < max(p for *_, p in before)  # flatter
    assert driver.find_element(By.ID, "steps-temperature-value").text == "3.00"

    # Back to the original translation, its views (and the model's own temperature).
    driver.execute_script("arguments[0].value = '1'; arguments[0].dispatchEvent("
                          "new Event('input', {bubbles: true}));", slider)
    back = driver.find_element(By.ID, "back-to-original")
    browser.scroll_to(driver, back)
    back.click()
    browser.wait_for_response(driver, SENTENCE, "translate")
    assert driver.find_element(By.CSS_SELECTOR, "#translations li .hyp-text").text == \
        expected["translations"][0]["text"].strip()
    cells = [(str(t), str(a["id"]), a["probability"]) for t, step in enumerate(steps)
             for a in step["alternatives"]]
    cells += [(str(t), str(step["id"]), step["probability"]) for t, step in enumerate(steps)
              if step["rank"] > len(step["alternatives"])]
    browser.wait(driver, lambda d: sorted(_step_probabilities(d)) == sorted(cells),
                 "going back did not show the original translation's steps at T = 1")
    assert not driver.find_element(By.ID, "alternatives").is_displayed()
    driver.execute_script("window.scrollTo(0, 0);")


# -- the live page -----------------------------------------------------------------------------


def test_playground_page(driver, playground_url, tmp_path, record_property):
    base = playground_url if playground_url.endswith("/") else playground_url + "/"
    status, info = api_call(base, "api/info")
    assert status == 200, info

    started = time.monotonic()
    driver.get(base)
    # On load the page fetches api/info, prefills the example and translates it.
    browser.wait(driver, lambda d: browser.count(d, "#head-view line") > 0,
                 "the head view never drew the example's attention")
    load_seconds = time.monotonic() - started
    record_property("page_load_seconds", round(load_seconds, 3))
    print(f"page load (navigation -> head view drawn): {load_seconds:.2f} s")
    assert driver.find_element(By.ID, "text").get_attribute("value") == info["example"]
    # The sentences to try: one button each; a click translates it.
    buttons = driver.find_elements(By.CSS_SELECTOR, "#examples button.example")
    assert [b.text for b in buttons] == info["examples"]
    buttons[1].click()
    browser.wait_for_response(driver, info["examples"][1], "translate")
    assert driver.find_element(By.ID, "text").get_attribute("value") == info["examples"][1]
    beam = driver.find_element(By.ID, "beam-size")
    assert beam.get_attribute("max") == str(info["max_beam_size"])
    assert "keras_attention playground" in driver.find_element(By.TAG_NAME, "h1").text
    summary = driver.find_element(By.ID, "model-summary").text
    assert summary.startswith("Transformer · ") and "parameters" in summary, summary
    # Its test BLEU to one decimal (JavaScript's toFixed rounds a tie up, Python's to even).
    shown = re.search(r"test BLEU (\d+\.\d)\b", summary)
    assert shown and abs(float(shown[1]) - info["scores"]["test"]["bleu"]) <= 0.05 + 1e-9, summary

    # Translate a sentence with beam 2 (Enter submits).
    browser.submit(driver, SENTENCE, beam_size=2)
    browser.wait_for_response(driver, SENTENCE, "translate")
    status, expected = api_call(base, "api/translate", {"text": SENTENCE, "beam_size": 2})
    assert status == 200, expected
    hypotheses = driver.find_elements(By.CSS_SELECTOR, "#translations li")
    assert 1 <= len(hypotheses) <= 2
    assert hypotheses[0].find_element(By.CLASS_NAME, "hyp-text").text == \
        expected["translations"][0]["text"].strip()
    assert browser.count(driver, "#source-tokens .token") == len(expected["source_tokens"])
    assert browser.count(driver, "#target-tokens .token") == len(expected["target_tokens"])
    assert browser.count(driver, "#target-tokens .token[data-probability] .prob-bar") == \
        len(expected["target_tokens"])
    status_text = driver.find_element(By.ID, "status").text
    assert "ms" in status_text and "round trip" in status_text
    assert "error" not in driver.find_element(By.ID, "status").get_attribute("class")
    # How far to trust it: the confidence and the words out of vocabulary, always shown.
    numbers = driver.find_element(By.CSS_SELECTOR, "#reliability .reliability-numbers").text
    assert f"confidence {100 * expected['confidence']:.1f}%" in numbers, numbers
    assert "0 of 7 source words out of vocabulary" in numbers, numbers

    _alternatives_and_redecoding(driver, base, expected, tmp_path, record_property)

    # Head view: the default is cross-attention, target input tokens x source tokens.
    Q, K = len(expected["target_input_tokens"]), len(expected["source_tokens"])
    assert Select(driver.find_element(By.ID, "kind")).first_selected_option.get_attribute(
        "value") == "cross"
    assert browser.count(driver, '#head-view .token[data-side="query"]') == Q
    assert browser.count(driver, '#head-view .token[data-side="key"]') == K
    labels = [option.text for option in Select(driver.find_element(By.ID, "kind")).options]
    assert labels == ["Encoder self-attention", "Decoder self-attention (causal)",
                      "Cross-attention (target → source)"]
    # One convention for decoder rows everywhere (as the PNG heatmaps): "reads X → predicts Y".
    reads_predicts = [f"{x} → {y}" for x, y in zip(expected["target_input_tokens"],
                                                    expected["target_tokens"])]

    def query_labels(d):
        return d.execute_script(
            "return Array.from(document.querySelectorAll("
            "'#head-view .token[data-side=\"query\"]')).map(g => ["
            "g.querySelector('.token-label').textContent, g.querySelector('title').textContent]);")

    shown = query_labels(driver)
    assert [label for label, _ in shown] == reads_predicts
    last = len(reads_predicts) - 1
    assert shown[last][1].startswith(f"query {last}: reads "
                                     f"{expected['target_input_tokens'][last]}, "
                                     f"predicts {expected['target_tokens'][last]}")
    assert [option.text for option in Select(driver.find_element(By.ID, "comp-query")).options] \
        == [f"{i}: {label}" for i, label in enumerate(reads_predicts)]
    assert driver.find_element(By.ID, "comp-query-label").text == f"«{reads_predicts[0]}»"
    assert f"({', '.join(reads_predicts[:2])}{', …' if Q > 1 else ''})" in driver.find_element(
        By.ID, "model-view-rows").text
    assert driver.find_element(By.CSS_SELECTOR, "#target-tokens .token").get_attribute(
        "title").startswith(f"reads {expected['target_input_tokens'][0]} → predicts "
                            f"{expected['target_tokens'][0]}: P(")

    Select(driver.find_element(By.ID, "kind")).select_by_value("encoder_self")
    browser.wait(driver, lambda d: browser.count(d, '#head-view .token[data-side="query"]') == K
                 and browser.count(d, '#head-view .token[data-side="key"]') == K,
                 "the encoder self-attention head view does not show S x S tokens")
    Select(driver.find_element(By.ID, "kind")).select_by_value("cross")
    browser.wait(driver, lambda d: browser.count(d, '#head-view .token[data-side="query"]') == Q,
                 "the head view did not go back to cross-attention")
    Select(driver.find_element(By.ID, "kind")).select_by_value("decoder_self")
    browser.wait(driver, lambda d: [label for label, _ in query_labels(d)] == reads_predicts,
                 "the decoder self-attention rows are not labelled reads → predicts")
    Select(driver.find_element(By.ID, "kind")).select_by_value("cross")

    # The head view starts with the average over heads (all heads at once are a
    # hairball); "All heads" shows every head.
    num_layers = len(expected["attention"]["cross"]["weights"])
    num_heads = len(expected["attention"]["cross"]["weights"][0])
    browser.wait(driver, lambda d: {line[0] for line in _lines(d)} == {"average"},
                 "the head view does not start with the average over heads")
    assert driver.find_element(By.CSS_SELECTOR, '#heads input[data-head="average"]').is_selected()
    driver.find_element(By.ID, "heads-all").click()
    browser.wait(driver, lambda d: len({line[0] for line in _lines(d)}) == num_heads,
                 "'All heads' does not draw every head")

    # Switching the layer and the heads redraws the lines.
    before = _lines(driver)
    assert before and {line[0] for line in before} == {str(h) for h in range(num_heads)}
    if num_layers > 1:
        layer_select = Select(driver.find_element(By.ID, "layer"))
        shown_layer = int(layer_select.first_selected_option.get_attribute("value"))
        layer_select.select_by_value(str((shown_layer + 1) % num_layers))
        browser.wait(driver, lambda d: _lines(d) != before,
                     "changing the layer did not redraw the lines")
    before = _lines(driver)
    driver.find_element(By.CSS_SELECTOR, '#heads input[data-head="0"]').click()
    browser.wait(driver, lambda d: _lines(d) != before, "hiding head 0 did not redraw the lines")
    assert "0" not in {line[0] for line in _lines(driver)}
    driver.find_element(By.CSS_SELECTOR, '#heads input[data-head="average"]').click()
    browser.wait(driver, lambda d: {line[0] for line in _lines(d)} == {"average"},
                 "the average option does not draw the average lines")
    driver.find_element(By.ID, "heads-all").click()
    browser.wait(driver, lambda d: len({line[0] for line in _lines(d)}) == num_heads,
                 "'All heads' does not draw every head")

    # Hovering a query highlights its lines, hovering a key the lines into it
    # (the key most attended to in the layer shown, so that it has lines).
    assert browser.count(driver, "#head-view line.active") == 0
    layer = int(Select(driver.find_element(By.ID, "layer")).first_selected_option
                .get_attribute("value"))
    totals = [sum(row[j] for heads in expected["attention"]["cross"]["weights"][layer]
                  for row in heads) for j in range(K)]
    key = totals.index(max(totals))
    _hover(driver, _token(driver, "query", 0))
    browser.wait(driver, lambda d: browser.count(d, "#head-view line.active") > 0,
                 "hovering a query token highlighted no line")
    active = driver.execute_script(
        "return Array.from(document.querySelectorAll('#head-view line.active'))"
        ".map(l => l.getAttribute('data-q'));")
    assert set(active) == {"0"}
    assert "hovering" in driver.find_element(By.ID, "head-view").get_attribute("class")
    _hover(driver, _token(driver, "key", key))
    browser.wait(driver, lambda d: set(d.execute_script(
        "return Array.from(document.querySelectorAll('#head-view line.active'))"
        ".map(l => l.getAttribute('data-k'));")) == {str(key)},
        "hovering a key token did not highlight the lines into it")

    # Model view: one cell per layer and head; a click sets the head view to it.
    assert browser.count(driver, "#model-view [data-layer][data-head]") == num_layers * num_heads
    head = num_heads - 1
    cell = driver.find_element(By.CSS_SELECTOR,
                               f'#model-view [data-layer="0"][data-head="{head}"]')
    browser.scroll_to(driver, cell)
    cell.click()
    browser.wait(driver, lambda d: Select(d.find_element(By.ID, "layer")).first_selected_option
                 .get_attribute("value") == "0" and {line[0] for line in _lines(d)} == {str(head)},
                 "clicking a model-view cell did not set the head view's layer and head")
    checked = [box.get_attribute("data-head") for box in
               driver.find_elements(By.CSS_SELECTOR, "#heads input:checked")]
    assert checked == [str(head)]
    assert "selected" in driver.find_element(
        By.CSS_SELECTOR, f'#model-view [data-layer="0"][data-head="{head}"]').get_attribute("class")

    # Computation view for the last query: one row per key, weights sum to 1,
    # and they are the model's weights.
    query = Q - 1
    token = _token(driver, "query", query)
    browser.scroll_to(driver, token)
    ActionChains(driver).move_to_element(token).click().perform()
    browser.wait(driver, lambda d: Select(d.find_element(By.ID, "comp-query")).first_selected_option
                 .get_attribute("value") == str(query), "clicking a query did not select it")
    rows = driver.find_elements(By.CSS_SELECTOR, "#computation-table tbody tr[data-key-index]")
    assert len(rows) == K
    weights = [float(cell.get_attribute("data-weight")) for cell in
               driver.find_elements(By.CSS_SELECTOR, "#computation-table tbody td.weight")]
    assert len(weights) == K
    assert abs(sum(weights) - 1.0) <= 0.002, weights
    model_weights = expected["attention"]["cross"]["weights"][0][head][query]
    assert weights == pytest.approx(model_weights, abs=1e-6)
    check = driver.find_element(By.ID, "computation-check").text
    assert "Σ weights = 1.00" in check and "✓" in check, check
    # Decoder self-attention is causal: the last row's keys are all visible,
    # the first query's later keys are masked (−∞).
    Select(driver.find_element(By.ID, "kind")).select_by_value("decoder_self")
    Select(driver.find_element(By.ID, "comp-query")).select_by_value("0")
    browser.wait(driver, lambda d: browser.count(d, "#computation-table tbody tr") == Q,
                 "the decoder self-attention table does not have one row per target token")
    assert browser.count(driver, "#computation-table tbody tr.masked") == Q - 1
    Select(driver.find_element(By.ID, "kind")).select_by_value("cross")
    browser.wait(driver, lambda d: browser.count(d, "#computation-table tbody tr") == K,
                 "the computation view did not follow the kind")

    screenshot = tmp_path / "playground.png"
    browser.full_page_screenshot(driver, screenshot)
    assert screenshot.stat().st_size > 10_000
    if os.environ.get("PLAYGROUND_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["PLAYGROUND_SCREENSHOT"])

    # Softmax sandbox: editing a number or the temperature moves the bars.
    def bars(d):
        return d.execute_script(
            "return Array.from(document.querySelectorAll('#sandbox-bars .sandbox-bar > span'))"
            ".map(s => s.style.width);")
    before = bars(driver)
    assert 4 <= len(before) <= 6
    first = driver.find_element(By.CSS_SELECTOR, "#sandbox .sandbox-input")
    browser.scroll_to(driver, first)
    browser.set_value(first, "5")
    browser.wait(driver, lambda d: bars(d) != before,
                 "editing a sandbox number did not move the bars")
    values = [float(v.get_attribute("data-value")) for v in
              driver.find_elements(By.CSS_SELECTOR, "#sandbox-bars .value")]
    assert sum(values) == pytest.approx(1.0, abs=1e-6) and values[0] == max(values)
    before = bars(driver)
    browser.set_value(driver.find_element(By.ID, "temperature-number"), "4")
    browser.wait(driver, lambda d: bars(d) != before,
                 "changing the temperature did not move the bars")
    flatter = [float(v.get_attribute("data-value")) for v in
               driver.find_elements(By.CSS_SELECTOR, "#sandbox-bars .value")]
    assert max(flatter) < max(values)

    # A one-word sentence renders too.
    driver.execute_script("window.scrollTo(0, 0);")
    browser.submit(driver, ONE_WORD, beam_size=1)
    browser.wait_for_response(driver, ONE_WORD, "translate")
    status, one = api_call(base, "api/translate", {"text": ONE_WORD, "beam_size": 1})
    assert browser.count(driver, '#head-view .token[data-side="key"]') == len(one["source_tokens"])

    # A sentence mostly out of the vocabulary: the page warns.
    assert browser.count(driver, "#reliability .warning[data-kind='out_of_vocabulary']") == 0
    browser.submit(driver, NONSENSE, beam_size=1)
    browser.wait_for_response(driver, NONSENSE, "translate")
    warning = driver.find_element(By.CSS_SELECTOR,
                                  "#reliability .warning[data-kind='out_of_vocabulary']")
    assert warning.is_displayed() and "not in the model's vocabulary" in warning.text

    # A phone-sized window (420 px): nothing makes the page scroll sideways.
    driver.set_window_size(420, 900)
    try:
        browser.wait(driver, lambda d: d.execute_script("return window.innerWidth;") <= 420
                     and d.execute_script("return document.documentElement.scrollWidth <= "
                                          "window.innerWidth;"),
                     "the page scrolls sideways at 420 px: " + str(driver.execute_script(
                         "return [document.documentElement.scrollWidth, window.innerWidth, "
                         "Array.from(document.querySelectorAll('body *')).filter(e => "
                         "e.getBoundingClientRect().right > window.innerWidth + 0.5)"
                         ".slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className)];")),
                     timeout=10)
    finally:
        driver.set_window_size(1400, 1000)

    # An empty sentence: the API's error message, shown as an error.
    status, error = api_call(base, "api/translate", {"text": "", "beam_size": 2})
    assert status == 400 and error["error"]
    browser.submit(driver, "", beam_size=2)
    browser.wait(driver,
                 lambda d: "error" in d.find_element(By.ID, "status").get_attribute("class"),
                 "an empty sentence did not show an error")
    assert error["error"] in driver.find_element(By.ID, "status").text

    # My own translation: the model's probability of each of its tokens.
    browser.submit(driver, SENTENCE, beam_size=2, target=FORCED_TARGET)
    browser.wait_for_response(driver, SENTENCE, "forced")
    status, forced = api_call(base, "api/translate",
                              {"text": SENTENCE, "beam_size": 2, "target": FORCED_TARGET})
    assert status == 200 and forced["mode"] == "forced"
    chips = driver.find_elements(By.CSS_SELECTOR, "#target-tokens .token")
    assert len(chips) == len(forced["target_tokens"])
    shown = [float(chip.get_attribute("data-probability")) for chip in chips]
    assert shown == pytest.approx(forced["token_probabilities"], abs=1e-6)
    assert all(0.0 <= p <= 1.0 and not math.isnan(p) for p in shown)
    assert all(chip.find_element(By.CLASS_NAME, "prob").text.endswith("%") for chip in chips)
    # A longer target: row t reads token t-1 of it and predicts token t.
    assert [label for label, _ in query_labels(driver)] == [
        f"{x} → {y}" for x, y in zip(forced["target_input_tokens"], forced["target_tokens"])]
    assert "error" not in driver.find_element(By.ID, "status").get_attribute("class")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#translations li")) == 1

    assert browser.severe_console_errors(driver) == []


# -- the static export -------------------------------------------------------------------------


def test_static_export(driver, playground_translator, tmp_path):
    from keras_attention.playground import attention_html

    path = tmp_path / "one.html"
    path.write_text(attention_html(playground_translator, SENTENCE, beam_size=2),
                    encoding="utf-8")

    driver.get(path.as_uri())
    browser.wait(driver, lambda d: browser.count(d, "#head-view line") > 0,
                 "the static export did not draw the head view")
    note = driver.find_element(By.ID, "static-note")
    assert note.is_displayed() and "Static export of one sentence" in note.text
    assert not driver.find_element(By.ID, "translate-form").is_displayed()
    assert driver.find_element(By.ID, "translations").get_attribute("data-source") == SENTENCE
    assert browser.count(driver, "#translations li") >= 1
    assert browser.count(driver, "#model-view [data-layer][data-head]") > 0
    assert browser.count(driver, "#computation-table tbody tr[data-key-index]") > 0
    assert "error" not in driver.find_element(By.ID, "status").get_attribute("class")
    # The alternatives are shown, but nothing can be re-decoded without a server.
    assert browser.count(driver, "#steps-table th.step-head") > 0
    assert not driver.find_element(By.ID, "steps-temperature").is_enabled()
    driver.find_element(By.CSS_SELECTOR, '#target-tokens .token[data-index="0"]').click()
    browser.wait(driver, lambda d: browser.count(d, "#alternatives button.alternative") > 0,
                 "clicking a target word in the export did not show its alternatives")
    assert browser.count(driver, "#alternatives button.alternative:not([disabled])") == 0
    # The decoder rows read one token and predict the next, as on the live page.
    first = driver.find_element(By.CSS_SELECTOR,
                                '#head-view .token[data-side="query"] .token-label').text
    assert first.startswith("[START] → "), first
    # Self-contained: the assets are inlined, and nothing points at the network.
    assert browser.count(driver, "script[src], link[rel=stylesheet]") == 0
    links = driver.execute_script(
        "return Array.from(document.querySelectorAll('[src], [href]'))"
        ".map(e => e.getAttribute('src') || e.getAttribute('href'));")
    assert not [link for link in links if link.lower().startswith(("http:", "https:", "//"))]
    fetched = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name);")
    assert not [name for name in fetched if name.startswith(("http:", "https:"))]
    assert browser.severe_console_errors(driver) == []
