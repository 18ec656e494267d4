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
    MAX_BEAM_SIZE,
    MAX_TEXT_LENGTH,
    analyze,
    model_info,
    unpack,
)
from keras_attention.playground.html import attention_html
from keras_attention.playground.server import PlaygroundServer

__all__ = ["MAX_BEAM_SIZE", "MAX_TEXT_LENGTH", "PlaygroundServer", "analyze", "attention_html",
           "model_info", "unpack"]
