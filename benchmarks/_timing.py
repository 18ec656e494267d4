"""The one timing loop of the benchmarks."""

import statistics
import time


def median_seconds(fn, repeats, warmup=1):
    """Calls `fn` `warmup` times untimed (tracing, compilation, caches), then
    `repeats` times timed; `fn` must return only once its work is done (e.g.
    by converting its result to NumPy). Returns `(median seconds, last result)`."""
    for _ in range(warmup):
        fn()
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result
