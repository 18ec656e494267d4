"""The attention playground: a local web page to type a sentence into your
own trained translator and see its translation and every head's attention
(`python recipes/translation/playground.py --workdir runs/translation`).

- `analyze(translator, text, beam_size=None, target=None, target_prefix=None,
  top_k=None, temperature=None)`: everything the page shows for one
  sentence, as a JSON-ready dict (the API's answer; `unpack` turns its
  packed vectors into NumPy arrays); the views in their own
  files have their own answers (`beam_view`, `attribution_view`,
  `checkpoint_view`), each from one `Translator` method;
- `attention_html(translator, text, ...)`: the same views as one
  self-contained HTML page (works offline; `IPython.display.HTML` in a
  notebook);
- `PlaygroundServer(translator, host, port, checkpoints=None)`: the local
  web server (with a run's checkpoints, the attention-during-training view).
"""

from keras_attention.playground.analysis import (
    MAX_TEXT_LENGTH,
    PAGE_MAX_BEAM_SIZE,
    analyze,
    model_info,
    unpack,
)
from keras_attention.playground.html import attention_html
from keras_attention.playground.server import PlaygroundServer

__all__ = ["MAX_TEXT_LENGTH", "PAGE_MAX_BEAM_SIZE", "PlaygroundServer", "analyze", "attention_html",
           "model_info", "unpack"]


def __getattr__(name):
    """`MAX_BEAM_SIZE`, the page's beam limit's name until it was told apart
    from decoding's: still importable for one release, with a warning."""
    if name == "MAX_BEAM_SIZE":
        import warnings

        warnings.warn("keras_attention.playground.MAX_BEAM_SIZE is now PAGE_MAX_BEAM_SIZE (the "
                      "page's limit, 16); decoding's is keras_attention.decoding's "
                      "DecodingSettings limit (1,024).", DeprecationWarning, stacklevel=2)
        return PAGE_MAX_BEAM_SIZE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
