"""The playground's local web server: the page, its assets and the JSON API.

Standard library only (`http.server`): `GET /` (the page), `GET /static/<file>`
(its CSS and JavaScript modules, from this package's `static/` folder and
nothing else) and the JSON API of `routes.ROUTES`: `GET /api/info`,
`POST /api/translate` (see `analysis.analyze`), `POST /api/alternatives`
(what else the model could have said at each position of a translation:
`analysis.next_tokens`), `GET /api/checkpoints` and
`POST /api/checkpoint_attention` (a training run's checkpoints and one
checkpoint's attention: `checkpoint_view`), `POST /api/beam_tree` (the beam
search of one sentence as a tree: `beam_view.beam_tree_answer`) and
`POST /api/attributions` (raw attention, attention rollout and input ×
gradient of one pair: `attribution_view.attributions_answer`).
Bad requests get a 4xx answer `{"error": "..."}` that names the problem (also
http.server's own refusals: a bad request line, an unknown method); the
server keeps serving. `HEAD` answers as `GET` without the body; `OPTIONS`
names a path's methods in an Allow header. Requests are handled in threads; the model runs one
request at a time (each already uses every CPU core). A client that stays
silent for `timeout` seconds, or has not sent its whole request within
`deadline` seconds (trickling a byte now and then), is disconnected.
"""

import http.server
import ipaddress
import json
import os
import socket
import sys
import threading
import time

from keras_attention.playground.analysis import (
    DEFAULT_TOP_K,
    MAX_TEXT_LENGTH,
    MAX_TOP_K,
    PAGE_MAX_BEAM_SIZE,
    analyze,
    model_info,
)
from keras_attention.playground.checkpoint_view import CheckpointTranslators
from keras_attention.playground.page_info import (
    EXAMPLE,
    EXAMPLES,
    model_scores,
    source_language,
)
from keras_attention.playground.routes import (
    _ENDPOINT_LIST,
    _POST_LIST,
    _ROUTES,
    RequestError,
    _allowed,
    _check_fields,
)

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_BODY_BYTES = 64 * 1024
# Seconds a connection may stay silent before the server closes it.
CONNECTION_TIMEOUT = 30
# Seconds a client has to send a whole request (request line, headers and
# body), however it trickles them: a byte every few seconds keeps each read
# within CONNECTION_TIMEOUT but not the request within this.
REQUEST_DEADLINE = 60
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                  ".js": "text/javascript; charset=utf-8", ".png": "image/png",
                  ".svg": "image/svg+xml", ".ico": "image/x-icon"}


class PlaygroundServer:
    """Serves the playground page for `translator` on `host`:`port`.

    Args:
        translator: a `keras_attention.Translator`.
        host: the address to bind; loopback by default (the page is for
            this machine; bind "0.0.0.0" only on a trusted network).
        port: the TCP port; 0 picks a free one (see `url`).
        example: the sentence the page starts with (default: the first of
            `examples`).
        examples: sentences the page offers to try (default: `EXAMPLES` of
            the model's source language, `source_language`).
        log: a function given one line per API request (None: quiet).
        timeout: seconds a connection may stay silent (headers or body
            half sent, an idle keep-alive) before the server closes it: a
            slow or stalled client never holds a thread for long.
        deadline: seconds a client has to send one whole request, however
            slowly it trickles it (a 408 when its body is late; the
            connection is closed).
        name: what the page calls the model (e.g. the run's folder name).
        checkpoints: the training run's checkpoints the page's "attention
            during training" slider offers: None (none), a run directory,
            or `keras_attention.translation.run_checkpoints(run_dir)`.

    Example:

    >>> server = PlaygroundServer(Translator.from_preset("runs/translation"))
    >>> server.start()              # in a background thread
    >>> server.url
    'http://127.0.0.1:41235/'
    >>> server.shutdown()
    """

    def __init__(self, translator, host="127.0.0.1", port=8000, example=None, log=None,
                 timeout=CONNECTION_TIMEOUT, deadline=REQUEST_DEADLINE, name=None,
                 examples=None, checkpoints=None):
        self.translator = translator
        self.checkpoints = CheckpointTranslators(translator, checkpoints)
        if examples is None:
            examples = EXAMPLES.get(source_language(translator), EXAMPLES["en"])
        examples = [str(e) for e in examples]
        self.info = {"model": model_info(translator.model, name, translator.engine.compute_dtype),
                     "beam_size": translator.beam_size,
                     "max_beam_size": PAGE_MAX_BEAM_SIZE, "max_text_length": MAX_TEXT_LENGTH,
                     "top_k": DEFAULT_TOP_K,
                     "max_top_k": min(MAX_TOP_K,
                                      translator.target_tokenizer.vocabulary_size - 1),
                     "example": example or (examples[0] if examples else EXAMPLE),
                     "examples": examples, "scores": model_scores(translator)}
        self.info["checkpoints"] = len(self.checkpoints)  # the training slider's steps
        self.log = log
        self._model_lock = threading.Lock()
        # The files the server may send: a fixed list, so no request path
        # can name another file.
        self._assets = {name: os.path.join(STATIC_DIR, name) for name in os.listdir(STATIC_DIR)
                        if os.path.isfile(os.path.join(STATIC_DIR, name))}
        for argument, value in (("timeout", timeout), ("deadline", deadline)):
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and 0 < value < float("inf")):
                raise ValueError(f"`{argument}` must be a positive number of seconds; "
                                 f"received {value!r}.")
        self.timeout = timeout
        self.deadline = deadline
        self._httpd = _HTTPServer((host, port), _handler(self))
        self._thread = None

    @property
    def url(self):
        """The page's address on this machine."""
        host, port = self._httpd.server_address[:2]
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/"

    @property
    def exposed(self):
        """Whether other machines can reach the page (not bound to loopback)."""
        host = self._httpd.server_address[0]
        try:
            return not ipaddress.ip_address(host).is_loopback
        except ValueError:  # a name, e.g. "localhost"
            return host != "localhost"

    @property
    def urls(self):
        """The page's addresses: `url`, then, when bound to every interface,
        this machine's other IPv4 addresses (as other machines reach it)."""
        host, port = self._httpd.server_address[:2]
        urls = [self.url]
        if host in ("0.0.0.0", ""):
            for address in _local_addresses():
                if f"http://{address}:{port}/" not in urls:
                    urls.append(f"http://{address}:{port}/")
        return urls

    def banner(self):
        """The lines the command prints once serving: where to open the page,
        and a warning when the network can reach it."""
        where = " on this machine" if self.exposed else ""
        lines = [f"Open {self.url} in a browser{where} (Ctrl+C stops)."]
        if self.exposed:
            others = self.urls[1:] or [self.url]
            lines += [f"From other machines: {', '.join(others)}",
                      f"WARNING: listening on {self._httpd.server_address[0]}, so the page is "
                      "reachable from the network: anyone who can reach this machine can run "
                      "the model (and keep its CPUs busy). Use --host 127.0.0.1 (the default) "
                      "for this machine only."]
        return lines

    def warm_up(self):
        """Builds the graphs a visitor's translation runs (the n-best search
        and the teacher-forced pass; a few seconds) by translating the
        example and waiting for the engine's background builds, so that the
        first typed sentence, of any length, runs compiled work
        (`translation.engine`)."""
        analyze(self.translator, self.info["example"])  # queues (or builds) what it runs
        self.translator.engine.wait()  # the n-best search's and teacher-forced graphs, the XLA

    def serve_forever(self):
        """Serves until `shutdown()` (or Ctrl+C in the caller)."""
        self._httpd.serve_forever()

    def start(self):
        """Serves in a background thread; returns `self`."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="playground-server")
        self._thread.start()
        return self

    def shutdown(self):
        """Stops serving and closes the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.shutdown()

    # -- what the handler calls ----------------------------------------------

    def asset(self, path):
        """`(bytes, content type)` of `/` or `/static/<name>`."""
        if path in ("/", "/index.html"):
            name = "index.html"
        elif path.startswith("/static/"):
            name = path[len("/static/"):]
        else:
            raise RequestError(404, f"No page at {path!r}: the playground is at /.")
        if name not in self._assets:
            raise RequestError(404, f"No file {path!r}.")
        with open(self._assets[name], "rb") as f:
            body = f.read()
        return body, _CONTENT_TYPES.get(os.path.splitext(name)[1], "application/octet-stream")

    def translate(self, request):
        """The `/api/translate` answer for a decoded JSON request (its fields checked)."""
        answer = self._run_shared(analyze, request["text"], request.get("beam_size"),
                                  request.get("target"), request.get("target_prefix"),
                                  request.get("top_k"), request.get("temperature"))
        answer["model"] = self.info["model"]  # with its name
        return answer

    def answer(self, path, request=None, method="POST"):
        """The answer of the endpoint `method` `path` (a route of `ROUTES`) to
        `request` (a POST's decoded JSON body), its fields checked first."""
        route = _ROUTES[method, path]
        if method == "POST":
            _check_fields(route, request)
        return route.handler(self, request)

    def _run(self, function, *args):
        """`function(translator, *args)` with the model to itself (what
        changes weights: a checkpoint's, attributions' float32 twin); bad
        input is a 400."""
        with self._model_lock:
            return self._run_shared(function, *args)

    def _run_shared(self, function, *args):
        """`function(translator, *args)` beside other requests: the engine is
        shared by threads and batches their searches together
        (`Engine.translate`); bad input is a 400."""
        try:
            return function(self.translator, *args)
        except (TypeError, ValueError) as e:
            raise RequestError(400, str(e)) from None


def _local_addresses():
    """This machine's IPv4 addresses other than loopback, best effort (from
    its host name, and the interface a route to the outside would take; no
    packet is sent)."""
    addresses = []
    try:
        addresses += socket.gethostbyname_ex(socket.gethostname())[2]
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: connect() on UDP sends nothing
            addresses.append(probe.getsockname()[0])
    except OSError:
        pass
    return [a for i, a in enumerate(addresses)
            if a not in addresses[:i] and not ipaddress.ip_address(a).is_loopback]


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a burst of 20 requests (a class
    # opening the page at once) had connections reset.
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # A browser closing a connection early is not worth a traceback.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _handler(playground):
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "keras_attention-playground"
        protocol_version = "HTTP/1.1"
        timeout = playground.timeout  # on every connection's socket

        def handle_one_request(self):
            # The deadline: a timer that shuts the socket's reading side, so a
            # read blocked on a trickling client returns (end of data) at once.
            self._late = False
            self._timer = threading.Timer(playground.deadline, self._expire)
            self._timer.daemon = True
            self._timer.start()
            try:
                super().handle_one_request()
            except TimeoutError:  # stalled mid-body (the request line is http.server's)
                self.close_connection = True
            finally:
                self._request_read()
            if self._late:
                self.close_connection = True

        def _expire(self):
            self._late = True
            try:
                self.connection.shutdown(socket.SHUT_RD)
            except OSError:  # already closed
                pass

        def _request_read(self):
            """The request is in: its deadline no longer runs."""
            self._timer.cancel()

        def parse_request(self):
            # The request line or headers came too late: close, no answer.
            ok = not self._late and super().parse_request()
            if self._late:
                self.close_connection = True
                return False
            return ok

        def do_GET(self):  # noqa: N802 (http.server's name)
            self._request_read()
            path = self.path.split("?", 1)[0]
            try:
                if ("GET", path) in _ROUTES:
                    self._send_json(200, playground.answer(path, method="GET"))
                elif ("POST", path) in _ROUTES:
                    raise RequestError(405, f"GET is not supported by {path}: POST a JSON body "
                                       'such as {"text": "..."}.')
                elif path.startswith("/api/"):
                    raise RequestError(404, f"No API endpoint {path!r}; there are "
                                       f"{_ENDPOINT_LIST}.")
                else:
                    body, content_type = playground.asset(path)
                    self._send(200, body, content_type)
            except RequestError as e:
                self._send_json(e.status, {"error": str(e)})

        def do_POST(self):  # noqa: N802
            start = time.perf_counter()
            path = self.path.split("?", 1)[0]
            try:
                if ("POST", path) not in _ROUTES:
                    self._discard_body()  # keep the connection's next request readable
                    raise RequestError(404 if path.startswith("/api/") else 405,
                                       f"POST goes to {_POST_LIST}, not {path!r}.")
                request = self._read_json()
                self._request_read()
                answer = playground.answer(path, request)
                self._send_json(200, answer)
                status = 200
            except RequestError as e:
                self._send_json(e.status, {"error": str(e)})
                status = e.status
            except Exception as e:  # a bug: say so, and keep serving
                self._send_json(500, {"error": f"Internal error: {type(e).__name__}: {e}"})
                status = 500
            if playground.log is not None:
                playground.log(f"POST {path} {status} "
                               f"{(time.perf_counter() - start) * 1000:.0f} ms")

        def do_HEAD(self):  # noqa: N802
            self.do_GET()  # `_send` leaves the body out

        def do_OPTIONS(self):  # noqa: N802
            """The methods a path takes (`OPTIONS *`: the server's), in Allow."""
            path = self.path.split("?", 1)[0]
            try:
                self._discard_body()
                self._send(200, b"", "application/json; charset=utf-8", allow=_allowed(path))
            except RequestError as e:
                self._send_json(e.status, {"error": str(e)})

        def do_PUT(self):  # noqa: N802
            try:
                self._discard_body()
                raise RequestError(405, f"{self.command} is not supported: GET the page, or "
                                   f"{_ENDPOINT_LIST}.")
            except RequestError as e:
                self._send_json(e.status, {"error": str(e)})

        do_DELETE = do_PATCH = do_PUT  # noqa: N815

        def send_error(self, code, message=None, explain=None):
            """http.server's own refusals (a malformed request line or header,
            a method it has no `do_` method for) in JSON, as every other error,
            not its HTML page; the connection closes, as it does there."""
            self.close_connection = True
            if self.request_version == "HTTP/0.9":  # the request line was refused: answer 1.0
                self.request_version = "HTTP/1.0"
            error = message or self.responses.get(code, ("Error",))[0]
            if code == 501:
                error += f"; this server answers {_allowed('*')}"
            self._send_json(code, {"error": f"{error}."})

        def _content_length(self):
            """The body's length in bytes: None without a Content-Length; a 400
            unless it is a number in ASCII digits (the body's end is unknown)."""
            length = self.headers.get("Content-Length")
            if length is not None and not (length.isascii() and length.isdigit()):
                self.close_connection = True
                raise RequestError(400, "Content-Length must be a number of bytes (ASCII "
                                   f"digits); received {length!r}.")
            return None if length is None else int(length)

        def _discard_body(self):
            length = self._content_length()
            if length is not None and length <= MAX_BODY_BYTES:
                self.rfile.read(length)
            elif length is not None:
                self.close_connection = True

        def _read_json(self):
            content_type = self.headers.get("Content-Type", "")
            if content_type.split(";")[0].strip().lower() != "application/json":
                self._discard_body()
                raise RequestError(415, "The request body must be JSON, sent with "
                                   "Content-Type: application/json; received Content-Type "
                                   f"{content_type or '(none)'!r}.")
            length = self._content_length()
            if length is None:
                self.close_connection = True
                raise RequestError(411, "The request needs a Content-Length header.")
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # its body is not read
                raise RequestError(413, f"The request body has {length} bytes; at most "
                                   f"{MAX_BODY_BYTES} are accepted.")
            try:
                body = self.rfile.read(length)
            except TimeoutError:
                self.close_connection = True
                raise RequestError(408, f"The request body did not arrive within "
                                   f"{playground.timeout:g} s.") from None
            if len(body) < length and self._late:
                self.close_connection = True
                raise RequestError(408, f"The request did not arrive within "
                                   f"{playground.deadline:g} s.")
            if len(body) < length:  # the client closed its side early
                self.close_connection = True
                raise RequestError(400, f"The request body ended after {len(body)} of the "
                                   f"{length} bytes its Content-Length announced.")
            try:
                return json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise RequestError(400, f"The request body is not valid JSON: {e}.") from None
            except RecursionError:  # e.g. [[[[...]]]] 30,000 deep
                raise RequestError(400, "The request body's JSON is nested too deeply; a "
                                   "request is an object of strings, numbers and lists of "
                                   "numbers.") from None

        def _send_json(self, status, value):
            self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"),
                       "application/json; charset=utf-8")

        def _send(self, status, body, content_type, allow=None):
            self.send_response(status)
            if allow is not None:
                self.send_header("Allow", allow)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":  # HEAD: GET's headers, Content-Length included
                self.wfile.write(body)

        def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
            pass  # one line per API request goes to `playground.log` instead

    return Handler
