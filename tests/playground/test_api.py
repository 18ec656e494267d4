"""The playground's JSON API and server, against an in-process server on a
free port: the answers are the model's own numbers, bad requests get a
clear 4xx and the server keeps serving, only its own files are served, and
concurrent requests get their own answers."""

import concurrent.futures
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

import numpy as np
import pytest
import tensorflow as tf

from keras_attention import Translator
from keras_attention.data.tokenizers import tokenize_with_end
from keras_attention.playground import (
    MAX_TEXT_LENGTH,
    PAGE_MAX_BEAM_SIZE,
    PlaygroundServer,
    analyze,
    attention_html,
    unpack,
)
from keras_attention.playground.server import (
    _ENDPOINT_LIST,
    EXAMPLES,
    STATIC_DIR,
    model_scores,
    source_language,
)
from tests.helpers import ROOT, SENTENCES, run_main, shipped_translator

PLAYGROUND = os.path.join(ROOT, "recipes", "translation", "playground.py")


def request(url, method, path, body=None, headers=None):
    """`(status, headers, body bytes)` of one raw HTTP request (the path sent as given)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        headers = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def translate(url, **fields):
    status, headers, body = request(url, "POST", "/api/translate", fields)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    return status, json.loads(body)


def alternatives(url, **fields):
    status, headers, body = request(url, "POST", "/api/alternatives", fields)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    return status, json.loads(body)


def test_info(playground_url, playground_translator):
    status, _, body = request(playground_url, "GET", "/api/info")
    info = json.loads(body)
    model = playground_translator.model
    assert status == 200 and info["beam_size"] == playground_translator.beam_size
    assert info["max_beam_size"] == PAGE_MAX_BEAM_SIZE
    assert info["max_text_length"] == MAX_TEXT_LENGTH
    assert info["model"]["num_heads"] == model.num_heads
    assert info["model"]["num_encoder_layers"] == model.num_encoder_layers
    assert info["model"]["key_dim"] == model.d_model // model.num_heads
    # A name a person gave it (not Keras' `transformer_1`), and its size.
    assert info["model"]["name"] == "Transformer"
    assert info["model"]["parameters"] == model.count_params()
    # Sentences to try in the model's source language (English for this run),
    # the articles' among them; the page starts with the first.
    assert info["examples"] == EXAMPLES["en"] and info["example"] == EXAMPLES["en"][0]
    assert "I left the red book at the library." in info["examples"]
    # Its quality, from its metadata: the run's score on its evaluation split.
    metadata = playground_translator.metadata
    assert info["scores"] == {"test": {"bleu": metadata["bleu"], "chrf": metadata["chrf"],
                                       "test_set": f"the run's {metadata['eval_split']} split"}}


def test_a_shipped_presets_scores_come_with_the_published_figure():
    """On a shipped preset the page states its test score and its score on
    the public test set beside the published model's, from its metadata."""
    translator = shipped_translator()
    zoo = translator.metadata["zoo"]
    scores = model_scores(translator)
    assert scores["test"] == {key: zoo["test"][key] for key in ("bleu", "chrf", "test_set")}
    public = scores["public_test"]
    assert public["bleu"] == zoo["public_test"]["bleu"]
    assert public["published"] == {"model": "Helsinki-NLP opus-mt-tc-big-en-es",
                                   "bleu": 57.2, "chrf": 73.9}
    assert model_scores(Translator.from_keras_hub_task(translator.task, metadata={})) == {}


def test_examples_follow_the_models_source_language(playground_translator):
    spanish = Translator.from_keras_hub_task(playground_translator.task,
                                             metadata={"zoo": {"languages": ["es", "en"]}})
    assert source_language(spanish) == "es"
    server = PlaygroundServer(spanish, port=0)
    try:
        assert server.info["examples"] == EXAMPLES["es"]
        assert server.info["example"] == "El libro rojo está sobre la mesa."
    finally:
        server.shutdown()


def _softmax_rows(dot_products, scale, mask):
    logits = np.where(mask, np.asarray(dot_products) * scale, -np.inf)
    peak = np.max(logits, axis=-1, keepdims=True)
    e = np.exp(logits - peak)
    return e / e.sum(-1, keepdims=True)


def test_translate_answer_is_the_models_own(playground_url, playground_translator):
    """The n-best list is `Translator.translate`'s; the tokens are the
    source's and the best translation's, and the attention weights the
    model's own on them; every weight is softmax(q·k · scale + mask) of the
    numbers sent, and every head output their weighted sum of values."""
    text = SENTENCES[0]
    status, answer = translate(playground_url, text=text, beam_size=2)
    assert status == 200 and answer["mode"] == "translate" and answer["source"] == text
    expected, scores = playground_translator.translate(
        [text], beam_size=2, num_return_sequences=2, return_scores=True)
    assert [t["text"] for t in answer["translations"]] == expected[0]
    np.testing.assert_allclose([t["score"] for t in answer["translations"]], scores[0],
                               rtol=1e-4)
    # The model's own maps, teacher-forced on the tokens sent (not
    # `attention_maps`' own search: unpadded, its shapes round differently
    # from the translator's and may pick another near tie of this tiny model).
    tokenizers = playground_translator.source_tokenizer, playground_translator.target_tokenizer
    source_ids, input_ids = ([tokenizer.token_to_id(token) for token in answer[key]]
                             for tokenizer, key in zip(tokenizers, ("source_tokens",
                                                                    "target_input_tokens")))
    assert source_ids == tokenize_with_end(tokenizers[0], tf.constant([text]),
                                           playground_translator.model.max_length).to_list()[0]
    assert answer["target_tokens"] == answer["target_input_tokens"][1:] + ["[END]"]
    if len(input_ids) < playground_translator.model.max_length:  # not cut at the limit
        best = tokenizers[1].detokenize(tf.constant([input_ids[1:]])).numpy()[0]
        assert best.decode("utf-8") == expected[0][0]
    scores = playground_translator.model.attention_scores(np.asarray([source_ids]),
                                                          np.asarray([input_ids]))
    maps = {kind: np.stack([np.asarray(m)[0] for m in layers]) for kind, layers in scores.items()}
    model = answer["model"]
    s, t = len(answer["source_tokens"]), len(answer["target_tokens"])
    assert len(answer["token_probabilities"]) == t
    assert all(0 < p <= 1 for p in answer["token_probabilities"])
    assert answer["scale"] == pytest.approx(1 / np.sqrt(model["key_dim"]), rel=1e-4)
    for kind, layers, q, k in (("encoder_self", model["num_encoder_layers"], s, s),
                               ("decoder_self", model["num_decoder_layers"], t, t),
                               ("cross", model["num_decoder_layers"], t, s)):
        a = answer["attention"][kind]
        weights = np.asarray(a["weights"])
        np.testing.assert_allclose(weights, maps[kind], atol=2e-5)
        assert weights.shape == (layers, model["num_heads"], q, k)
        vectors = {name: unpack(a[name]) for name in ("queries", "keys", "values", "outputs")}
        assert vectors["queries"].shape == (layers, model["num_heads"], q, model["key_dim"])
        assert vectors["values"].shape == (layers, model["num_heads"], k, model["value_dim"])
        mask = np.asarray(a["mask"])
        assert mask.shape == (q, k)
        if kind == "decoder_self":
            np.testing.assert_array_equal(mask, np.tril(np.ones((t, t), bool)))
        else:
            assert mask.all()
        # The numbers sent recombine into the weights and outputs (weights and
        # q·k to 5 digits, the vectors whole float32s).
        np.testing.assert_allclose(_softmax_rows(a["dot_products"], answer["scale"], mask),
                                   weights, atol=2e-3)
        # Products of numbers rounded to 5 significant digits (relative error
        # <= 5e-5 each) are off by at most 1e-4 of |a|·|b| summed over the
        # products, however much the sum itself cancels; the result's own
        # rounding adds 5e-5 of it (a tolerance relative to the result alone
        # failed on a near-cancelling q·k of a rerun of the tiny model).
        assert_recombines(vectors["queries"], np.swapaxes(vectors["keys"], -1, -2),
                          a["dot_products"])
        assert_recombines(weights, vectors["values"], vectors["outputs"])
    assert answer["attention"]["cross"]["query_tokens"] == answer["target_input_tokens"]
    assert answer["attention"]["cross"]["key_tokens"] == answer["source_tokens"]


def assert_recombines(a, b, product, digits=5):
    """`a @ b == product` up to the rounding of all three to `digits`
    significant digits (first-order bound, 10 % margin)."""
    unit = 0.5 * 10.0 ** (1 - digits)  # the relative rounding error of one number
    product = np.asarray(product)
    bound = 1.1 * (2 * unit * (np.abs(a) @ np.abs(b)) + unit * np.abs(product)) + 1e-7
    error = np.abs(a @ b - product)
    assert np.all(error <= bound), (error.max(), np.unravel_index((error - bound).argmax(),
                                                                  error.shape))


def test_translations_follow_the_translators_early_stopping(playground_translator, monkeypatch):
    """The playground decodes with the translator's settings, the stopping
    rule included: its search is compiled with the translator's
    `early_stopping`, and its n-best list is `Translator.translate([text])`'s
    (the same padded shapes, so the same numbers: this tiny model has near
    ties that other shapes may swap; and its n-best lists are often the same
    under every rule, so the rule is read off the search it compiles)."""
    from keras_attention.translation.engine import Engine

    compiled, rules = Engine.search_work, []

    def watched(self, settings, *args, **kwargs):
        rules.append(settings.early_stopping)
        return compiled(self, settings, *args, **kwargs)

    monkeypatch.setattr(Engine, "search_work", watched)
    for early_stopping in ("never", True, False):
        translator = playground_translator.with_settings(early_stopping=early_stopping)
        for text in SENTENCES[:2]:
            (expected,), (expected_scores,) = translator.translate(
                [text], beam_size=4, num_return_sequences=4, return_scores=True)
            rules.clear()
            answer = analyze(translator, text, beam_size=4)
            assert [(type(rule), rule) for rule in rules] == [(type(early_stopping),
                                                               early_stopping)]
            assert [t["text"] for t in answer["translations"]] == expected
            np.testing.assert_allclose([t["score"] for t in answer["translations"]],
                                       expected_scores, rtol=1e-4)


def test_forced_target_scores_the_given_translation(playground_url, playground_translator):
    """"My own translation": the given target's tokens, each one's
    probability from the model, and its score from them as the search
    scores: log P(Y|X) / ((5 + |Y|) / 6)^alpha."""
    text, target = SENTENCES[1], "Una frase  distinta."
    status, forced = translate(playground_url, text=text, target=target)
    assert status == 200 and forced["mode"] == "forced"
    assert [t["text"] for t in forced["translations"]] == [target]
    expected_ids = playground_translator.target_tokenizer.tokenize([target]).to_list()[0]
    assert len(forced["target_tokens"]) == len(expected_ids) + 1  # and [END]
    assert forced["target_tokens"][-1] == "[END]"
    assert forced["target_input_tokens"] == ["[START]"] + forced["target_tokens"][:-1]
    probabilities = np.asarray(forced["token_probabilities"])
    lp = ((5 + len(probabilities)) / 6) ** playground_translator.length_penalty
    assert forced["translations"][0]["score"] == pytest.approx(
        np.log(probabilities).sum() / lp, abs=1e-3)
    _, blank = translate(playground_url, text=text, target="   ")  # blank: translate
    assert blank["mode"] == "translate"


def assert_same_alternatives(got, expected):
    """The API's alternatives at one position are `Translator.alternatives`'
    (`expected`), most likely first, to float32's precision: the two come
    from teacher-forced passes of different lengths, so only tokens whose
    probabilities tie to that precision may swap places."""
    assert len(got) == len(expected)
    probabilities = [a.probability for a in expected]
    np.testing.assert_allclose([a["probability"] for a in got], probabilities,
                               rtol=1e-5, atol=1e-7)
    for i, (mine, theirs) in enumerate(zip(got, expected)):
        if mine["id"] != theirs.id:  # a tie: the neighbour holds the same probability
            neighbours = [j for j in (i - 1, i + 1) if 0 <= j < len(expected)]
            assert any(abs(probabilities[j] - theirs.probability) <= 1e-6 * theirs.probability
                       for j in neighbours), (got, expected)
            continue
        assert mine["token"] == theirs.token
        assert mine["log_prob"] == pytest.approx(theirs.log_prob, abs=1e-5)


def test_steps_are_the_translators_alternatives(playground_url, playground_translator):
    """"Why this word, what else?": at every target position the answer's
    `steps` hold the token there, its rank and probability, and the top k
    next tokens: what `Translator.alternatives(text, target_ids[:t], k)`
    says (greedy's token first), from one pass; the chosen token's
    probability is `token_probabilities`'. Greedy search takes rank 1 at
    every position (but the `[END]` that closes a translation cut at the
    length limit)."""
    text = SENTENCES[1]
    status, answer = translate(playground_url, text=text, beam_size=2, top_k=4)
    assert status == 200, answer
    ids, steps = answer["target_ids"], answer["steps"]
    assert answer["top_k"] == 4 and answer["temperature"] == 1.0 and answer["target_prefix"] == []
    assert len(steps) == len(ids) == len(answer["target_tokens"]) and ids[-1] == 3  # [END]
    assert [s["token"] for s in steps] == answer["target_tokens"]
    assert [s["id"] for s in steps] == ids
    np.testing.assert_allclose([s["probability"] for s in steps],
                               answer["token_probabilities"], rtol=1e-4)
    for t in sorted({0, len(ids) // 2, len(ids) - 1}):
        expected = playground_translator.alternatives(text, prefix=ids[:t], k=4)
        assert_same_alternatives(steps[t]["alternatives"], expected)
    for step in steps:
        top = step["alternatives"]
        assert len(top) == 4 and all(a["probability"] >= b["probability"]
                                     for a, b in zip(top, top[1:]))
        assert (step["rank"] == 1) == (step["id"] == top[0]["id"])
        assert step["id"] not in [a["id"] for a in top[step["rank"]:]]
        if step["rank"] <= 4:
            assert top[step["rank"] - 1]["id"] == step["id"]
    status, greedy = translate(playground_url, text=text, beam_size=1)
    assert status == 200 and greedy["top_k"] == 5
    ranks = [s["rank"] for s in greedy["steps"]]
    if len(ranks) == playground_translator.model.max_length:  # cut at the limit: [END] added
        ranks = ranks[:-1]
    assert ranks == [1] * len(ranks)


def test_temperature_changes_probabilities_not_order(playground_url, playground_translator):
    """/api/alternatives explains a given translation's positions at a
    temperature without searching again: softmax(logits / T) over the whole
    vocabulary, as `Translator.alternatives(..., temperature=T)`; the order
    stays, a low T sharpens and a high T flattens. /api/translate with the
    same temperature sends the same numbers."""
    text = SENTENCES[2]
    status, answer = translate(playground_url, text=text, beam_size=2)
    assert status == 200, answer
    ids = answer["target_ids"]
    by_temperature = {}
    for temperature in (0.5, 1, 2.0):
        status, got = alternatives(playground_url, text=text, target_ids=ids, top_k=6,
                                   temperature=temperature)
        assert status == 200, got
        assert got["target_ids"] == ids and got["target_tokens"] == answer["target_tokens"]
        assert got["temperature"] == temperature and got["top_k"] == 6
        by_temperature[temperature] = got["steps"]
    cold, one, hot = by_temperature.values()
    for t in range(len(ids)):
        orders = [[a["id"] for a in steps[t]["alternatives"]] for steps in (cold, one, hot)]
        assert orders[0] == orders[1] == orders[2]
        assert [steps[t]["rank"] for steps in (cold, one, hot)] == [one[t]["rank"]] * 3
        top = [steps[t]["alternatives"][0]["probability"] for steps in (cold, one, hot)]
        assert top[0] > top[1] > top[2]
        # The log-probabilities are the model's (T = 1) at every temperature.
        assert [a["log_prob"] for a in hot[t]["alternatives"]] == pytest.approx(
            [a["log_prob"] for a in one[t]["alternatives"]], abs=1e-6)
    assert_same_alternatives(hot[0]["alternatives"], playground_translator.alternatives(
        text, prefix=[], k=6, temperature=2.0))
    assert [s["alternatives"][:5] for s in one] == [s["alternatives"] for s in answer["steps"]]
    status, warm = translate(playground_url, text=text, beam_size=2, top_k=6, temperature=2.0)
    assert status == 200 and warm["steps"] == hot


def test_alternatives_of_an_empty_source(playground_url, playground_translator):
    """Empty in, empty out: an empty source's one alternative is [END],
    certain, as `Translator.alternatives` says (and /api/translate still asks
    for a sentence)."""
    end = {"token": "[END]", "id": 3, "probability": 1.0, "log_prob": 0.0}
    assert [vars(a) for a in playground_translator.alternatives("", k=5)] == [end]
    for text, ids in (("", []), ("  ", [3])):
        status, got = alternatives(playground_url, text=text, target_ids=ids, top_k=5)
        assert status == 200, got
        assert got["target_ids"] == [3] and got["target_tokens"] == ["[END]"]
        assert got["steps"] == [{**end, "rank": 1, "alternatives": [end]}]
    assert translate(playground_url, text="")[0] == 400


def test_redecoding_from_a_picked_token(playground_url, playground_translator):
    """Pick another token at a position: `target_prefix` = the ids before it
    and the picked one, and the search continues from there. The answer is
    `Translator.translate([text], target_prefix=[prefix])`'s n-best list
    (scores included), starts with the prefix, and its tokens, steps and
    attention are the new translation's."""
    text = SENTENCES[0]
    status, answer = translate(playground_url, text=text, beam_size=2)
    assert status == 200, answer
    t = len(answer["target_ids"]) - 1  # the last position: [END] here, another token instead
    picked = next(a for a in answer["steps"][t]["alternatives"]
                  if a["id"] not in (answer["target_ids"][t], 3))
    prefix = answer["target_ids"][:t] + [picked["id"]]
    status, redecoded = translate(playground_url, text=text, beam_size=2, target_prefix=prefix)
    assert status == 200, redecoded
    assert redecoded["mode"] == "prefix" and redecoded["target_prefix"] == prefix
    (expected,), (scores,) = playground_translator.translate(
        [text], target_prefix=[prefix], beam_size=2, num_return_sequences=2,
        return_scores=True)
    assert [h["text"] for h in redecoded["translations"]] == expected
    np.testing.assert_allclose([h["score"] for h in redecoded["translations"]], scores,
                               rtol=1e-4)
    ids = redecoded["target_ids"]
    assert ids[: len(prefix)] == prefix and ids[-1] == 3
    assert redecoded["target_tokens"][t] == picked["token"]
    assert [s["id"] for s in redecoded["steps"]] == ids
    assert redecoded["steps"][t]["rank"] == answer["steps"][t]["alternatives"].index(picked) + 1
    queries = redecoded["attention"]["cross"]["query_tokens"]
    assert queries == redecoded["target_input_tokens"] == ["[START]"] + redecoded[
        "target_tokens"][:-1]
    probabilities = np.asarray(redecoded["token_probabilities"])
    lp = ((5 + len(probabilities)) / 6) ** playground_translator.length_penalty
    assert redecoded["translations"][0]["score"] == pytest.approx(
        np.log(probabilities).sum() / lp, abs=1e-3)
    # No prefix (an empty one) is the free translation.
    status, free = translate(playground_url, text=text, beam_size=2, target_prefix=[])
    assert status == 200 and free["mode"] == "translate"
    assert free["translations"] == answer["translations"]


TOO_LONG = "a" * (MAX_TEXT_LENGTH + 1)


@pytest.mark.parametrize("body,headers,status,message", [
    ("{not json", {"Content-Type": "application/json"}, 400, "not valid JSON"),
    ('["a list"]', {"Content-Type": "application/json"}, 400, "must be a JSON object"),
    ({"beam_size": 2}, None, 400, 'no "text"'),
    ({"text": 42}, None, 400, "`text` must be a string; received int"),
    ({"text": None}, None, 400, "`text` must be a string"),
    ({"text": "  "}, None, 400, "`text` is empty"),
    ({"text": TOO_LONG}, None, 400, f"at most {MAX_TEXT_LENGTH}"),
    ({"text": "Hi.", "beam_size": 0}, None, 400,
     "from 1 to 16 (the page's limit: it draws every beam); received 0"),
    ({"text": "Hi.", "beam_size": PAGE_MAX_BEAM_SIZE + 1}, None, 400, "received 17"),
    ({"text": "Hi.", "beam_size": "2"}, None, 400, "received '2'"),
    ({"text": "Hi.", "beam_size": True}, None, 400, "received True"),
    ({"text": "Hi.", "target": 3}, None, 400, "`target` must be a string"),
    ({"text": "Hi.", "target": TOO_LONG}, None, 400, "`target` has 1001 characters"),
    ({"text": "Hi.", "beams": 2}, None, 400, "Unknown field(s) ['beams']"),
    ({"text": "Hi.", "target_prefix": "El"}, None, 400,
     "`target_prefix` must be a list of target token ids (integers); received str"),
    ({"text": "Hi.", "target_prefix": [5, 2.5]}, None, 400, "must be a list of target token ids"),
    ({"text": "Hi.", "target_prefix": [True]}, None, 400, "must be a list of target token ids"),
    ({"text": "Hi.", "target_prefix": [5, 99999]}, None, 400,
     "`target_prefix` has the id 99999, outside the target vocabulary's [1, 600)"),
    ({"text": "Hi.", "target_prefix": [0]}, None, 400, "`target_prefix` has the id 0"),
    ({"text": "Hi.", "target_prefix": [5, 3]}, None, 400,
     "`target_prefix` holds the end token [END] (id 3); a prefix is the start"),
    ({"text": "Hi.", "target_prefix": [5] * 40}, None, 400,
     "`target_prefix` is 40 tokens long; a prefix must be shorter than the output length"),
    ({"text": "Hi.", "target": "Hola.", "target_prefix": [5]}, None, 400, "not both"),
    ({"text": "Hi.", "top_k": 0}, None, 400,
     "`top_k` must be an integer from 1 to 50; received 0"),
    ({"text": "Hi.", "top_k": 51}, None, 400, "received 51"),
    ({"text": "Hi.", "top_k": "5"}, None, 400, "`top_k` must be an integer"),
    ({"text": "Hi.", "temperature": 0}, None, 400,
     "`temperature` must be a finite number > 0; received 0"),
    ({"text": "Hi.", "temperature": -1.5}, None, 400, "received -1.5"),
    ({"text": "Hi.", "temperature": "hot"}, None, 400, "received 'hot'"),
    ({"text": "Hi.", "temperature": True}, None, 400, "received True"),
    ('{"text": "Hi.", "temperature": 1e999}', {"Content-Type": "application/json"}, 400,
     "received inf"),
    ('{"text": "Hi."}', {"Content-Type": "text/plain"}, 415, "Content-Type: application/json"),
    ('{"text": "Hi."}', {}, 415, "received Content-Type '(none)'"),
    ("x" * 70_000, {"Content-Type": "application/json"}, 413, "at most 65536"),
    (b'{"text": "\xff"}', {"Content-Type": "application/json"}, 400, "not valid JSON"),
])
def test_bad_requests_get_a_clear_4xx(playground_url, body, headers, status, message):
    got, _, answer = request(playground_url, "POST", "/api/translate", body, headers)
    assert got == status
    assert message in json.loads(answer)["error"]


@pytest.mark.parametrize("body,message", [
    ({"text": "Hi."}, 'no "target_ids": the translation'),
    ({"target_ids": [5, 3]}, 'no "text": the source sentence'),
    ([5, 3], "must be a JSON object such as"),
    ({"text": "Hi.", "target_ids": [5, 3], "beam_size": 2}, "Unknown field(s) ['beam_size']"),
    ({"text": 5, "target_ids": [5, 3]}, "`text` must be a string"),
    ({"text": "Hi.", "target_ids": "El libro."},
     "`target_ids` must be a list of target token ids"),
    ({"text": "Hi.", "target_ids": [5, 600]},
     "`target_ids` has the id 600, outside the target vocabulary's [1, 600)"),
    ({"text": "Hi.", "target_ids": [5, 3, 6]},
     "`target_ids` holds the end token [END] (id 3) at position 1, before its last"),
    ({"text": "Hi.", "target_ids": [5] * 40}, "`target_ids` has 41 tokens with [END]; the model "
     "reads at most 32"),
    ({"text": "Hi.", "target_ids": [5], "top_k": 600}, "`top_k` must be an integer from 1 to 50"),
    ({"text": "Hi.", "target_ids": [5], "temperature": 0.0}, "`temperature` must be a finite"),
])
def test_bad_alternatives_requests_get_a_clear_400(playground_url, body, message):
    status, _, answer = request(playground_url, "POST", "/api/alternatives", body)
    assert status == 400
    assert message in json.loads(answer)["error"]


def test_the_server_keeps_serving_after_bad_requests(playground_url):
    for body in ("{", "[]", '{"text": 1}'):
        request(playground_url, "POST", "/api/translate", body,
                {"Content-Type": "application/json"})
    status, answer = translate(playground_url, text="Hi.", beam_size=1)
    assert status == 200 and answer["translations"]


@pytest.mark.parametrize("method,path,status", [
    ("GET", "/static/../server.py", 404),
    ("GET", "/static/%2e%2e/server.py", 404),
    ("GET", "/static/..%2fserver.py", 404),
    ("GET", "/static//etc/passwd", 404),
    ("GET", "/../../../../etc/passwd", 404),
    ("GET", "/static/", 404),
    ("GET", "/server.py", 404),
    ("GET", "/api/nothing", 404),
    ("GET", "/api/translate", 405),
    ("GET", "/api/alternatives", 405),
    ("PUT", "/api/alternatives", 405),
    ("POST", "/api/alternative", 404),
    ("POST", "/", 405),
    ("POST", "/api/info", 404),
    ("PUT", "/api/translate", 405),
    ("DELETE", "/", 405),
])
def test_only_its_own_files_and_endpoints(playground_url, method, path, status):
    got, headers, body = request(playground_url, method, path)
    assert got == status
    assert "error" in json.loads(body)
    assert b"import" not in body and b"root:" not in body
    if path == "/api/nothing":  # the answer names every endpoint
        error = json.loads(body)["error"]
        assert error.endswith(f"there are {_ENDPOINT_LIST}.")
        assert all(name in error for name in ("/api/info", "/api/translate", "/api/alternatives",
                                              "/api/beam_tree", "/api/attributions",
                                              "/api/checkpoints", "/api/checkpoint_attention"))


def _raw(url, data, shut_write=False, timeout=20):
    """Sends `data` on a raw socket; returns what the server sent back until
    it closed the connection (b"" if it closed without answering)."""
    import socket

    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def test_a_body_shorter_than_its_content_length_is_refused(playground_url):
    """The client announces 100 bytes, sends a complete JSON of 16 and closes
    its side: refused (it was translated), and the server keeps serving."""
    body = b'{"text": "Hi."} '
    answer = _raw(playground_url, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + body,
                  shut_write=True)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"ended after 16 of the 100 bytes" in answer
    assert translate(playground_url, text="Hi.", beam_size=1)[0] == 200


def test_stalled_clients_are_dropped_and_a_burst_is_queued(playground_translator):
    """Half-sent requests do not pin the server's threads: after `timeout`
    seconds of silence it closes them (a 408 when the body stalls), and a
    burst of connections is queued, not reset (loopback, a short timeout)."""
    import socket
    import threading

    from keras_attention.playground import PlaygroundServer

    with pytest.raises(ValueError, match="`timeout` must be a positive number"):
        PlaygroundServer(playground_translator, port=0, timeout=0)
    with PlaygroundServer(playground_translator, port=0, timeout=1) as server:
        start = time.perf_counter()
        headers_only = _raw(server.url, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n")
        body_stalled = _raw(server.url, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
        assert time.perf_counter() - start < 15
        assert headers_only == b""  # closed without an answer
        assert body_stalled.startswith(b"HTTP/1.1 408"), body_stalled[:200]
        # 30 silent connections at once, then real requests: all answered.
        parts = urllib.parse.urlsplit(server.url)
        idle = [socket.create_connection((parts.hostname, parts.port), timeout=10)
                for _ in range(30)]
        statuses = []

        def info():
            statuses.append(request(server.url, "GET", "/api/info")[0])

        threads = [threading.Thread(target=info) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for sock in idle:
            sock.close()
        assert statuses == [200] * 20
    assert server._httpd.request_queue_size >= 64


def test_a_trickling_client_meets_the_request_deadline(playground_translator):
    """A client that sends a byte every 0.3 s never stays silent for the
    1-second `timeout`, but its request must arrive within the `deadline`:
    headers trickled are closed without an answer, a body trickled gets a
    408, both at about the deadline, not when the client gives up."""
    import socket

    from keras_attention.playground import PlaygroundServer

    with pytest.raises(ValueError, match="`deadline` must be a positive number"):
        PlaygroundServer(playground_translator, port=0, deadline=float("inf"))

    def trickle(url, head, slow):
        """Sends `head` at once, then `slow` a byte every 0.3 s; returns
        `(what the server answered, seconds until it closed)`."""
        parts = urllib.parse.urlsplit(url)
        start = time.perf_counter()
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(head)
            for byte in slow:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:  # the server closed the connection
                    break
                time.sleep(0.3)
                sock.setblocking(False)
                try:
                    sock.recv(1, socket.MSG_PEEK)
                    break  # an answer, or the end of the connection
                except BlockingIOError:
                    pass  # nothing yet
                finally:
                    sock.setblocking(True)
            sock.settimeout(10)
            chunks = []
            try:
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            except ConnectionResetError:
                pass
        return b"".join(chunks), time.perf_counter() - start

    with PlaygroundServer(playground_translator, port=0, timeout=1, deadline=2) as server:
        headers, seconds = trickle(server.url, b"", b"GET /api/info HTTP/1.1\r\nHost: x" * 5)
        assert headers == b"" and 1.9 < seconds < 6, (headers[:100], seconds)
        body, seconds = trickle(server.url, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 60\r\n\r\n",
                                b'{"text": "' + b"a" * 48 + b'"}')
        assert body.startswith(b"HTTP/1.1 408") and b"within 2 s" in body, body[:200]
        assert 1.9 < seconds < 6, seconds
        assert request(server.url, "GET", "/api/info")[0] == 200  # and it keeps serving


def test_a_server_open_to_the_network_says_so(playground_translator):
    """Bound to every interface, the command's banner warns that anyone on
    the network can use the page and gives the addresses to reach it; on
    loopback it only says where to open it."""
    from keras_attention.playground import PlaygroundServer
    from recipes.translation.playground import run_name

    local = PlaygroundServer(playground_translator, port=0, name="translation")
    try:
        assert not local.exposed and local.urls == [local.url]
        assert local.banner() == [f"Open {local.url} in a browser (Ctrl+C stops)."]
        assert local.info["model"]["name"] == "translation"
    finally:
        local.shutdown()
    public = PlaygroundServer(playground_translator, host="0.0.0.0", port=0)
    try:
        port = public.url.rsplit(":", 1)[1].rstrip("/")
        banner = public.banner()
        assert public.exposed and banner[0].startswith(f"Open http://127.0.0.1:{port}/ ")
        assert "on this machine" in banner[0]
        assert banner[1].startswith("From other machines: http://") and f":{port}/" in banner[1]
        assert banner[2].startswith("WARNING: listening on 0.0.0.0")
        assert "reachable from the network" in banner[2] and "--host 127.0.0.1" in banner[2]
    finally:
        public.shutdown()
    assert run_name("runs/translation/") == "translation"
    assert run_name("runs/translation/preset") == "translation/preset"


def test_reliability_counts_words_out_of_vocabulary():
    """`reliability` groups subwords back into words (WordPiece `##`,
    SentencePiece `▁`), counts those not one vocabulary token, skips
    punctuation, and warns by the translator's rule (uncalibrated here:
    `DEFAULT_RULE`)."""
    from keras_attention.playground.analysis import reliability
    from keras_attention.translation.reliability import DEFAULT_RULE

    wordpiece = ["I", "lo", "##ve", "m", "##a", "##ch", "##ine", "and", "[UNK]", ".", "[END]"]
    answer = reliability(wordpiece, np.log([0.9, 0.9]))
    assert answer["out_of_vocabulary"] == {"words": 5, "unknown": ["lo·ve", "m·a·ch·ine", "[UNK]"],
                                           "fraction": 0.6}
    assert answer["confidence"] == pytest.approx(0.9)
    assert [w["kind"] for w in answer["warnings"]] == ["out_of_vocabulary"]
    assert "3 of the 5 words" in answer["warnings"][0]["message"]
    sentencepiece = ["▁The", "▁red", "▁bo", "ok", "▁", ".", "[END]"]
    answer = reliability(sentencepiece, np.log([0.2, 0.5]))
    assert answer["out_of_vocabulary"] == {"words": 3, "unknown": ["bo·ok"], "fraction": 0.33333}
    assert answer["confidence"] == pytest.approx(np.sqrt(0.1), abs=1e-4)
    assert [w["kind"] for w in answer["warnings"]] == ["low_confidence"]
    assert DEFAULT_RULE["max_unknown_fraction"] == DEFAULT_RULE["min_confidence"] == 0.5
    calibrated = {"max_unknown_fraction": 0.0, "min_confidence": 0.1, "max_source_tokens": 5,
                  "target_rate": 0.05}
    answer = reliability(sentencepiece, np.log([0.2, 0.5]), calibrated)
    assert [w["kind"] for w in answer["warnings"]] == ["out_of_vocabulary", "long_source"]
    assert "held-out" in answer["warnings"][1]["message"]


def test_translate_warns_of_unknown_words_and_low_confidence(playground_url,
                                                             playground_translator):
    """/api/translate measures how far to trust its answer by the rule the
    run calibrated on its held-out split (`Translator.reliability`'s): an
    in-vocabulary sentence has no word out of vocabulary, a made-up one is
    mostly out of vocabulary and warned of; the confidence is the geometric
    mean of the token probabilities it returns."""
    from keras_attention.translation.reliability import rule_of

    rule = rule_of(playground_translator)
    assert rule is not None and rule["warned"] <= rule["target_rate"]  # the run's calibration
    answers = {}
    for text in (SENTENCES[0], "Xqz vrbb plomk grzzt."):
        status, answer = translate(playground_url, text=text, beam_size=1)
        assert status == 200, answer
        answers[text] = answer
        mean = np.exp(np.mean(np.log(answer["token_probabilities"])))
        assert answer["confidence"] == pytest.approx(mean, rel=1e-3)
        kinds = [w["kind"] for w in answer["warnings"]]
        assert ("low_confidence" in kinds) == (answer["confidence"] < rule["min_confidence"])
        assert ("out_of_vocabulary" in kinds) == (
            answer["out_of_vocabulary"]["fraction"] > rule["max_unknown_fraction"])
    known, nonsense = answers.values()
    assert known["out_of_vocabulary"] == {"words": 7, "unknown": [], "fraction": 0.0}
    assert nonsense["out_of_vocabulary"]["words"] == 4
    assert nonsense["out_of_vocabulary"]["fraction"] > rule["max_unknown_fraction"]
    assert "out_of_vocabulary" in [w["kind"] for w in nonsense["warnings"]]
    verdicts = playground_translator.with_settings(beam_size=1).reliability(list(answers))
    assert [list(v.reasons) for v in verdicts] == [
        [w["kind"] for w in a["warnings"]] for a in answers.values()]


def test_the_page_and_its_assets(playground_url):
    """The page, its stylesheet and its entry module; every module the entry
    imports (and theirs) is served as JavaScript, and every file of static/
    is one of them."""
    status, headers, page = request(playground_url, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    references = re.findall(r'(?:src|href)="([^"]+)"', page.decode())
    assert not [a for a in references if "//" in a]  # nothing from another server
    assets = [a for a in references if not a.startswith(("data:", "#"))]
    assert sorted(assets) == ["static/playground.css", "static/playground.js"]
    assert '<script type="module" src="static/playground.js"></script>' in page.decode()
    for asset in assets:
        status, headers, _ = request(playground_url, "GET", "/" + asset)
        assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
    modules, queue = set(), ["playground.js"]
    while queue:
        name = queue.pop()
        status, headers, source = request(playground_url, "GET", "/static/" + name)
        assert status == 200, name
        assert headers["Content-Type"] == "text/javascript; charset=utf-8", name
        modules.add(name)
        queue += [m for m in re.findall(r'^import \{[^}]*\} from "\./([\w-]+\.js)";',
                                        source.decode(), re.M) if m not in modules]
    assert modules == {n for n in os.listdir(STATIC_DIR) if n.endswith(".js")}
    assert len(modules) >= 8  # a module per view, the shared ones and the entry


def test_concurrent_requests_get_their_own_answers(playground_url):
    texts = (SENTENCES * 2)[:8]
    beams = [1, 2, 3, 4, 1, 2, 3, 4]
    serial = [translate(playground_url, text=t, beam_size=b)[1] for t, b in zip(texts, beams)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda tb: translate(playground_url, text=tb[0],
                                                      beam_size=tb[1])[1], zip(texts, beams)))
    for one, other in zip(serial, parallel):
        one.pop("milliseconds"), other.pop("milliseconds")
        assert one == other


def test_self_contained_html(playground_translator):
    """`attention_html`: the page with its assets inlined and the answer
    embedded; a sentence that tries to close the script stays data."""
    text = 'He said "</script><script>alert(1)</script>" & left.'
    page = attention_html(playground_translator, text, beam_size=2)
    assert not re.findall(r'(?:src|href)="(?!data:|#)', page)  # nothing to fetch
    assert "static/playground" not in page
    data = re.search(r'<script type="application/json" id="playground-data">(.*?)</script>',
                     page, re.S).group(1)
    answer = json.loads(data)
    assert answer["source"] == text
    expected = analyze(playground_translator, text, beam_size=2)
    answer.pop("milliseconds"), expected.pop("milliseconds")
    assert answer == expected
    # The data and the page's modules, bundled into one classic script.
    assert "<script src=" not in page and 'type="module"' not in page
    assert page.count("</script>") == 2 and "<script>alert" not in page
    for name in os.listdir(STATIC_DIR):
        if name.endswith(".js"):
            assert f"modules['{name}'] = (function () {{" in page, name


def test_playground_command(tiny_run, tmp_path, capsys):
    """The command: --help, a clear error for a missing run, and a server
    that answers at the address it prints."""
    from recipes.translation import playground

    # In-process: the help and the refusals (the real command line is the server below).
    code, out, _ = run_main(playground.main, ["--help"], capsys)
    assert code == 0 and "--workdir" in out and "--port" in out
    code, _, err = run_main(playground.main, ["--workdir", str(tmp_path / "none")], capsys)
    assert code == 2
    assert "does not exist" in err and "run.py main" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_main(playground.main, ["--workdir", str(empty)], capsys)
    assert code == 2 and "config.json" in err
    assert "run.py main" in err
    _, workdir, _ = tiny_run
    server = subprocess.Popen([sys.executable, PLAYGROUND, "--workdir", str(workdir), "--port",
                               "0", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        lines = []
        while not lines or not lines[-1].startswith("Open "):
            line = server.stdout.readline()
            assert line, f"the server stopped: {server.stderr.read()}"
            lines.append(line)
        url = lines[-1].split()[1]
        status, answer = translate(url, text="Hi.", beam_size=1)
        assert status == 200 and answer["translations"]
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=60)
    assert "Traceback" not in stderr and "E0000" not in stderr, stderr
