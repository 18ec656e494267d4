"""The playground server's HTTP, below the API (issue 67, item 8): bodies
nested too deeply, Content-Length headers that are not a number, HEAD and
OPTIONS, and http.server's own refusals, all answered in JSON. An untrained
tiny translator serves: no request here reaches the model."""

import json
import socket
import urllib.parse

import pytest

from keras_attention.playground import PlaygroundServer
from tests.helpers import untrained_translator

pytestmark = pytest.mark.backend_independent


@pytest.fixture(scope="module")
def url():
    server = PlaygroundServer(untrained_translator(), port=0, timeout=5, deadline=10).start()
    yield server.url
    server.shutdown()


def exchange(url, head, body=b""):
    """`(status, headers, body)` of one raw request (`head`: its request line
    and headers, without the blank line; str, or bytes as sent), read until
    the server closes the connection; `headers` lower-cased."""
    parts = urllib.parse.urlsplit(url)
    head = head.encode("latin-1") if isinstance(head, str) else head
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head + b"\r\nHost: x\r\nConnection: close\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    header_block, _, content = data.partition(b"\r\n\r\n")
    lines = header_block.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, content


def _json_error(status, headers, body):
    assert headers["content-type"] == "application/json; charset=utf-8", (status, body[:200])
    assert int(headers["content-length"]) == len(body)
    return json.loads(body)["error"]


@pytest.mark.parametrize("text", [
    "[" * 30_000 + "]" * 30_000,
    '{"text": ' + "[" * 30_000 + "]" * 30_000 + "}",
    '{"a":' * 10_000 + "1" + "}" * 10_000,
    '{"text": "Hi.", "target_prefix": ' + "[" * 5_000 + "]" * 5_000 + "}",
])
def test_json_nested_too_deeply_is_a_400(url, text):
    body = text.encode()
    status, headers, content = exchange(
        url, f"POST /api/translate HTTP/1.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}", body)
    assert status == 400
    assert "nested too deeply" in _json_error(status, headers, content)


# As a client sends them: UTF-8 (Arabic-Indic digits), Latin-1 (superscript
# two, which str.isdigit() takes and int() refuses), or ASCII that is no
# plain number. http.server reads header bytes as Latin-1.
@pytest.mark.parametrize("length", ["\u0661\u0666".encode(), "\u00b2".encode("latin-1"),
                                    b"1\xb2", "\uff11\uff16".encode(), b"-5", b"+5", b"5.0",
                                    b"0x10", b"1_6", b"16 16"])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_a_content_length_that_is_not_ascii_digits_is_a_400(url, method, length):
    body = b'{"text": "Hi."} '
    path = "*" if method == "OPTIONS" else "/api/translate"
    status, headers, content = exchange(
        url, f"{method} {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
        "Content-Length: ".encode() + length, body)
    assert status == 400
    assert _json_error(status, headers, content) == ("Content-Length must be a number of bytes "
                                                     f"(ASCII digits); received "
                                                     f"{length.decode('latin-1')!r}.")
    assert headers["connection"] == "close"


def test_no_content_length_is_a_411(url):
    status, headers, content = exchange(
        url, "POST /api/translate HTTP/1.1\r\nContent-Type: application/json")
    assert status == 411 and "needs a Content-Length" in _json_error(status, headers, content)


@pytest.mark.parametrize("path", ["/", "/api/info", "/static/playground.css", "/nothing",
                                  "/api/translate"])
def test_head_is_get_without_its_body(url, path):
    get = exchange(url, f"GET {path} HTTP/1.1")
    status, headers, content = exchange(url, f"HEAD {path} HTTP/1.1")
    assert status == get[0] and content == b""
    assert headers["content-type"] == get[1]["content-type"]
    assert int(headers["content-length"]) == len(get[2]) > 0


@pytest.mark.parametrize("path, allow", [
    ("*", "GET, HEAD, POST, OPTIONS"),
    ("/", "GET, HEAD, OPTIONS"),
    ("/api/info", "GET, HEAD, OPTIONS"),
    ("/api/translate", "POST, OPTIONS"),
    ("/api/attributions", "POST, OPTIONS"),
])
def test_options_names_the_allowed_methods(url, path, allow):
    status, headers, content = exchange(url, f"OPTIONS {path} HTTP/1.1")
    assert (status, headers["allow"], headers["content-length"], content) == (
        200, allow, "0", b"")


@pytest.mark.parametrize("head, status, message", [
    ("TRACE / HTTP/1.1", 501, "Unsupported method ('TRACE'); this server answers GET, HEAD, "
     "POST, OPTIONS."),
    ("CONNECT x:443 HTTP/1.1", 501, "Unsupported method ('CONNECT')"),
    ("BREW /pot HTTP/1.1", 501, "Unsupported method ('BREW')"),
    ("GET / HTTP/9.1", 505, "Invalid HTTP version"),
    ("GET / HTTP/1.x", 400, "Bad request version"),
    ("GET " + "a" * 70_000 + " HTTP/1.1", 414, "Request-URI Too Long"),
])
def test_http_servers_own_refusals_are_json(url, head, status, message):
    got, headers, content = exchange(url, head)
    assert got == status
    assert message in _json_error(got, headers, content)
    assert b"<html" not in content.lower() and b"<!doctype" not in content.lower()


def test_it_keeps_serving(url):
    """After every refusal above, on a new connection."""
    status, headers, content = exchange(url, "GET /api/info HTTP/1.1")
    assert status == 200 and json.loads(content)["model"]
