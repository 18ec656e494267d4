import pytest


@pytest.fixture(scope="session")
def playground_translator(tiny_run):
    """The tiny trained run's Translator, loaded as the playground loads it."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    return Translator.from_preset(str(workdir))


@pytest.fixture(scope="session")
def playground_server(playground_translator):
    """A playground server on a free loopback port, serving in a thread."""
    from keras_attention.playground import PlaygroundServer

    server = PlaygroundServer(playground_translator, port=0).start()
    yield server
    server.shutdown()


@pytest.fixture(scope="session")
def playground_url(playground_server):
    """The page's address, e.g. "http://127.0.0.1:41235/"."""
    return playground_server.url


@pytest.fixture(scope="module")
def driver():
    """Headless Chromium (tests/playground/browser.py), one per test module."""
    from tests.playground import browser

    chrome = browser.chromium()
    yield chrome
    chrome.quit()
