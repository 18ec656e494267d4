"""The page's JavaScript modules (static/*.js, ES modules the server sends
as they are) as one classic script, for the self-contained export
(`html.attention_html`): a file opened from disk or shown in a notebook
cannot fetch its modules.

The modules keep to a subset of the module syntax that this bundler checks
rather than guesses at: `import { a, b } from "./file.js";` (named imports of
sibling files) and `export function|const|class NAME` (named exports), with
no import cycle. Each module becomes a function run once, in the order a
browser evaluates them (dependencies first), whose exports are the object it
returns; anything else is a ValueError that names the file and the line.
"""

import os
import re

_IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([A-Za-z0-9_-]+\.js)";[ \t]*$', re.M)
_EXPORT = re.compile(r"^export (function|const|class) ([A-Za-z_$][\w$]*)", re.M)
_MODULE_SYNTAX = re.compile(r"^(import|export)\b.*$", re.M)
_NAME = re.compile(r"^[A-Za-z_$][\w$]*$")


def _parse(folder, name):
    """`(imports {file: [names]}, exports [names], body)` of one module."""
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise ValueError(f"{path} does not exist: a module imports it.")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    imports = {}
    for match in _IMPORT.finditer(text):
        names = [n.strip() for n in match.group(1).split(",") if n.strip()]
        bad = [n for n in names if not _NAME.match(n)]
        if bad:
            raise ValueError(f"{name}: import {{ {match.group(1).strip()} }} names {bad}; "
                             "the bundler takes plain names (no `as`).")
        imports.setdefault(match.group(2), []).extend(names)
    body = _IMPORT.sub("", text)
    exports = [m.group(2) for m in _EXPORT.finditer(body)]
    body = _EXPORT.sub(r"\1 \2", body)
    other = _MODULE_SYNTAX.search(body)
    if other:
        line = text[:text.index(other.group(0))].count("\n") + 1
        raise ValueError(f"{name}, line {line}: {other.group(0)!r} is module syntax the "
                         'bundler does not take; use import { a, b } from "./file.js"; and '
                         "export function|const|class NAME.")
    return imports, exports, body


def bundle(folder, entry):
    """The modules reachable from `entry` (a file name in `folder`) as one
    classic script (a str) that runs them as the browser would."""
    modules, order, visiting = {}, [], []

    def visit(name):
        if name in visiting:
            cycle = " -> ".join(visiting[visiting.index(name):] + [name])
            raise ValueError(f"The modules import each other in a circle ({cycle}); the "
                             "bundler (and the page's design) needs an import tree.")
        if name in modules:
            return
        visiting.append(name)
        modules[name] = _parse(folder, name)
        for dependency in modules[name][0]:
            visit(dependency)
        visiting.pop()
        order.append(name)

    visit(entry)
    parts = ["(function () {", '"use strict";', "var modules = {};"]
    for name in order:
        imports, exports, body = modules[name]
        lines = []
        for dependency, names in imports.items():
            missing = sorted(set(names) - set(modules[dependency][1]))
            if missing:
                raise ValueError(f"{name} imports {missing} from {dependency}, which does not "
                                 "export them.")
            lines.append(f"const {{ {', '.join(names)} }} = modules[{dependency!r}];")
        exported = ", ".join(f"{n}: {n}" for n in exports)
        parts.append(f"modules[{name!r}] = (function () {{\n\"use strict\";\n"
                     + "\n".join(lines) + "\n" + body.strip("\n")
                     + f"\nreturn {{ {exported} }};\n}})();")
    parts.append("})();")
    return "\n".join(parts) + "\n"
