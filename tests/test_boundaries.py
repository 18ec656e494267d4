"""The package's import boundaries (CONTRIBUTING.md, "Architecture"), read
from the source:

- other libraries through their public API only: no `tensorflow.python`,
  `tensorflow_text.python`, `keras.src` or `keras_hub.src` in the package,
  the recipes or the benchmarks, but for the named exceptions of
  `PRIVATE_LIBRARY_EXCEPTIONS`;
- no module imports a private name or module of another package of ours
  (the root's `_io`, `_validation` and `_constants` are the whole package's
  shared internals);
- the recipes, the playground, the heatmaps and the exports reach decoding
  only through the `Translator`: they import no search from
  `keras_attention.decoding`, only its settings and its length penalty;
- no import circle in `keras_attention`, and no import back up: a module
  imports its own floor's package and lower floors only (`FLOORS`);
- `layers/`, `models/` and `decoding/` run on every backend: they import
  TensorFlow, JAX or PyTorch only where `BACKEND_EXCEPTIONS` says why;
- no module of the package or the recipes is over `MAX_MODULE_LINES`
  lines, but the bundled data (`LONG_MODULES`): a longer one mixes concerns.

Every import of a file counts, at module level or inside a function, and a
package's lazy `importlib.import_module(f"keras_attention.data.{...}")`
counts as importing each module of that package.
"""

import ast
import collections
import pathlib

import pytest

pytestmark = pytest.mark.backend_independent

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_INTERNALS = {"keras_attention._io", "keras_attention._validation",
                    "keras_attention._constants", "keras_attention._deprecation",
                    "keras_attention._startup", "keras_attention._jax"}
PRIVATE_LIBRARIES = ("tensorflow.python", "tensorflow_text.python", "keras.src",
                     "keras_hub.src")
# `(file, private name)`: the imports of another library's private modules
# that have no public replacement, each with why. A new one is a conscious
# edit here; one that goes away must be removed here too.
PRIVATE_LIBRARY_EXCEPTIONS = {
    ("keras_attention/data/_tokenizer_base.py",
     "tensorflow_text.python.ops.sentencepiece_tokenizer"):
        "SentencePieceTokenizer's model resource with a shared name: TF Text's own resource "
        "is owned by an eager kernel and dies when the eager caches are cleared "
        "(tf.random.set_seed; TF Text's TODO b/318839908). TF Text exports neither the "
        "resource class nor its SentencepieceOp; its FastSentencepieceTokenizer needs no "
        "resource but tokenizes BPE models differently.",
    ("benchmarks/profile_train_step.py",
     "tensorflow.python.profiler.internal._pywrap_profiler_plugin"):
        "the profile's op statistics: TensorFlow exports no converter from its XSpace "
        "profiles to tables (only TensorBoard's profile plugin, not a dependency).",
}
THROUGH_THE_TRANSLATOR = ("recipes/translation", "keras_attention/playground",
                          "keras_attention/visualization", "keras_attention/export")
DECODING_NAMES_ALLOWED = {"DecodingSettings", "DEFAULTS", "gnmt_length_penalty",
                          "length_penalty", "check_early_stopping"}

# The package's floors, lowest first. A module imports modules of its own
# package (a subpackage, or the one root module it is) and of lower floors,
# never of a higher floor, nor another package of its own floor (packages
# that share a floor are independent). Outside packages (keras, tensorflow)
# are not ours to order; the last floor is everything that uses the package.
FLOORS = (
    # The root's shared internals (constants, atomic file writes, argument
    # checks, the version, TensorFlow's quiet start-up for the commands, JAX's
    # jit over variables): everything uses them, they import nothing of ours.
    ("keras_attention._constants", "keras_attention._deprecation", "keras_attention._io",
     "keras_attention._jax", "keras_attention._startup", "keras_attention._validation",
     "keras_attention.version"),
    # The presets shipped with the package, by name (data and a registry that
    # imports nothing of ours): every `from_preset` resolves names there.
    ("keras_attention.presets",),
    # Backend-agnostic layers (keras.ops): what the models are built of.
    ("keras_attention.layers",),
    # The functional-API Transformer, built from the layers.
    ("keras_attention.models",),
    # Greedy and beam search over a model's KV cache (the model is an
    # argument: decoding needs the layers' slicing, not the builders).
    ("keras_attention.decoding",),
    # The TensorFlow side starts here (tf.data, TF Text tokenizers, TFDS):
    # above layers/models/decoding, which must not need TF Text or TFDS.
    ("keras_attention.data",),
    # The training loop's pieces and sacreBLEU scoring; neither imports the
    # other (the scoring callback takes a scoring function).
    ("keras_attention.training", "keras_attention.evaluation"),
    # Other libraries' models as ours (Hugging Face's Marian / OPUS-MT): a
    # model, tokenizers and settings built from the floors below.
    ("keras_attention.convert",),
    # What the Translator is made of and offers, each taking a model or a
    # translator as an argument (duck typing): the keras-hub task it holds,
    # the SavedModel and CTranslate2 exports, the heatmaps.
    ("keras_attention.hub", "keras_attention.export", "keras_attention.visualization"),
    # The Translator: model, tokenizers and decoding settings in one object;
    # its methods call the floors below.
    ("keras_attention.translation",),
    # The playground: a consumer of a translator (and its web page).
    ("keras_attention.playground",),
    # The facade: `import keras_attention` registers the Keras objects and
    # offers `Translator`; no module of the package imports it. Beside it,
    # the package's command line (`python -m keras_attention`), which runs
    # after it and uses the floors below.
    ("keras_attention", "keras_attention.__main__"),
    # What uses the package; the library never imports them.
    ("recipes", "benchmarks", "tests"),
)
BACKEND_LIBRARIES = ("tensorflow", "jax", "torch")
BACKEND_AGNOSTIC = ("keras_attention/layers/", "keras_attention/models/",
                    "keras_attention/decoding/")
# The modules of BACKEND_AGNOSTIC that import a backend library, with the
# libraries and why (each is called only on its own backend). Every other
# module there uses keras.ops only.
BACKEND_EXCEPTIONS = {
    "keras_attention/layers/dropout_layer.py": (
        {"tensorflow", "jax"},
        "random bits from the backend's own generator: keras.random has no bits op"),
    "keras_attention/layers/_tf_context.py": (
        {"tensorflow"},
        "whether TensorFlow traces for XLA: keras.ops cannot tell"),
    "keras_attention/layers/normalization.py": (
        {"tensorflow"},
        "the fused layer normalization op on TensorFlow outside XLA"),
}


def _module_name(path):
    """`keras_attention.layers.attention` of `keras_attention/layers/attention.py`;
    a package's `__init__.py` is the package itself."""
    module = path.removesuffix(".py").replace("/", ".")
    return module.removesuffix(".__init__")


def _absolute(node, path):
    """The module an `ImportFrom` names, relative imports resolved."""
    if not node.level:
        return node.module
    parts = _module_name(path).split(".")
    if not path.endswith("__init__.py"):
        parts = parts[:-1]  # a module's relative imports start at its package
    parts = parts[: len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _dynamic_import(node):
    """The module of `importlib.import_module("a.b")` (or `"a.b.*"` where an
    f-string picks the module: any module of `a.b`), else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module" and node.args):
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.JoinedStr) and argument.values:
        prefix = argument.values[0]
        if isinstance(prefix, ast.Constant) and prefix.value.endswith("."):
            return prefix.value + "*"
    return None


def _imports(folders=("keras_attention", "recipes")):
    """`(path, module imported, names)` of every import in `folders`, with
    `path` relative to the repository root."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    yield relative, _absolute(node, relative), [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        yield relative, alias.name, []
                elif (module := _dynamic_import(node)) is not None:
                    yield relative, module, []


def _package(module):
    """`keras_attention.layers` of `keras_attention.layers.attention`; the
    root's own modules are the package `keras_attention`."""
    parts = module.split(".")
    if parts[0] != "keras_attention" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 2 or not parts[1].startswith("_") else parts[0]


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _private_library_imports(imports):
    """`{(path, name)}` of the imports of other libraries' private modules,
    each name in full (`from tensorflow import python` is `tensorflow.python`)."""
    found = set()
    for path, module, names in imports:
        for imported in [f"{module}.{name}" for name in names] or [module]:
            if any(imported == p or imported.startswith(p + ".") for p in PRIVATE_LIBRARIES):
                found.add((path, imported))
    return found


def test_other_libraries_through_their_public_api_only():
    found = _private_library_imports(_imports(("keras_attention", "recipes", "benchmarks")))
    new = sorted(found - set(PRIVATE_LIBRARY_EXCEPTIONS))
    assert not new, f"private modules of other libraries (use their public API): {new}"
    gone = sorted(set(PRIVATE_LIBRARY_EXCEPTIONS) - found)
    assert not gone, f"no longer imported, remove from PRIVATE_LIBRARY_EXCEPTIONS: {gone}"


def _private_imports(imports):
    bad = []
    for path, module, names in imports:
        if not module.startswith("keras_attention") or module in SHARED_INTERNALS:
            continue
        importer = _package(_module_name(path))
        target = _package(module)
        if importer == target:
            continue
        private = [n for n in names if _private(n)]
        if private or any(_private(part) for part in module.split(".")[1:]):
            bad.append(f"{path}: from {module} import {', '.join(names)}")
    return bad


def test_no_private_name_of_another_package_of_ours():
    bad = _private_imports(_imports())
    assert not bad, bad


def test_decoding_only_through_the_translator():
    bad = [f"{path}: from {module} import {', '.join(names)}"
           for path, module, names in _imports()
           if path.startswith(THROUGH_THE_TRANSLATOR)
           and module.startswith("keras_attention.decoding")
           and (module != "keras_attention.decoding" or set(names) - DECODING_NAMES_ALLOWED)]
    assert not bad, bad


def _package_modules():
    return {_module_name(p.relative_to(ROOT).as_posix())
            for p in (ROOT / "keras_attention").rglob("*.py")}


def _import_graph(imports, modules):
    """`{module: {modules it imports}}` within `keras_attention`. `from a.b
    import c` imports the module `a.b.c` where that is a module of
    `modules`, else `a.b`; `a.b.*` imports every module of `a.b`. A module
    importing itself is no edge."""
    graph = collections.defaultdict(set)
    for path, module, names in imports:
        importer = _module_name(path)
        if not (importer.split(".")[0] == module.split(".")[0] == "keras_attention"):
            continue
        if module.endswith(".*"):
            targets = {m for m in modules if m.startswith(module[:-1])}
        else:
            targets = {f"{module}.{n}" if f"{module}.{n}" in modules else module
                       for n in names} or {module}
        graph[importer] |= targets - {importer}
    return graph


def _cycles(graph):
    """The import circles of `graph`, each a chain `[a, b, ..., a]` starting
    at its least module: the shortest circle through each module that is on
    one (its strongly connected component has two modules or more)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    chains = set()
    for component in components:
        for start in component:
            paths = collections.deque([[start]])
            while paths:  # breadth first: the shortest way back to `start`
                path = paths.popleft()
                if len(path) > 1 and path[-1] == start:
                    first = path.index(min(path))
                    chains.add(tuple(path[first:-1] + path[:first + 1]))
                    break
                for target in sorted(graph.get(path[-1], set()) & component):
                    if target == start or target not in path:
                        paths.append(path + [target])
    return sorted(list(chain) for chain in chains)


def test_no_import_circle():
    chains = _cycles(_import_graph(_imports(("keras_attention",)), _package_modules()))
    assert not chains, "import circles:\n" + "\n".join(" -> ".join(c) for c in chains)


def _unit(module):
    """What a floor lists: a subpackage of the root (`keras_attention.layers`),
    one of the root's own modules (`keras_attention._io`), the root itself, or
    an outside top-level package (`recipes`, `keras`)."""
    parts = module.split(".")
    if parts[0] != "keras_attention" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def _floor(unit):
    return next((i for i, floor in enumerate(FLOORS) if unit in floor), None)


def _imports_back_up(imports):
    """`path: imports module` for each import of a higher floor or of
    another package of the same floor."""
    bad = []
    for path, module, _ in imports:
        importer, target = _unit(_module_name(path)), _unit(module.removesuffix(".*"))
        here, there = _floor(importer), _floor(target)
        if importer == target or there is None or here is None:
            continue
        if there >= here:
            side = "above" if there > here else "beside"
            bad.append(f"{path}: imports {module} ({target} is {side} {importer})")
    return sorted(set(bad))


def test_no_import_back_up():
    bad = _imports_back_up(_imports(("keras_attention",)))
    assert not bad, "imports back up (see FLOORS):\n" + "\n".join(bad)


MAX_MODULE_LINES = 600
LONG_MODULES = {  # data, not code
    "keras_attention/data/en_es_grammar.py": "the bundled corpus's grammar",
    "keras_attention/data/en_es_words.py": "the bundled corpus's word lists",
}


def test_no_module_is_over_600_lines():
    long = {}
    for folder in ("keras_attention", "recipes"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_MODULE_LINES and name not in LONG_MODULES:
                long[name] = lines
    assert not long, f"split these by concern (at most {MAX_MODULE_LINES} lines): {long}"


def test_every_package_has_a_floor():
    units = {_unit(m) for m in _package_modules()}
    assert not sorted(u for u in units if _floor(u) is None), "add it to FLOORS"
    listed = [u for floor in FLOORS for u in floor]
    assert len(listed) == len(set(listed))


def test_layers_models_and_decoding_run_on_every_backend():
    found = collections.defaultdict(set)
    for path, module, _ in _imports(("keras_attention",)):
        if path.startswith(BACKEND_AGNOSTIC) and module.split(".")[0] in BACKEND_LIBRARIES:
            found[path].add(module.split(".")[0])
    allowed = {path: libraries for path, (libraries, _) in BACKEND_EXCEPTIONS.items()}
    assert dict(found) == allowed, "a new backend import needs its reason in BACKEND_EXCEPTIONS"


def test_the_checks_see_what_they_look_for():
    """The scans read real imports (guards against a walk that finds none),
    and each check catches what it is for."""
    imports = list(_imports())
    assert any(p.startswith("keras_attention/translation") and m == "keras_attention.decoding"
               for p, m, _ in imports)
    assert _package("keras_attention.layers._slices") == "keras_attention.layers"
    assert _package("keras_attention._io") == "keras_attention"
    assert _package("recipes.translation.config") == "recipes"
    # What the playground once imported is caught; a package's own private
    # module and the shared internals are not.
    assert _private_imports([
        ("keras_attention/playground/analysis.py", "keras_attention.translation",
         ["_compiled_search"]),
        ("keras_attention/decoding/beam.py", "keras_attention.layers._slices", ["update_slice"]),
        ("keras_attention/decoding/beam.py", "keras_attention.decoding._loop", ["run_search"]),
        ("keras_attention/export/ctranslate2.py", "keras_attention._io", ["Layout"]),
    ]) == ["keras_attention/playground/analysis.py: from keras_attention.translation import "
           "_compiled_search", "keras_attention/decoding/beam.py: from "
           "keras_attention.layers._slices import update_slice"]
    assert _private_library_imports([
        ("benchmarks/_machine.py", "tensorflow.python.util", ["_pywrap_util_port"]),
        ("keras_attention/a.py", "tensorflow", ["python"]),
        ("keras_attention/a.py", "tensorflow_text", ["SentencepieceTokenizer"]),
    ]) == {("benchmarks/_machine.py", "tensorflow.python.util._pywrap_util_port"),
           ("keras_attention/a.py", "tensorflow.python")}

    # The lazy imports of a package's `__init__` are edges to its modules.
    graph = _import_graph(imports, _package_modules())
    assert "keras_attention.data.pipeline" in graph["keras_attention.data"]
    assert "keras_attention.layers.attention" in graph["keras_attention.layers"]
    # The old translation -> export -> translation circle, and a submodule
    # importing its package's `__init__` for a name that imports from it,
    # are circles; an `__init__` importing its modules, which import each
    # other, is not.
    modules = {"keras_attention.translation", "keras_attention.export",
               "keras_attention.export.saved_model", "keras_attention.decoding",
               "keras_attention.decoding.beam", "keras_attention.decoding.settings"}
    graph = _import_graph([
        ("keras_attention/translation.py", "keras_attention.export", ["export_translator"]),
        ("keras_attention/export/__init__.py", "keras_attention.export.saved_model",
         ["export_translator"]),
        ("keras_attention/export/saved_model.py", "keras_attention.translation", ["Translator"]),
        ("keras_attention/decoding/__init__.py", "keras_attention.decoding", ["beam", "settings"]),
        ("keras_attention/decoding/beam.py", "keras_attention.decoding", ["settings"]),
        ("keras_attention/decoding/beam.py", "keras_attention.decoding.settings", ["DEFAULTS"]),
    ], modules)
    translation_export = ["keras_attention.export", "keras_attention.export.saved_model",
                          "keras_attention.translation", "keras_attention.export"]
    assert _cycles(graph) == [translation_export]
    graph["keras_attention.decoding.settings"].add("keras_attention.decoding")
    assert _cycles(graph) == [
        ["keras_attention.decoding", "keras_attention.decoding.beam",
         "keras_attention.decoding.settings", "keras_attention.decoding"],
        ["keras_attention.decoding", "keras_attention.decoding.settings",
         "keras_attention.decoding"],
        translation_export]

    # Back up: the old root import of the version and export's import of
    # the Translator; beside: one package of a floor importing another.
    assert _imports_back_up([
        ("keras_attention/translation.py", "keras_attention", ["__version__"]),
        ("keras_attention/translation/presets.py", "keras_attention.version", ["__version__"]),
        ("keras_attention/translation/export.py", "keras_attention.export", ["export_translator"]),
        ("keras_attention/export/saved_model.py", "keras_attention.translation", ["Translator"]),
        ("keras_attention/export/saved_model.py", "keras_attention.visualization", ["x"]),
        ("keras_attention/hub/search_sampler.py", "keras_attention.decoding", ["DEFAULTS"]),
        ("keras_attention/layers/masks.py", "recipes.translation.config", ["x"]),
        ("keras_attention/data/__init__.py", "keras_attention.data.*", []),
        ("keras_attention/_io.py", "keras_attention._validation", ["check_bool"]),
    ]) == [
        "keras_attention/_io.py: imports keras_attention._validation "
        "(keras_attention._validation is beside keras_attention._io)",
        "keras_attention/export/saved_model.py: imports keras_attention.translation "
        "(keras_attention.translation is above keras_attention.export)",
        "keras_attention/export/saved_model.py: imports keras_attention.visualization "
        "(keras_attention.visualization is beside keras_attention.export)",
        "keras_attention/layers/masks.py: imports recipes.translation.config "
        "(recipes is above keras_attention.layers)",
        "keras_attention/translation.py: imports keras_attention "
        "(keras_attention is above keras_attention.translation)",
    ]
