"""How one computation of the engine runs without making its caller wait
for a compilation (`engine` says why and with what figures): a `Work`
holds a computation and its compiled forms (a graph for every shape, XLA
programs per shape), runs it op by op over `CompiledSteps` until its graph
is built, and hands its builds to the one background `Builder`;
`compile_mode` / `KERAS_ATTENTION_COMPILE` choose whether calls wait for
them instead. On the JAX backend a `Work` is one `jax.jit` program per
shape, the model's variables its arguments (`_jax_program`), and calls wait
for it.
"""

import atexit
import collections
import contextlib
import functools
import json
import os
import queue
import threading
import time

import keras
import numpy as np
import tensorflow as tf

from keras_attention.decoding.precision import thread_setting
from keras_attention.models.precision import quantization_of, stateless_twin

IDS = tf.TensorSpec([None, None], tf.int32)


COMPILE_MODES = ("background", "wait")
_THREAD = threading.local()  # this thread's `compile_mode`, if any


@contextlib.contextmanager
def compile_mode(mode):
    """Within it, this thread's calls run in `mode` (`COMPILE_MODES`),
    whatever `KERAS_ATTENTION_COMPILE` says: `translate_file` decodes in
    `"wait"`, so that its bytes never depend on timing."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"`mode` must be one of {COMPILE_MODES}; received {mode!r}.")
    with thread_setting(_THREAD, mode):
        yield


def background_enabled():
    """Whether `Work`s answer at once and compile in the background
    (`KERAS_ATTENTION_COMPILE=background`, the default), or every call waits
    for its compiled form (`wait`: the XLA program of its shape with
    `jit_compile`, else the graph), so that every number comes from one
    path (reproducible to the last bit, as before the engine).
    `compile_mode` chooses for one thread."""
    mode = (getattr(_THREAD, "mode", None)
            or os.environ.get("KERAS_ATTENTION_COMPILE", "background"))
    if mode not in COMPILE_MODES:
        raise ValueError(f"KERAS_ATTENTION_COMPILE={mode!r}; expected one of {COMPILE_MODES}.")
    return mode == "background"


class Builder:
    """The engine's one background thread: builds graphs and XLA programs
    one at a time. A build starts when no call has run for `IDLE` seconds,
    or at the latest `PATIENCE` seconds after it was queued: a build traces
    in Python, and beside a caller's op-by-op answer it would take half of
    the interpreter (measured: a new length's first answer 1.4 s beside a
    build, 0.4 s alone), while a long job still gets its compiled work
    within seconds. At exit, queued builds are dropped and the one under way
    is waited for (TensorFlow must not be torn down under a running build)."""

    IDLE = 0.3
    PATIENCE = 3.0

    def __init__(self):
        self._jobs = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()
        self._stopped = False
        self._calls, self._last_call = 0, 0.0

    @contextlib.contextmanager
    def calling(self):
        """Marks a caller's work (the builds wait for the engines to be idle)."""
        with self._lock:
            self._calls += 1
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                self._last_call = time.monotonic()

    def _wait_for_idle(self, queued):
        while not self._stopped:
            now = time.monotonic()
            with self._lock:
                idle = self._calls == 0 and now - self._last_call >= self.IDLE
            if idle or now - queued >= self.PATIENCE:
                return
            time.sleep(0.02)

    def submit(self, job):
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="keras_attention-engine-builder")
                self._thread.start()
                atexit.register(self.stop)
        self._jobs.put((time.monotonic(), job))

    def stop(self):
        """Drops the queued builds and waits for the one under way."""
        with self._lock:
            self._stopped = True
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        self._jobs.put(None)
        if self._thread is not None:
            self._thread.join()

    def _run(self):
        while True:
            item = self._jobs.get()
            if item is None:
                return
            try:
                self._wait_for_idle(item[0])
                if not self._stopped:
                    item[1]()
            except Exception:  # noqa: BLE001 - a failed build leaves the eager path
                pass
            finally:
                self._jobs.task_done()

    def wait(self):
        """Waits until every build queued so far is done."""
        if not self._stopped:
            self._jobs.join()


BUILDER = Builder()  # one build at a time, whichever engine asked: the cores answer


def _relaxed_spec(value):
    value = tf.convert_to_tensor(value)
    return tf.TensorSpec([None] * len(value.shape), value.dtype)


class CompiledSteps:
    """The model as the searches see it (`encode`, `initialize_cache`,
    `decode_step`, ...) with `encode` and `decode_step` each compiled as
    one graph for every shape: the eager path of a search runs its loop
    op by op but each decoding step as one call (a long sentence in ~0.3 s
    instead of ~1 s of ~14k eager ops), after a trace of one step (~0.5 s)
    instead of the whole search's (~3.5 s with its instantiation). `wrap`
    runs each compiled function inside what the model needs around it (a
    float32 twin's `precision.reading`, so that the graph reads the
    variables itself)."""

    def __init__(self, model, wrap=None):
        self._model = model
        self._wrap = wrap or (lambda fn: fn)  # e.g. `precision.reading` of a twin
        self._lock = threading.Lock()
        self._step = None
        if _on_jax():  # the search's own `jax.jit` compiles every step
            self._encode, self._step = model.encode, model.decode_step
        else:
            self._encode = tf.function(self._wrap(model.encode), input_signature=[IDS],
                                       autograph=False)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def encode(self, encoder_tokens):
        return self._encode(encoder_tokens)

    def decode_step(self, tokens, index, cache, encoder_padding_mask):
        arguments = (tokens, index, cache, encoder_padding_mask)
        with self._lock:
            if self._step is None:
                self._step = tf.function(
                    self._wrap(self._model.decode_step), autograph=False,
                    input_signature=tf.nest.map_structure(_relaxed_spec, arguments))
        return self._step(*arguments)


class Programs:
    """The compiled forms of one computation, `fn` (a function of int32
    `[B, L]` id tensors made of `keras.ops` on `template`, a model): a
    tf.function graph with one trace for every shape and, with
    `jit_compile`, an XLA program per concrete shape (on JAX one `jax.jit`
    program per shape). Each is a function of `(values, *ids)`: `values`
    the variables `template`'s are read from (a `StatelessScope` maps them),
    so engines of models with one configuration (`shared_programs`: a
    stateless template of it) run the same traces and programs on their
    own weights, and a model's programs follow its weights after `fit` or
    `load_weights` (the reads are the program's own). What has been built
    (`graph_ready`, `xla_ready`) is the programs', whichever engine built
    it."""

    def __init__(self, name, fn, template, num_args, jit_compile=False):
        self.name, self.num_args = name, num_args
        variables = list(template.variables)

        def bound(values, *ids):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return fn(*ids)

        self.bound = bound
        self.jax = self.graph = self.xla = None
        if _on_jax():
            import jax

            self.jax = jax.jit(bound)
        else:
            self.graph = tf.function(bound, autograph=False)
            if jit_compile:
                self.xla = tf.function(bound, autograph=False, jit_compile=True)
        self.graph_ready = threading.Event()
        self.graph_queued = False
        self.xla_ready, self.xla_queued = set(), set()
        self.lock = threading.Lock()

    def concrete(self, kind, values):
        """The `"graph"` or `"xla"` function's one trace for every `[None,
        None]` ids and variables of `values`' shapes (traced now if it is not
        yet): its calls skip the tf.function's dispatch on the arguments'
        types (measured: 3 ms a call for 150 variables)."""
        return getattr(self, kind).get_concrete_function(values, *[IDS] * self.num_args)


# Programs shared by the engines of models of one configuration (issue 69:
# a test process or a Beam worker that loads a model of a known
# configuration runs the traces and XLA programs already built, ~1-4 s each
# on 2 cores): a few recent configurations' stateless templates (no weights)
# and their programs, oldest dropped first. An engine keeps its own Works'
# programs; only their reuse by later engines is bounded.
_TEMPLATES, _PROGRAMS = collections.OrderedDict(), collections.OrderedDict()
_SHARED_LOCK = threading.Lock()
MAX_TEMPLATES, MAX_PROGRAMS = 8, 64


def configuration(model, dtype_policy):
    """What makes the programs of `model` computed in `dtype_policy` (a
    name) the same as another's: its class, its config but the policy, and
    its weights' paths, shapes and dtypes; None where it cannot say (a
    quantized model, a policy map, a config JSON cannot hold). Not its
    name: two loads of one preset are named `transformer`, `transformer_1`."""
    if (not isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicy)
            or isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicyMap)
            or quantization_of(model) is not None):
        return None
    try:
        config = json.dumps({k: v for k, v in model.get_config().items()
                             if k not in ("dtype", "name")}, sort_keys=True)
    except (TypeError, ValueError, NotImplementedError):
        return None
    prefix = f"{model.name}/"  # the model's own name differs between instances
    return (type(model), config, dtype_policy,
            tuple((w.path.removeprefix(prefix), tuple(w.shape), str(w.dtype))
                  for w in model.weights))


def _remember(store, key, make, limit):
    """`store[key]`, made by `make()` if missing (None too: a configuration
    without a template is not tried again); the most recently used last, the
    oldest dropped past `limit`. Under `_SHARED_LOCK`."""
    if key not in store:
        store[key] = make()
        while len(store) > limit:
            store.popitem(last=False)
    store.move_to_end(key)
    return store[key]


def shared_programs(model, dtype_policy, key, make_fn, num_args, jit_compile=False,
                    template=None):
    """The `Programs` of `make_fn(template)` for the work `key` of models of
    `model`'s configuration computed in `dtype_policy`, shared with every
    engine asking for the same; None where `model` has no shareable
    configuration (`configuration`) or no stateless template (LoRA enabled:
    `models.precision.stateless_twin`). `template`: a stateless model of
    that configuration already made (the model's float32 twin), used rather
    than another when the configuration has none yet."""
    config = configuration(model, dtype_policy)
    if config is None:
        return None
    with _SHARED_LOCK:
        template = _remember(_TEMPLATES, config,
                             lambda: template or stateless_twin(model, dtype_policy),
                             MAX_TEMPLATES)
        if template is None:
            return None
        return _remember(
            _PROGRAMS, (config, key),
            lambda: Programs(str(key[0]), make_fn(template), template, num_args, jit_compile),
            MAX_PROGRAMS)


def forget_shared_programs():
    """Drops every shared template and program (engines keep theirs): the
    next engine of any configuration traces and compiles anew."""
    with _SHARED_LOCK:
        _TEMPLATES.clear()
        _PROGRAMS.clear()


class Work:
    """One computation of an engine: its `Programs` run on the engine's
    model's variables, never making a caller wait for a compilation (the
    module's docstring): until the graph is built it runs `eager_fn` (the
    same computation op by op, e.g. over `CompiledSteps`); `build(*args)`
    builds the graph now. `graph(*args)` and `xla(*args)` (None without
    `jit_compile`) run the compiled forms, `fn(*args)` the computation
    itself (in a caller's trace)."""

    def __init__(self, engine, programs, variables, eager_fn):
        self.name, self.programs, self._engine = programs.name, programs, engine
        self.eager_fn = eager_fn
        variables = list(variables)
        if programs.jax is not None:  # JAX: the variables' values of each call
            self._values = lambda: [v.value for v in variables]
        else:  # TensorFlow: the variables themselves; the programs read them
            handles = [v.value for v in variables]
            self._values = lambda: handles
        self._concrete = {}
        self.graph = functools.partial(self._run, "graph")
        self.xla = None if programs.xla is None else functools.partial(self._run, "xla")

    def fn(self, *args):
        return self.programs.bound(self._values(), *args)

    def _run(self, kind, *args):
        if self.programs.jax is not None:
            return self.programs.jax(self._values(), *(np.asarray(a, np.int32) for a in args))
        function = self._concrete.get(kind)
        if function is None:
            function = self._concrete[kind] = self.programs.concrete(kind, self._values())
        return function(self._values(), *args)

    @property
    def ready(self):
        """Whether the graph is built (calls no longer run eagerly)."""
        return self.programs.graph_ready.is_set()

    @property
    def xla_ready(self):
        """The shapes (a tuple of each argument's) whose XLA program is built."""
        return self.programs.xla_ready

    def __call__(self, *args):
        if self.programs.jax is not None:
            self.programs.graph_ready.set()
            return self.graph(*args)
        args = [tf.convert_to_tensor(a, tf.int32) for a in args]
        background = background_enabled()
        if self.xla is not None:
            shape = tuple(tuple(a.shape) for a in args)
            if shape in self.xla_ready or not background:
                return self.run_xla(*args)
            if self.ready:
                self._queue_xla(shape, args)
        with self._engine.builder.calling():
            if self.ready:
                return self.graph(*args)
            if not background:
                return self.build(*args)
            outputs = self.eager_fn(*args)  # op by op: no wait for the whole trace
        self._queue_graph(args)
        return outputs

    def run_xla(self, *args):
        """The XLA program of `args`' shape (compiled now if it is not yet),
        on `args`; the shape is then ready for every later call, in either
        mode: a program compiled by a call in `"wait"` mode (a warm-up) is not
        compiled again, nor passed over for the graph or the eager path."""
        outputs = self.xla(*args)
        self.xla_ready.add(tuple(tuple(a.shape) for a in args))
        return outputs

    def build(self, *args):
        """Builds the graph (traced and instantiated on `args`) and returns
        its outputs on them."""
        if self.programs.jax is not None:
            return self(*args)
        outputs = self.graph(*args)
        self.programs.graph_ready.set()
        return outputs

    def _queue_graph(self, args):
        with self.programs.lock:
            if self.programs.graph_queued:
                return
            self.programs.graph_queued = True
        self._engine.builder.submit(lambda: self.build(*args))

    def _queue_xla(self, shape, args):
        with self.programs.lock:
            if shape in self.programs.xla_queued:
                return
            self.programs.xla_queued.add(shape)

        self._engine.builder.submit(lambda: self.run_xla(*args))


def _on_jax():
    return keras.backend.backend() == "jax"


__all__ = ["BUILDER", "COMPILE_MODES", "IDS", "Builder", "CompiledSteps", "Programs", "Work",
           "background_enabled", "compile_mode", "configuration", "forget_shared_programs",
           "shared_programs"]
