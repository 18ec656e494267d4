"""The playground's JSON API as one table: each endpoint's method, path,
handler and request schema. The server dispatches through it, and names
from it the methods of a path (OPTIONS' Allow header) and the endpoints its
404 and 405 answers list: a new endpoint is one `Route` in `ROUTES`."""

from typing import Callable, NamedTuple

from keras_attention.playground.analysis import next_tokens
from keras_attention.playground.attribution_view import attributions_answer
from keras_attention.playground.beam_view import beam_tree_answer
from keras_attention.playground.checkpoint_view import checkpoint_attention
from keras_attention.playground.page_info import EXAMPLE


class RequestError(Exception):
    """An HTTP error answer: `status` and a message for `{"error": ...}`."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Route(NamedTuple):
    """One endpoint of the JSON API: `method` and `path`, the `handler`
    `(playground, request) -> answer` (the request: the decoded JSON body of
    a POST, None for a GET), and a POST's request schema: its `fields`, those
    it `requires` (with what they are) and an `example` body."""

    method: str
    path: str
    handler: Callable
    fields: frozenset = frozenset()
    requires: tuple = ()  # (name, what it is) pairs
    example: str = ""


# The API, in one table: dispatch, the Allow header of OPTIONS and the 404 / 405
# answers all read it, so a new endpoint is one entry here.
ROUTES = (
    Route("GET", "/api/info", lambda playground, _: playground.info),
    Route("GET", "/api/checkpoints", lambda playground, _: playground.checkpoints.listing()),
    Route("POST", "/api/translate",
          lambda playground, r: playground.translate(r),
          frozenset({"text", "beam_size", "target", "target_prefix", "top_k", "temperature"}),
          (("text", "the sentence to translate"),),
          f'{{"text": "{EXAMPLE}", "beam_size": 4}}'),
    Route("POST", "/api/alternatives",
          lambda playground, r: playground._run_shared(
              next_tokens, r["text"], r["target_ids"], r.get("top_k"), r.get("temperature")),
          frozenset({"text", "target_ids", "top_k", "temperature"}),
          (("text", "the source sentence"),
           ("target_ids", "the translation (an /api/translate answer's `target_ids`) whose "
            "positions to explain")),
          f'{{"text": "{EXAMPLE}", "target_ids": [5, 9, 3], "temperature": 2}}'),
    Route("POST", "/api/checkpoint_attention",
          # The model lock as every request, but the checkpoint's translator, not the served one.
          lambda playground, r: playground._run(
              lambda _, *args: checkpoint_attention(playground.checkpoints, *args),
              r["text"], r["step"], r.get("target"), playground.info["model"]["name"]),
          frozenset({"text", "step", "target"}),
          (("text", "the source sentence"),
           ("step", "the training step of one of the run's checkpoints (GET /api/checkpoints)")),
          f'{{"text": "{EXAMPLE}", "step": 400, "target": "El libro rojo está sobre la mesa."}}'),
    Route("POST", "/api/attributions",
          lambda playground, r: playground._run(attributions_answer, r["text"], r.get("target")),
          frozenset({"text", "target"}), (("text", "the source sentence"),),
          f'{{"text": "{EXAMPLE}", "target": "El libro rojo está sobre la mesa."}}'),
    Route("POST", "/api/beam_tree",
          lambda playground, r: playground._run_shared(beam_tree_answer, r["text"],
                                                       r.get("beam_size")),
          frozenset({"text", "beam_size"}),
          (("text", "the sentence whose beam search to show"),),
          f'{{"text": "{EXAMPLE}", "beam_size": 4}}'),
)
_ROUTES = {(route.method, route.path): route for route in ROUTES}
_PATHS = {route.path: [r.method for r in ROUTES if r.path == route.path] for route in ROUTES}


def _listed(items, last="and"):
    return ", ".join(items[:-1]) + f" {last} " + items[-1] if len(items) > 1 else items[0]


_POST_LIST = _listed([route.path for route in ROUTES if route.method == "POST"], "or")
_ENDPOINT_LIST = _listed([f"{route.method} {route.path}" for route in ROUTES])


def _allowed(path):
    """The methods `path` answers (`*`: the server's), for Allow headers: an
    API path's (GET adds HEAD), every other path a file's (GET, HEAD)."""
    if path == "*":
        methods = {route.method for route in ROUTES} | {"GET"}
    else:
        methods = set(_PATHS.get(path, ["GET"]))
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join([m for m in ("GET", "HEAD", "POST") if m in methods] + ["OPTIONS"])


def _check_fields(route, request):
    """A 400 unless `request` is a JSON object of `route`'s fields, with the
    ones it requires."""
    if not isinstance(request, dict):
        raise RequestError(400, f"The request body must be a JSON object such as "
                           f"{route.example}; received a {type(request).__name__}.")
    unknown = sorted(set(request) - route.fields)
    if unknown:
        raise RequestError(400, f"Unknown field(s) {unknown}; expected {sorted(route.fields)}.")
    for name, meaning in route.requires:
        if name not in request:
            raise RequestError(400, f'The request has no "{name}": {meaning}.')
