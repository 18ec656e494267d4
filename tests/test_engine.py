"""The translation engine (`keras_attention.translation.engine`): its
contract on each model family (ours, a converted Marian model, keras-hub's
task), the background compilation a first answer relies on, and many
callers at once. The rest of the suite decodes in `KERAS_ATTENTION_COMPILE=wait`
(tests/conftest.py: one path, so numbers compared across doors are equal to
the bit); these tests run what users run, `background`."""

import pathlib
import threading

import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.translation.compiled import forget_shared_programs
from keras_attention.translation.engine import Engine, Work, compile_mode, engine_of
from tests.helpers import ENGLISH, untrained_translator

MARIAN = pathlib.Path(__file__).resolve().parent / "fixtures" / "marian" / "shared_swish"
SOURCES = ["the red book is on the table", "where is the cat", "", "we did not see it",
           "the small green house is near the big old church by the river"]


@pytest.fixture(autouse=True)
def own_programs():
    """No programs of an earlier test's models (the engines of one
    configuration share them): what these tests see built, they built."""
    forget_shared_programs()


@pytest.fixture
def background(monkeypatch):
    monkeypatch.setenv("KERAS_ATTENTION_COMPILE", "background")


FAMILIES = {
    "ours": untrained_translator,
    "marian": lambda: Translator.from_preset(str(MARIAN), jit_compile=False),
    "keras_hub": lambda: Translator.from_keras_hub_task(
        untrained_translator().as_keras_hub_task(), jit_compile=False),
}


def _count_eager(monkeypatch):
    """A list that grows by one for each `Work` call that ran eagerly."""
    eager, original = [], Work.__call__

    def counted(self, *args):
        before = self.ready
        outputs = original(self, *args)
        if not before:
            eager.append(self.name)
        return outputs

    monkeypatch.setattr(Work, "__call__", counted)
    return eager


@pytest.mark.slow  # three models, each built op by op, as a graph and waited for
@pytest.mark.parametrize("family", ["ours", "marian", "keras_hub"])
def test_every_family_answers_eagerly_then_from_its_graph_alike(family, background,
                                                                monkeypatch):
    """The first call runs eagerly (no wait for a trace), the graph is built
    in the background, and both give the same translations, with scores
    equal to float32 rounding; the empty sentence is "" on both paths."""
    translator = FAMILIES[family]()
    eager = _count_eager(monkeypatch)
    engine = translator.engine
    assert engine is engine_of(translator.model, translator.source_tokenizer,
                               translator.target_tokenizer)
    assert translator.with_settings(beam_size=3).engine is engine  # one per model
    first, first_scores = translator.translate(SOURCES, return_scores=True)
    assert eager and first[2] == "" and first_scores[2] == 0.0
    engine.wait()
    work = engine.search_work(translator.settings)
    assert work.ready
    eager.clear()
    again, scores = translator.translate(SOURCES, return_scores=True)
    assert not eager
    assert again == first
    np.testing.assert_allclose(scores, first_scores, rtol=1e-5, atol=1e-5)
    # Score, alternatives and the beam tree go through the engine too: eager
    # first, then from their graphs, alike.
    # (Short targets of their own: an untrained model's translation runs to
    # the length limit, and its text tokenizes longer than the model reads.)
    targets = ["Hola.", "El libro."]
    calls = {"score": lambda: translator.score(SOURCES[:2], targets)[1].log_probs,
             "alternatives": lambda: [a.log_prob for a in translator.alternatives(SOURCES[0])],
             "beam tree": lambda: translator.beam_tree(SOURCES[1]).score}
    eager.clear()
    before = {name: call() for name, call in calls.items()}
    assert len(eager) == 3
    engine.wait()
    eager.clear()
    for name, call in calls.items():
        np.testing.assert_allclose(call(), before[name], rtol=1e-5, atol=1e-5, err_msg=name)
    assert not eager
    assert translator.beam_tree(SOURCES[1]).translation == first[1]


def test_xla_programs_compile_in_the_background(background):
    """With `jit_compile`, a batch shape's XLA program is compiled in the
    background; until it is, the graph answers; then the program does, with
    the same translations."""
    translator = untrained_translator().with_settings(jit_compile=True)
    work = translator.engine.search_work(translator.settings, jit_compile=True)
    expected = translator.translate(SOURCES[:2])  # eager; queues the graph
    translator.engine.wait()
    assert work.ready and not work.xla_ready
    assert translator.translate(SOURCES[:2]) == expected  # the graph; queues the program
    translator.engine.wait()
    assert len(work.xla_ready) == 1
    assert translator.translate(SOURCES[:2]) == expected  # the XLA program



@pytest.mark.slow  # an XLA program of the search, compiled and waited for
def test_programs_compiled_in_wait_mode_serve_the_later_calls(background, monkeypatch):
    """A warm-up in `compile_mode("wait")` compiles its shapes' XLA programs;
    later calls in the default (background) mode run those programs, not
    the eager path beside a graph build (benchmarks/opus_mt.py timed that:
    a third of the programs' speed)."""
    translator = untrained_translator().with_settings(jit_compile=True)
    work = translator.engine.search_work(translator.settings, jit_compile=True)
    with compile_mode("wait"):
        expected = translator.translate(SOURCES[:2])
    assert len(work.xla_ready) == 1 and not work.ready

    def refuse(*args):
        raise AssertionError("a warmed-up shape ran without its XLA program")

    monkeypatch.setattr(work, "eager_fn", refuse)
    monkeypatch.setattr(work, "graph", refuse)
    assert translator.translate(SOURCES[:2]) == expected
    translator.engine.wait()
    assert not work.ready  # no graph build was queued either

def test_warm_up_builds_before_the_first_request(background, monkeypatch):
    translator = untrained_translator()
    eager = _count_eager(monkeypatch)
    assert translator.warm_up() is translator
    translator.translate([SOURCES[0]])
    assert not eager


def test_wait_mode_never_runs_eagerly(monkeypatch):
    monkeypatch.setenv("KERAS_ATTENTION_COMPILE", "wait")
    translator = untrained_translator()
    eager = _count_eager(monkeypatch)
    translator.translate([SOURCES[0]])
    assert len(eager) == 1  # the call that built the graph, and waited for it
    assert translator.engine.search_work(translator.settings).ready
    monkeypatch.setenv("KERAS_ATTENTION_COMPILE", "later")
    with pytest.raises(ValueError, match="KERAS_ATTENTION_COMPILE='later'"):
        translator.translate(["again"])


def test_a_model_and_its_engine_are_freed_with_the_last_reference():
    """The engine lives on its model, not in a module registry that keeps
    every model ever translated with (and its compiled programs) alive
    (issue 69)."""
    import gc
    import weakref

    translator = untrained_translator()
    translator.translate([SOURCES[0]])
    assert translator.with_settings(beam_size=2).engine is translator.engine
    model, engine = weakref.ref(translator.model), weakref.ref(translator.engine)
    del translator
    gc.collect()
    assert model() is None and engine() is None


def test_models_of_one_configuration_share_their_programs():
    """A second model of the first's configuration, with other weights, runs
    the graph traced for the first (no new trace) on its own weights: its
    translations are those of its own op-by-op path, and follow its weights
    when they change. The shared programs keep neither model alive."""
    import gc
    import weakref

    first, second = untrained_translator(), untrained_translator()
    expected = first.translate(SOURCES)
    work, other = (t.engine.search_work(t.settings) for t in (first, second))
    assert other.programs is work.programs and other.ready
    assert work.programs.graph.experimental_get_tracing_count() == 1
    assert second.translate(SOURCES) != expected  # its weights, not the first model's
    assert work.programs.graph.experimental_get_tracing_count() == 1
    rows = second.engine.pad(second.engine.tokenize(SOURCES))
    ids, scores = other.graph(rows)
    own_ids, own_scores = other.eager_fn(rows)  # the second model's own path
    np.testing.assert_array_equal(ids, own_ids)
    np.testing.assert_allclose(scores, own_scores, rtol=1e-5, atol=1e-5)
    second.model.set_weights(first.model.get_weights())
    assert second.translate(SOURCES) == expected
    assert work.programs.graph.experimental_get_tracing_count() == 1
    model = weakref.ref(first.model)
    del first, work
    gc.collect()
    assert model() is None


def test_threads_get_the_sequential_results_batched_together(background, monkeypatch):
    """8 threads translating through one translator get exactly what one
    caller at a time gets, and their requests are batched together (fewer
    searches than requests)."""
    translator = untrained_translator()
    translator.warm_up()
    sentences = ENGLISH[:8]
    expected = [translator.translate([s], return_scores=True) for s in sentences]
    runs, original = [], Engine._translate_rows

    def counted(self, ids, *args):
        runs.append(len(ids))
        return original(self, ids, *args)

    monkeypatch.setattr(Engine, "_translate_rows", counted)
    barrier, results = threading.Barrier(len(sentences)), [None] * len(sentences)

    def call(i):
        barrier.wait()
        results[i] = translator.translate([sentences[i]], return_scores=True)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(sentences))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r[0] for r in results] == [e[0] for e in expected]
    np.testing.assert_allclose([r[1] for r in results], [e[1] for e in expected],
                               rtol=1e-5, atol=1e-5)
    assert sum(runs) == len(sentences) and len(runs) < len(sentences)


def test_callers_in_a_loop_are_gathered_into_whole_groups(background, monkeypatch):
    """4 threads translating 3 sentences each, one call at a time: after a
    group of several callers, the next leader waits (up to GATHER_SECONDS,
    here 1 s) for as many callers, so the calls run in whole groups instead
    of a lone caller's group alternating with the rest's (1, 3, 1, 3, ...:
    6 groups); a lone caller does not wait. The first group (its leader
    alone) runs once the three others are queued behind it: on a loaded
    machine they could otherwise arrive one by one, and groups of two would
    follow (1, 2, 2, 2, 2, 2, 1: seen in CI rehearsals)."""
    from keras_attention.translation import engine as engine_module

    monkeypatch.setattr(engine_module, "GATHER_SECONDS", 1.0)
    translator = untrained_translator()
    translator.warm_up()
    translator.engine.wait()
    for sentence in ENGLISH[:3]:  # one caller: each its own group, at once
        translator.translate([sentence])
    runs, original = [], Engine._translate_rows

    def counted(self, ids, *args):
        if not runs:
            with self._waiting:  # (notified by each caller that queues)
                assert self._waiting.wait_for(
                    lambda: sum(map(len, self._queues.values())) >= 3, timeout=60)
        runs.append(len(ids))
        return original(self, ids, *args)

    monkeypatch.setattr(Engine, "_translate_rows", counted)
    barrier = threading.Barrier(4)

    def caller(i):
        barrier.wait()
        for j in range(3):
            translator.translate([ENGLISH[(3 * i + j) % len(ENGLISH)]])

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(runs) == 12 and len(runs) <= 5, runs


def test_an_error_reaches_every_caller_of_its_group(background, monkeypatch):
    translator = untrained_translator()

    def broken(self, ids, *args):
        raise RuntimeError("the search failed")

    monkeypatch.setattr(Engine, "_translate_rows", broken)
    with pytest.raises(RuntimeError, match="the search failed"):
        translator.translate(["the cat"])
    monkeypatch.undo()
    assert translator.translate([""]) == [""]  # the engine is not left locked


def test_compile_mode_chooses_for_one_thread(background, monkeypatch):
    """`compile_mode("wait")` (what `translate_file` decodes in) waits for
    the compiled work whatever the environment says, in its thread only."""
    translator = untrained_translator()
    eager = _count_eager(monkeypatch)
    with compile_mode("wait"):
        translator.translate([SOURCES[0]])
    assert len(eager) == 1 and translator.engine.search_work(translator.settings).ready
    with pytest.raises(ValueError, match="`mode` must be one of"):
        with compile_mode("eager"):
            pass


@pytest.mark.slow  # the preset's graph and an XLA program, built and waited for
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_the_shipped_preset_answers_alike_on_every_path(policy, background, monkeypatch):
    """What users load, in what they compute in (mixed_bfloat16 is the
    default on AVX-512 BF16 machines): the first answers (op by op, each
    step compiled), the graph's and the XLA programs' agree, to the
    policy's precision."""
    translator = Translator.from_preset("tatoeba_en_es", dtype=policy)
    sentences = ["Good morning.", "I left the red book on the table.", ""]
    eager = _count_eager(monkeypatch)
    first, first_scores = translator.translate(sentences, return_scores=True)
    assert eager and first[0] == "Buenos días." and first[2] == ""
    tolerance = 1e-5 if policy == "float32" else 2e-2
    for _ in range(2):  # the graph (the XLA program compiles behind it), then the program
        translator.engine.wait()
        texts, scores = translator.translate(sentences, return_scores=True)
        assert texts == first
        np.testing.assert_allclose(scores, first_scores, rtol=tolerance, atol=tolerance)
    work = translator.engine.search_work(translator.settings, jit_compile=True)
    assert work.ready and work.xla_ready


@pytest.mark.slow  # the preset's greedy search traced twice, with and without the drop
def test_a_large_greedy_batch_drops_its_finished_rows_with_the_same_results(monkeypatch):
    """20 sentences in one batch (short ones whose outputs end early, long
    ones that go on): the engine runs the search that drops finished rows
    (`greedy_search(drop_finished=True)`, from `DROP_FINISHED_FROM` rows),
    and gives what the whole batch's search gives; a batch of fewer rows
    runs the plain search."""
    from keras_attention.translation import engine as engine_module

    translator = Translator.from_preset("tatoeba_en_es", beam_size=1, jit_compile=False)
    sentences = (["Yes.", "Thank you.", "Good morning.", "I am here.", "Hello.", "No."] * 2
                 + ENGLISH)  # 12 short, 8 long
    asked, search_work = [], Engine.search_work

    def recording(self, *args, **kwargs):
        asked.append(args[4] if len(args) > 4 else kwargs.get("drop_finished", False))
        return search_work(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "search_work", recording)
    texts, scores = translator.translate(sentences, return_scores=True)
    assert asked == [True] and texts[2] == "Buenos días." and all(texts)
    monkeypatch.setattr(engine_module, "DROP_FINISHED_FROM", len(sentences) + 1)
    whole, whole_scores = translator.translate(sentences, return_scores=True)
    assert asked == [True, False]
    assert texts == whole
    np.testing.assert_allclose(scores, whole_scores, rtol=1e-5, atol=1e-5)
    translator.translate(sentences[:15])
    assert asked[-1] is False
