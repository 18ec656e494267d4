"""The one timing loop of the benchmarks."""

import statistics
import time


def interleaved_median_seconds(fns, repeats, warmup=1):
    """Times several callables round-robin (A, B, A, B, ...), so that the
    slow drifts of a shared machine hit each of them alike.

    Each callable is called `warmup` times untimed (tracing, compilation,
    caches), then `repeats` times timed; it must return only once its work is
    done (e.g. by converting its result to NumPy).

    Args:
        fns: a dict `name -> callable`.

    Returns:
        A dict `name -> (median seconds, last result)`.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seconds = {name: [] for name in fns}
    results = dict.fromkeys(fns)
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            results[name] = fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: (statistics.median(seconds[name]), results[name]) for name in fns}


def median_seconds(fn, repeats, warmup=1):
    """`interleaved_median_seconds` for one callable: `(median seconds, last result)`."""
    return interleaved_median_seconds({"fn": fn}, repeats, warmup)["fn"]


def measure(systems, sentences, batch_size, latency_sentences, rounds):
    """Sentences/s at `batch_size` over all sentences and single-sentence
    latencies over the first `latency_sentences`, after a warm-up that
    translates them all once (untimed there; its seconds, which include
    tracing and XLA compilations, are reported as `warm_up_seconds`).

    The systems take turns (A, B, C, A, B, C, ...; as `_timing.py`): the
    sentences are cut into `rounds` chunks (whole batches), each translated
    by every system in turn, and each single sentence likewise, so that the
    slow drifts of a shared machine hit every system alike.

    Returns `{name: (hypotheses, timing)}`.
    """
    chunk = batch_size * -(-len(sentences) // (batch_size * rounds))
    warm_up = {}
    for name, translate in systems.items():
        # Every shape the timed part meets, once: tracing, and XLA's
        # compilation per batch shape (timed separately, reported apart).
        start = time.perf_counter()
        for i in range(0, len(sentences), chunk):
            translate(sentences[i : i + chunk])
        for sentence in sentences[:latency_sentences]:
            translate([sentence])
        warm_up[name] = time.perf_counter() - start
    seconds = dict.fromkeys(systems, 0.0)
    hypotheses = {name: [] for name in systems}
    for i in range(0, len(sentences), chunk):
        for name, translate in systems.items():
            start = time.perf_counter()
            hypotheses[name] += translate(sentences[i : i + chunk])
            seconds[name] += time.perf_counter() - start
    latencies = {name: [] for name in systems}
    for sentence in sentences[:latency_sentences]:
        for name, translate in systems.items():
            start = time.perf_counter()
            translate([sentence])
            latencies[name].append(time.perf_counter() - start)
    return {name: (hypotheses[name], {
        "sentences_per_second_batch": len(sentences) / seconds[name],
        "latency_p50_ms": 1000 * statistics.median(latencies[name]),
        "sentences_per_second_batch_1": len(latencies[name]) / sum(latencies[name]),
        "warm_up_seconds": warm_up[name],
    }) for name in systems}


def add_measure_arguments(parser, sentences, latency_sentences, rounds, batch_size=32):
    """Adds the flags of `measure`'s arguments (`--sentences`, `--batch-size`,
    `--latency-sentences`, `--rounds`) to `parser`, with these defaults: the
    scripts that time their systems with `measure` share them."""
    parser.add_argument("--sentences", type=int, default=sentences,
                        help=f"sentences to translate (default: {sentences})")
    parser.add_argument("--batch-size", type=int, default=batch_size,
                        help=f"batch of the throughput figures (default: {batch_size})")
    parser.add_argument("--latency-sentences", type=int, default=latency_sentences,
                        help="sentences translated one at a time, for the latencies "
                        f"(default: {latency_sentences})")
    parser.add_argument("--rounds", type=int, default=rounds,
                        help="chunks of the sentences the systems take turns on "
                        f"(default: {rounds})")
