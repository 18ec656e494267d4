"""The "Beam search, step by step" view in a headless browser: the nodes it
draws are the API's candidates with their statuses and numbers, the
highlighted path spells the translation the page shows, and a screenshot
of the section."""

import pytest

from keras_attention.playground import attention_html
from tests.helpers import api_call
from tests.playground import browser
from tests.playground.browser import SENTENCE

pytestmark = pytest.mark.browser

from selenium.webdriver.common.by import By  # noqa: E402

NODES = """return Array.from(document.querySelectorAll('#beam-tree g.beam-node[data-index]'))
  .map(n => ({step: Number(n.dataset.step), index: Number(n.dataset.index),
              id: Number(n.dataset.id), token: n.dataset.token, status: n.dataset.status,
              log_prob: Number(n.dataset.logProb), score: Number(n.dataset.score),
              best: n.dataset.best === 'true',
              title: n.querySelector('title').textContent}));"""


def test_beam_tree_view(driver, playground_url, playground_translator, tmp_path):
    base = playground_url if playground_url.endswith("/") else playground_url + "/"
    driver.get(base)
    browser.wait(driver, lambda d: d.execute_script("return !!window.playground.state.info;"),
                 "the page never loaded api/info")
    # A beam of one (greedy search) runs this barely trained model to the length
    # limit: a long chain, scrolled sideways, its path the page's tokens.
    browser.submit(driver, SENTENCE, beam_size=1)
    browser.wait_for_response(driver, SENTENCE, "translate")
    status, chain = api_call(base, "api/beam_tree", {"text": SENTENCE, "beam_size": 1})
    assert status == 200, chain
    browser.wait(driver, lambda d: len(d.execute_script(NODES)) == sum(map(len, chain["steps"])),
                 "the beam tree never drew the beam of one")
    chain_path = [n["token"] for n in sorted(driver.execute_script(NODES),
                                             key=lambda n: n["step"]) if n["best"]]
    assert chain_path == chain["tokens"]
    assert driver.execute_script("return window.playground.state.data;")["translations"][0][
        "text"] == chain["translation"]
    wrap = driver.find_element(By.CSS_SELECTOR, ".beam-tree-wrap")
    if len(chain["steps"]) > 12:
        assert driver.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth;",
                                     wrap)

    # Beam size 3: kept, finished and pruned candidates.
    browser.submit(driver, SENTENCE, beam_size=3)
    browser.wait_for_response(driver, SENTENCE, "translate")
    status, tree = api_call(base, "api/beam_tree", {"text": SENTENCE, "beam_size": 3})
    assert status == 200, tree
    expected = [(t, i, c["id"], c["token"], c["status"]) for t, step in enumerate(tree["steps"])
                for i, c in enumerate(step)]
    browser.wait(driver, lambda d: "Beam size 3" in d.find_element(By.ID, "beam-tree-summary").text
                 and len(d.execute_script(NODES)) == len(expected),
                 "the beam tree never drew the API's candidates")
    nodes = driver.execute_script(NODES)
    assert [(n["step"], n["index"], n["id"], n["token"], n["status"]) for n in nodes] == expected
    candidates = [c for step in tree["steps"] for c in step]
    assert [n["log_prob"] for n in nodes] == [c["log_prob"] for c in candidates]
    assert [n["score"] for n in nodes] == [c["score"] for c in candidates]
    assert all("log P = " in n["title"] and "score" in n["title"] for n in nodes)
    # The library's own tree, node for node.
    library = playground_translator.beam_tree(SENTENCE, beam_size=3)
    assert [(c.token, c.status) for step in library.steps for c in step] == [
        (n["token"], n["status"]) for n in nodes]
    # Kept nodes are drawn solid, finished ones as end nodes with their score, pruned faded.
    for n in nodes:
        if n["status"] == "finished":
            assert n["token"] == "[END]"
    opacity = driver.execute_script(
        "return Array.from(document.querySelectorAll('#beam-tree g.beam-node[data-index]'))"
        ".map(n => Number(getComputedStyle(n).opacity));")
    assert all((o < 1) == (n["status"] == "pruned") for o, n in zip(opacity, nodes))
    # The highlighted path spells the translation the page shows.
    best = sorted((n["step"], n["index"], n["token"]) for n in nodes if n["best"])
    assert [(t, i) for t, i, _ in best] == list(enumerate(tree["best_path"]))
    path = [token for _, _, token in best]
    shown = driver.execute_script("return window.playground.state.data;")
    assert shown["translations"][0]["text"] == tree["translation"]
    target_tokens = shown["target_tokens"]
    if path[-1] != "[END]":  # cut at the length limit: the page's pass appends [END]
        target_tokens = target_tokens[:-1]
    assert path == target_tokens == library.tokens
    assert len(driver.find_elements(By.CSS_SELECTOR, "#beam-tree path.beam-edge.beam-best")) \
        == len(path)
    summary = driver.find_element(By.ID, "beam-tree-summary").text
    assert "Beam size 3" in summary and tree["translation"] in summary
    # Long sentences scroll sideways inside the card, not the page.
    assert driver.execute_script(
        "return getComputedStyle(document.querySelector('.beam-tree-wrap')).overflowX;") == "auto"

    # The one-file export has no server to run the search: the view says so.
    exported = tmp_path / "export.html"
    exported.write_text(attention_html(playground_translator, SENTENCE, beam_size=3),
                        encoding="utf-8")
    driver.get(exported.as_uri())
    browser.wait(driver, lambda d: "live playground server" in d.find_element(
        By.ID, "beam-tree-status").text, "the export never said the view needs the server")
    assert browser.count(driver, "#beam-tree g.beam-node") == 0
    driver.get(base)  # back to the live page, its tree drawn again for the screenshot
    browser.submit(driver, SENTENCE, beam_size=3)
    browser.wait(driver, lambda d: browser.count(d, "#beam-tree g.beam-node[data-index]")
                 == len(expected), "the beam tree never drew the API's candidates again")

    section = driver.find_element(By.ID, "beam-tree-section")
    browser.section_screenshot(driver, section, tmp_path / "playground_beam_tree.png")
    assert not browser.severe_console_errors(driver)
