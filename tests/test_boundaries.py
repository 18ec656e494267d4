"""The package's import boundaries (DESIGN.md), read from the source:

- other libraries through their public API only: no `tensorflow.python`,
  `keras.src` or `keras_hub.src`;
- no module imports a private name or module of another package of ours
  (the root's `_io`, `_validation` and `_constants` are the whole package's
  shared internals);
- the recipes, the playground, the heatmaps and the exports reach decoding
  only through the `Translator`: they import no search from
  `keras_attention.decoding`, only its settings and its length penalty.
"""

import ast
import pathlib

import pytest

pytestmark = pytest.mark.backend_independent

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_INTERNALS = {"keras_attention._io", "keras_attention._validation",
                    "keras_attention._constants"}
PRIVATE_LIBRARIES = ("tensorflow.python", "keras.src", "keras_hub.src")
THROUGH_THE_TRANSLATOR = ("recipes/translation", "keras_attention/playground",
                          "keras_attention/visualization", "keras_attention/export")
DECODING_NAMES_ALLOWED = {"DecodingSettings", "DEFAULTS", "gnmt_length_penalty",
                          "check_early_stopping"}


def _imports():
    """`(path, module imported, names)` of every import in the package and
    the recipes, with `path` relative to the repository root."""
    for folder in ("keras_attention", "recipes"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    yield relative, node.module, [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        yield relative, alias.name, []


def _package(module):
    """`keras_attention.layers` of `keras_attention.layers.attention`; the
    root's own modules are the package `keras_attention`."""
    parts = module.split(".")
    if parts[0] != "keras_attention" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 2 or not parts[1].startswith("_") else parts[0]


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def test_other_libraries_through_their_public_api_only():
    found = {(path, module) for path, module, _ in _imports()
             if module.startswith(PRIVATE_LIBRARIES)}
    assert not found, sorted(found)


def _private_imports(imports):
    bad = []
    for path, module, names in imports:
        if not module.startswith("keras_attention") or module in SHARED_INTERNALS:
            continue
        importer = _package(path[:-3].replace("/", ".").removesuffix(".__init__"))
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


def test_the_checks_see_what_they_look_for():
    """The scan reads real imports (guards against a walk that finds none)."""
    imports = list(_imports())
    assert ("keras_attention/translation.py", "keras_attention.decoding") in {
        (p, m) for p, m, _ in imports}
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
