"""`bundle`: the page's modules as one classic script for the one-file
export, and a clear error for each kind of module it cannot bundle."""

import pytest

from keras_attention.playground.bundle import bundle
from keras_attention.playground.server import STATIC_DIR

pytestmark = pytest.mark.backend_independent


def test_the_page_bundles_dependencies_first():
    script = bundle(STATIC_DIR, "playground.js")
    order = [line.split("'")[1] for line in script.splitlines() if line.startswith("modules['")]
    assert order[:2] == ["shared.js", "state.js"] and order[-1] == "playground.js"
    assert "import {" not in script and "\nexport " not in script


@pytest.mark.parametrize("files, message", [
    ({"a.js": 'import { x } from "./b.js";\n', "b.js": 'import { y } from "./a.js";\n'
      "export const y = 1;\n"}, r"in a circle \(a.js -> b.js -> a.js\)"),
    ({"a.js": 'import { x } from "./a.js";\nexport const x = 1;\n'}, r"a.js -> a.js"),
    ({"a.js": 'import { x } from "./b.js";\n', "b.js": "export const y = 1;\n"},
     r"a.js imports \['x'\] from b.js, which does not export them"),
    ({"a.js": 'import { x } from "./missing.js";\n'}, r"missing.js does not exist"),
    ({"a.js": 'import { x as z } from "./b.js";\n', "b.js": "export const x = 1;\n"},
     r"plain names \(no `as`\)"),
    ({"a.js": "const x = 1;\nexport default x;\n"}, r"a.js, line 2: 'export default x;'"),
    ({"a.js": 'import * as b from "./b.js";\n'}, r"a.js, line 1: 'import \* as b"),
    ({"a.js": "let x = 1;\nexport let y = 2;\n"}, r"line 2: 'export let y = 2;'"),
])
def test_what_it_cannot_bundle_is_named(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        bundle(str(tmp_path), "a.js")
