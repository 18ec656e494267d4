"""The "Which source words mattered?" view in a real browser: three heatmaps
of the translation the page shows, each cell the API's number (and the
library's: `Translator.attributions`), the agreements, and the one sentence
that says the methods can disagree."""

import numpy as np
import pytest

from tests.helpers import api_call
from tests.playground import browser
from tests.playground.browser import SENTENCE

pytestmark = pytest.mark.browser

TARGET = "el libro rojo está en la mesa ."
OTHER_TARGET = "el libro ."
METHODS = {"attention": "Raw attention (last layer, heads averaged)",
           "rollout": "Attention rollout", "input_x_gradient": "Input × gradient"}


def _shown(chrome):
    """`{method: [T, S] values}` of the cells the page draws."""
    cells = chrome.execute_script(
        "return Array.from(document.querySelectorAll('#attribution-maps td.attribution-cell'))"
        ".map(c => [c.getAttribute('data-method'), Number(c.getAttribute('data-row')),"
        " Number(c.getAttribute('data-col')), Number(c.getAttribute('data-value'))]);")
    shown = {}
    for method in {m for m, _, _, _ in cells}:
        mine = [(i, j, v) for m, i, j, v in cells if m == method]
        matrix = np.full((1 + max(i for i, _, _ in mine), 1 + max(j for _, j, _ in mine)), np.nan)
        for i, j, value in mine:
            matrix[i, j] = value
        shown[method] = matrix
    return shown


# api/attributions answers held until the test releases them (`__held[i]()`), so that
# they arrive late and in the order it picks; `__delivered` counts those the page has
# read (a timer after the body: it runs once the page's callbacks have).
HOLD_ATTRIBUTIONS = """
window.__held = []; window.__delivered = 0;
const realFetch = window.fetch.bind(window);
window.fetch = function (url, options) {
  if (String(url).indexOf("api/attributions") < 0) return realFetch(url, options);
  return realFetch(url, options).then(response => new Promise(resolve => {
    window.__held.push(() => {
      const text = response.text.bind(response);
      response.text = () => text().then(t => {
        setTimeout(() => window.__delivered++, 0);
        return t;
      });
      resolve(response);
    });
  }));
};
"""


def _submit_and_wait(chrome, target):
    """Submits SENTENCE with `target`; returns the answer once the page shows it."""
    shown = chrome.execute_script("return window.playground.state.requestId;")
    browser.submit(chrome, SENTENCE, beam_size=1, target=target)
    browser.wait(chrome, lambda d: d.execute_script(
        "return document.body.getAttribute('data-rendered');") == str(shown + 1),
        f"the page never showed the answer for {target!r}")
    return chrome.execute_script("return window.playground.state.data;")


def _row_labels(chrome):
    return chrome.execute_script(
        "return Array.from(document.querySelectorAll('#attribution-maps figure:first-child "
        "th.row-label')).map(t => t.textContent);")


def _wait_for_maps(chrome, rows):
    browser.wait(chrome, lambda d: d.execute_script(
        "const maps = document.getElementById('attribution-maps');"
        "return maps.getAttribute('data-source') === arguments[0]"
        " && maps.querySelectorAll('td.attribution-cell[data-method=attention]').length"
        " === arguments[1];", SENTENCE, rows),
        f"the attribution view never showed {rows} rows for {SENTENCE!r}")


def test_attribution_view(driver, playground_url, playground_translator, tmp_path):
    driver.get(playground_url)
    browser.wait(driver, lambda d: browser.count(d, "#head-view line") > 0,
                 "the page never drew the example")
    browser.submit(driver, SENTENCE, beam_size=1, target=TARGET)
    browser.wait_for_response(driver, SENTENCE, "forced")
    page = driver.execute_script("return window.playground.state.data;")
    status, answer = api_call(playground_url, "api/attributions",
                              {"text": SENTENCE, "target": page["target_ids"]})
    assert status == 200 and answer["target_tokens"] == page["target_tokens"]
    rows, cols = len(answer["target_tokens"]), len(answer["source_tokens"])
    _wait_for_maps(driver, rows * cols)

    section = driver.find_element("id", "attribution-section")
    assert driver.find_element("id", "attribution-title").text == "Which source words mattered?"
    sentence = driver.find_element("id", "attribution-sentence").text
    assert "can disagree" in sentence and "none of them is the ground truth" in sentence
    titles = [f.find_element("css selector", "figcaption strong").text
              for f in driver.find_elements("css selector", "#attribution-maps figure")]
    assert titles == list(METHODS.values())
    # Every cell is the API's number, and the library's.
    expected = playground_translator.attributions(SENTENCE, TARGET)
    shown = _shown(driver)
    assert sorted(shown) == sorted(METHODS)
    for method in METHODS:
        assert shown[method].shape == (rows, cols)
        np.testing.assert_array_equal(shown[method], np.array(answer[method]))
        np.testing.assert_allclose(shown[method], getattr(expected, method), rtol=1e-4,
                                   atol=1e-7)
    labels = driver.execute_script(
        "return Array.from(document.querySelectorAll('#attribution-maps figure:first-child "
        "th.col-label')).map(t => t.textContent);")
    assert labels == answer["source_tokens"]
    for method in ("rollout", "input_x_gradient"):
        agreement = driver.find_element(
            "css selector", f".attribution-agreement[data-method={method}]").text
        assert f"{round(answer['agreement'][method] * 100)}% of the rows" in agreement

    browser.section_screenshot(driver, section, tmp_path / "playground_attribution.png")

    # It follows the translation shown (another one of the user's: the tiny
    # model's own is 32 tokens of "." and slow to explain).
    # (The answer shown is the same sentence's, forced too: wait for this one's.)
    page = _submit_and_wait(driver, OTHER_TARGET)
    _wait_for_maps(driver, len(page["target_tokens"]) * cols)
    assert _row_labels(driver) == page["target_tokens"]
    browser.full_page_screenshot(driver, tmp_path / "playground_attribution_page.png")
    assert browser.severe_console_errors(driver) == []

    # A new translation: the maps of the one before are gone while its own are
    # computed, and a late answer for an older translation never replaces a newer's.
    driver.execute_script(HOLD_ATTRIBUTIONS)
    older = _submit_and_wait(driver, TARGET)
    browser.wait(driver, lambda d: d.execute_script("return window.__held.length;") == 1,
                 "the attributions of the new translation were never asked for")
    assert browser.count(driver, "#attribution-maps figure") == 0
    assert driver.find_element("id", "attribution-maps").get_attribute("aria-busy") == "true"
    assert "Computing" in driver.find_element("id", "attribution-status").text
    newest = _submit_and_wait(driver, OTHER_TARGET)
    assert newest["target_tokens"] != older["target_tokens"]
    browser.wait(driver, lambda d: d.execute_script("return window.__held.length;") == 2,
                 "the attributions of the newest translation were never asked for")
    assert browser.count(driver, "#attribution-maps figure") == 0
    driver.execute_script("window.__held[1]();")  # the newest answer first
    browser.wait(driver, lambda d: d.execute_script("return window.__delivered;") == 1,
                 "never read")
    assert _row_labels(driver) == newest["target_tokens"]
    driver.execute_script("window.__held[0]();")  # then the older one, late
    browser.wait(driver, lambda d: d.execute_script("return window.__delivered;") == 2,
                 "never read")
    assert _row_labels(driver) == newest["target_tokens"]
    assert driver.find_element("id", "attribution-maps").get_attribute("aria-busy") is None
    assert browser.severe_console_errors(driver) == []
