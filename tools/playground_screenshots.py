"""Screenshots of the playground's views for docs/images/, taken in headless Chromium.

    python tools/playground_screenshots.py [--preset tatoeba_en_es] [--run runs/bundled]
                                           [--out docs/images]

The page on a shipped preset, from its top (playground_<preset>.png), and its "look
inside a translation" views (its own translation of the articles' sentence): the
step-by-step table with a target word's alternatives open (playground_steps.png), the
beam search tree (playground_beam_tree.png) and the three attributions
(playground_attribution.png). With --run, a training run that kept checkpoints, the
attention-during-training view at its first and last checkpoint
(playground_checkpoints_first.png, playground_checkpoints_last.png). Needs chromium and
chromedriver on PATH (Debian: apt-get install chromium chromium-driver) and selenium.
"""

import argparse
import os
import shutil
import time

SENTENCE = "I left the red book at the library."
RUN_SENTENCE = "The red book is on the table."
TIMEOUT = 180


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                   "google-chrome"))), None)
    chromedriver = shutil.which("chromedriver")
    if not (browser and chromedriver):
        raise SystemExit("error: chromium and chromedriver must be on PATH "
                         "(apt-get install chromium chromium-driver).")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1400,1200", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


def _wait(driver, script, what, *args):
    """Waits until the JavaScript expression `script` (a `return ...`) is truthy."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, TIMEOUT, poll_frequency=0.2).until(
        lambda d: d.execute_script(script, *args), message=f"the page never showed {what}")


def _translate(driver, url, sentence):
    driver.get(url)
    _wait(driver, "return window.playground && window.playground.state.info", "api/info")
    driver.execute_script("document.getElementById('text').value = arguments[0];"
                          "window.playground.translate();", sentence)
    _wait(driver, "const t = document.getElementById('translations');"
                  "return t && t.getAttribute('data-source') === arguments[0];",
          "the translation", sentence)


def _shoot(driver, selector, path):
    element = driver.find_element("css selector", selector)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", element)
    time.sleep(0.5)
    element.screenshot(path)
    print(f"wrote {path}")


def _shoot_page(driver, path, max_height=2600):
    """The page from its top (the header's model summary, the translation,
    the head and model views), as a newcomer first sees it."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    size = driver.get_window_size()
    driver.set_window_size(size["width"], min(height, max_height))
    driver.execute_script("window.scrollTo(0, 0);")
    time.sleep(0.5)
    driver.save_screenshot(path)
    driver.set_window_size(size["width"], size["height"])  # back to the views' window
    print(f"wrote {path}")


def preset_views(driver, translator, out, name):
    from keras_attention.playground import PlaygroundServer

    server = PlaygroundServer(translator, port=0, name=name).start()
    try:
        _translate(driver, server.url, SENTENCE)
        _wait(driver, "return document.querySelectorAll('#head-view line').length > 0",
              "the head view")
        _shoot_page(driver, os.path.join(out, f"playground_{name}.png"))
        _wait(driver, "return document.querySelectorAll("
                      "'#beam-tree-section [data-status=\"kept\"]').length > 0", "the beam tree")
        _wait(driver, "return document.querySelectorAll("
                      "'#attribution-section td[data-method]').length > 0", "the attributions")
        _shoot(driver, "#beam-tree-section", os.path.join(out, "playground_beam_tree.png"))
        _shoot(driver, "#attribution-section", os.path.join(out, "playground_attribution.png"))
        # A target word's alternatives (the third word: "rojo"'s neighbourhood).
        driver.execute_script("window.playground.alternatives(2);")
        _wait(driver, "const a = document.getElementById('alternatives');"
                      "return a && !a.hidden && a.querySelectorAll('button').length > 0",
              "the alternatives")
        _shoot(driver, "#results-section", os.path.join(out, "playground_steps.png"))
    finally:
        server.shutdown()


def checkpoint_views(driver, run, out):
    from keras_attention import Translator
    from keras_attention.playground import PlaygroundServer

    server = PlaygroundServer(Translator.from_preset(run), port=0, checkpoints=run).start()
    try:
        _translate(driver, server.url, RUN_SENTENCE)
        steps = _wait(driver, "const s = document.querySelector('#checkpoints-section "
                              "input[type=range]'); return s && s.getAttribute('data-steps') "
                              "&& JSON.parse(s.getAttribute('data-steps'));", "the slider")
        for name, index in (("first", 0), ("last", len(steps) - 1)):
            driver.execute_script(
                "const s = document.querySelector('#checkpoints-section input[type=range]');"
                "s.value = String(arguments[0]);"
                "s.dispatchEvent(new Event('input', {bubbles: true}));", index)
            _wait(driver, "const m = document.getElementById('checkpoint-heatmap');"
                          "return m && m.getAttribute('data-step') === "
                          "String(arguments[0]) && document.querySelectorAll("
                          "'#checkpoints-section td[data-row]').length > 0",
                  f"step {steps[index]}", steps[index])
            _shoot(driver, "#checkpoints-section",
                   os.path.join(out, f"playground_checkpoints_{name}.png"))
    finally:
        server.shutdown()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--preset", default="tatoeba_en_es",
                        help="the preset (name or folder) of the look-inside views")
    parser.add_argument("--run", help="a training run directory that kept checkpoints")
    parser.add_argument("--out", default="docs/images", help="where the PNG files go")
    args = parser.parse_args(argv)
    from keras_attention import Translator

    os.makedirs(args.out, exist_ok=True)
    driver = _driver()
    try:
        name = os.path.basename(os.path.normpath(args.preset))
        preset_views(driver, Translator.from_preset(args.preset), args.out, name)
        if args.run:
            checkpoint_views(driver, args.run, args.out)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
