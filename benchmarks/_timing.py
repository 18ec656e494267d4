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
