"""The "Attention during training" view in a real browser: the slider's steps
are the API's, and the heatmap shown for a step is that checkpoint's own
cross-attention (last layer, heads averaged) on the page's translation."""

import numpy as np
import pytest

from tests.helpers import api_call
from tests.playground import browser
from tests.playground.browser import SENTENCE
from tests.playground.test_api_checkpoints import (  # noqa: F401 (fixtures)
    checkpoint_run,
    checkpoint_server,
    cross_mean,
)

pytestmark = pytest.mark.browser

TARGET = "el libro rojo está en la mesa ."


def _shown_map(chrome):
    """`(step, [Q, K] weights)` of the heatmap the page shows."""
    step, cells = chrome.execute_script(
        "const map = document.getElementById('checkpoint-heatmap');"
        "return [map.getAttribute('data-step'), Array.from(map.querySelectorAll("
        "'td.checkpoint-cell')).map(c => [Number(c.getAttribute('data-row')),"
        " Number(c.getAttribute('data-col')), Number(c.getAttribute('data-value'))])];")
    rows = 1 + max(i for i, _, _ in cells)
    cols = 1 + max(j for _, j, _ in cells)
    weights = np.full((rows, cols), np.nan)
    for i, j, value in cells:
        weights[i, j] = value
    return int(step), weights


def _wait_for_step(chrome, step):
    browser.wait(chrome, lambda d: d.execute_script(
        "const map = document.getElementById('checkpoint-heatmap');"
        "return map.getAttribute('data-step') === arguments[0]"
        " && map.getAttribute('data-source') === arguments[1]"
        " && map.querySelectorAll('td.checkpoint-cell').length > 0;", str(step), SENTENCE),
        f"the checkpoint view never showed step {step}")


def _move_slider(chrome, index):
    """Sets the range input to `index` as a user's drag would (input events)."""
    chrome.execute_script(
        "const s = document.getElementById('checkpoint-step'); s.value = String(arguments[0]);"
        "s.dispatchEvent(new Event('input', {bubbles: true}));", index)


def test_attention_during_training(driver, checkpoint_server, checkpoint_run,  # noqa: F811
                                   playground_url, playground_translator, tmp_path):
    from keras_attention.translation import load_checkpoint, run_checkpoints, translator_at

    base = checkpoint_server.url
    status, listing = api_call(base, "api/checkpoints")
    assert status == 200
    steps = [c["step"] for c in listing["checkpoints"]]
    checkpoints = {c.step: c for c in run_checkpoints(checkpoint_run[0])}
    assert steps == sorted(checkpoints) and len(steps) >= 3

    driver.get(base)
    browser.wait(driver, lambda d: browser.count(d, "#head-view line") > 0,
                 "the page never drew the example")
    # The page's translation (forced here: the tiny model's own is empty) is every step's target.
    browser.submit(driver, SENTENCE, beam_size=1, target=TARGET)
    browser.wait_for_response(driver, SENTENCE, "forced")
    section = driver.find_element("id", "checkpoints-section")
    assert driver.find_element("id", "checkpoints-title").text == "Attention during training"
    _wait_for_step(driver, steps[-1])  # the last step first
    # The slider's steps are the API's, one tick each.
    slider = driver.find_element("id", "checkpoint-step")
    assert slider.get_attribute("max") == str(len(steps) - 1)
    assert [int(t.get_attribute("data-step")) for t in
            driver.find_elements("css selector", "#checkpoint-ticks option")] == steps

    shown = {}
    translator = None  # one copy of its own, independent of the server's, moved step to step
    for index in (0, len(steps) - 1, 1):
        step = steps[index]
        _move_slider(driver, index)
        _wait_for_step(driver, step)
        label = driver.find_element("id", "checkpoint-label").text
        bleu = listing["checkpoints"][index]["validation_bleu"]
        assert f"step {step}" in label
        assert (f"validation BLEU {bleu:.2f}" if bleu is not None else "not scored") in label
        shown_step, weights = _shown_map(driver)
        assert shown_step == step
        # That checkpoint's own attention, from a translator of its own.
        translator = (translator_at(playground_translator, checkpoints[step]) if translator is None
                      else load_checkpoint(translator, checkpoints[step]))
        details = translator.attention_details(SENTENCE, TARGET)
        expected = cross_mean([np.asarray(block["weights"])[0]
                               for block in details.attention["cross"]])
        assert weights.shape == expected.shape
        np.testing.assert_allclose(weights, expected, atol=2e-5)
        status, answer = api_call(base, "api/checkpoint_attention",
                                  {"text": SENTENCE, "step": step, "target": TARGET})
        assert status == 200
        assert driver.find_element("id", "checkpoint-own").text == (
            answer["checkpoint_translation"]["text"] or "(nothing: an empty translation)")
        shown[step] = weights
    assert not np.allclose(shown[steps[0]], shown[steps[-1]], atol=1e-3)  # the maps move

    # A quick drag over every step: only the step it rests on is shown.
    for index in range(len(steps)):
        _move_slider(driver, index)
    _wait_for_step(driver, steps[-1])
    np.testing.assert_allclose(_shown_map(driver)[1], shown[steps[-1]], atol=0)

    browser.section_screenshot(driver, section, tmp_path / "playground_checkpoints.png")
    browser.full_page_screenshot(driver, tmp_path / "playground_checkpoints_page.png")
    assert browser.severe_console_errors(driver) == []

    # A model without checkpoints: the section says so in one line, and shows no slider.
    driver.get(playground_url)
    browser.wait(driver, lambda d: d.find_element("id", "checkpoints-none").is_displayed(),
                 "the page without checkpoints never said so")
    assert not driver.find_element("id", "checkpoints-body").is_displayed()
    assert "--workdir" in driver.find_element("id", "checkpoints-none").text
    assert browser.severe_console_errors(driver) == []
