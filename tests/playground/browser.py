"""Driving the playground page in headless Chromium (Selenium 4): what every
browser test of tests/playground shares.

Importing this module skips the importing test module where selenium, or
Debian's `chromium` and `chromedriver`, are missing (with the command that
installs them); Selenium Manager never runs (the driver's path is given), so
nothing is downloaded. The `driver` fixture (conftest.py) is `chromium()`.
"""

import os
import shutil
import time

import pytest

pytest.importorskip("selenium", reason="the browser tests need selenium: pip install selenium")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TIMEOUT = 60  # seconds; the machines that run this are slow
SENTENCE = "the red book is on the table ."
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser_paths():
    browser = next((path for path in map(shutil.which, BROWSER_NAMES) if path), None)
    return browser, shutil.which("chromedriver")


if not all(_browser_paths()):
    pytest.skip(
        "no headless browser: chromium and chromedriver must be on PATH; install a browser: "
        "apt-get install chromium chromium-driver (Debian) or chromium-browser "
        "chromium-chromedriver (Ubuntu)",
        allow_module_level=True,
    )


def chromium():
    """Headless Chromium with a 1400x1000 window and the console log kept
    (the caller quits it)."""
    browser, chromedriver = _browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-gpu", "--no-first-run",
                     "--disable-extensions", "--disable-background-networking"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    chrome.set_page_load_timeout(TIMEOUT)
    chrome.set_script_timeout(TIMEOUT)
    return chrome


def wait(driver, condition, message, timeout=TIMEOUT):
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda d: condition(d), message=message)


def count(driver, selector):
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length;", selector)


def scroll_to(driver, element):
    """Scrolls `element` to the middle of the window and waits until the page
    stops scrolling (a model-view click scrolls smoothly to the head view)."""
    positions = []

    def settled(d):
        d.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
        positions.append(d.execute_script("return [window.scrollX, window.scrollY];"))
        return len(positions) >= 3 and positions[-1] == positions[-2] == positions[-3]

    wait(driver, settled, "the page never stopped scrolling")


def set_value(element, text):
    element.clear()
    if text:
        element.send_keys(text)


def submit(driver, text, beam_size=None, target=""):
    """Fills the form and submits it with Enter in the text box."""
    box = driver.find_element(By.ID, "text")
    set_value(driver.find_element(By.ID, "target"), target)
    if beam_size is not None:
        set_value(driver.find_element(By.ID, "beam-size"), str(beam_size))
    set_value(box, text)
    box.send_keys(Keys.ENTER)


def wait_for_response(driver, text, mode):
    """Waits until the page shows the answer to `text` in `mode`, head view drawn."""
    def shown(d):
        return d.execute_script(
            "const t = document.getElementById('translations');"
            "return t.getAttribute('data-source') === arguments[0]"
            " && t.getAttribute('data-mode') === arguments[1]"
            " && document.querySelectorAll('#head-view .token').length > 0;", text, mode)
    wait(driver, shown, f"the page never showed the {mode} response for {text!r}")


def severe_console_errors(driver):
    """SEVERE console entries, less the 4xx answers the test asked for on purpose."""
    try:
        entries = driver.get_log("browser")
    except Exception:  # not every driver keeps the console log
        return []
    return [entry for entry in entries if entry.get("level") == "SEVERE"
            and not ("api/translate" in entry.get("message", "")
                     and "status of 400" in entry.get("message", ""))]


def full_page_screenshot(driver, path):
    height = driver.execute_script("return document.documentElement.scrollHeight;")
    driver.set_window_size(1400, min(max(1000, height + 40), 6000))
    driver.execute_script("window.scrollTo(0, 0);")
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)


def section_screenshot(driver, section, path):
    """Scrolls to `section` and saves its screenshot at `path`, copied into
    $PLAYGROUND_SCREENSHOT_DIR where that is set."""
    scroll_to(driver, section)
    section.screenshot(str(path))
    assert path.stat().st_size > 0
    if os.environ.get("PLAYGROUND_SCREENSHOT_DIR"):
        shutil.copy(path, os.path.join(os.environ["PLAYGROUND_SCREENSHOT_DIR"], path.name))
