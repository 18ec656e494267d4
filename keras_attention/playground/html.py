"""The playground's views for one sentence as one self-contained HTML page:
the page, its CSS and JavaScript inlined and `analyze`'s answer embedded,
so it opens offline, from a file or in a notebook."""

import json
import os

from keras_attention.playground.analysis import analyze
from keras_attention.playground.bundle import bundle
from keras_attention.playground.server import STATIC_DIR

_STYLESHEET = '<link rel="stylesheet" href="static/playground.css">'
# The page's entry module: it imports every view's module (static/*.js), inlined
# here as one classic script (`bundle`).
_SCRIPT = '<script type="module" src="static/playground.js"></script>'


def _read(name):
    with open(os.path.join(STATIC_DIR, name), encoding="utf-8") as f:
        return f.read()


def _script_safe(text):
    """Text that cannot close the <script> or <style> element holding it."""
    return text.replace("</", "<\\/")


def attention_html(translator, text, target=None, beam_size=None):
    """One self-contained HTML page of the playground's views for `text`
    (translated by `translator`, or teacher-forced on `target`): head view,
    model view, how each weight was computed, the softmax sandbox.

    Returns the HTML as a str: write it to a file, or show it in a notebook
    with `IPython.display.HTML(attention_html(translator, "..."))`.
    """
    data = analyze(translator, text, beam_size=beam_size, target=target)
    page = _read("index.html")
    for tag in (_STYLESHEET, _SCRIPT):
        if tag not in page:
            raise RuntimeError(f"static/index.html no longer holds {tag!r}: update "
                               "keras_attention/playground/html.py to inline its assets.")
    # "<" as \u003c (the same JSON string): the data can neither close its
    # element nor open a comment or a script in it.
    embedded = ('<script type="application/json" id="playground-data">'
                + json.dumps(data, ensure_ascii=False).replace("<", "\\u003c") + "</script>\n")
    page = page.replace(_STYLESHEET, "<style>\n" + _read("playground.css").replace(
        "</style", "<\\/style") + "\n</style>")
    # The data first: the script reads it when it runs.
    script = _script_safe(bundle(STATIC_DIR, "playground.js"))
    return page.replace(_SCRIPT, embedded + "<script>\n" + script + "</script>")
