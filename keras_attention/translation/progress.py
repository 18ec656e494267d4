"""A progress line on stderr for a long job over lines (`translate_file`):
lines done of the total, sentences per second and the time left. Keras'
`Progbar` writes to stdout and estimates from the start of its count, which
a resumed job does not share."""

import sys
import time


class ProgressLine:
    """`done/total lines [====>   ] 12% - 85.3 sentences/s - ETA 0:14:07` on
    stderr, redrawn in place on a terminal, a line per update elsewhere (a
    log file); the rate and the ETA count this process's work only, from
    `done` (the lines a resumed job had done before). Nothing when not
    `show`."""

    def __init__(self, total, done, show):
        self.total, self.first, self.show = total, done, show
        self.started = time.perf_counter()
        self.tty = show and sys.stderr.isatty()
        self.done, self.sentences = done, 0
        self._draw()

    def update(self, done, sentences):
        self.done, self.sentences = done, sentences
        self._draw()

    def close(self):
        if self.show:
            self._draw(end="\n")

    def _draw(self, end=None):
        if not self.show:
            return
        elapsed = time.perf_counter() - self.started
        rate = self.sentences / elapsed if elapsed > 0 else 0.0
        fraction = self.done / self.total if self.total else 1.0
        bar = "=" * int(20 * fraction)
        bar = (bar + ">" if len(bar) < 20 else bar).ljust(20)
        if end is not None:
            eta = f"in {_clock(elapsed)}"
        elif self.done > self.first:
            eta = "ETA " + _clock((self.total - self.done) * elapsed / (self.done - self.first))
        else:
            eta = "ETA ?"
        line = (f"{self.done}/{self.total} lines [{bar}] {100 * fraction:3.0f}% - "
                f"{rate:.1f} sentences/s - {eta}")
        if self.tty:
            sys.stderr.write(f"\r{line}\x1b[K" + (end or ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
