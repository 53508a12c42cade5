"""Checks that every public name of every azx package has an entry in the built API reference.

Run after `mkdocs build`: `python tools/check_api_reference.py [SITE_DIR]`. The public
names are read from each package's source, independently of how mkdocstrings collects
them (see `public_names`); each must appear as an anchor `id="<package>.<name>"` on the
package's page, `site/api/<page>/index.html`. Exits 1 listing what is missing.
"""

import ast
import importlib
import sys
import types
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PAGES = {  # package -> its page under site/api/
    "azx": "azx",
    "azx.alphazero": "alphazero",
    "azx.arena": "arena",
    "azx.buffer": "buffer",
    "azx.checkpoint": "checkpoint",
    "azx.envs": "envs",
    "azx.muzero": "muzero",
    "azx.nets": "nets",
    "azx.parallel": "parallel",
    "azx.ppo": "ppo",
    "azx.presets": "presets",
    "azx.run": "run",
    "azx.search": "search",
    "azx.explore": "explore",
}


def public_names(package: str) -> list[str]:
    """The names a package's source declares public: top-level classes, functions and
    assignments without a leading underscore, and re-exports written as `import x as x`
    (the convention for an explicit re-export; a plain import is for the module's own use).
    """
    path = ROOT / Path(*package.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = []
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname == alias.name and not _is_module(package, node, alias.name):
                    names.append(alias.name)
    return [name for name in names if name and not name.startswith("_")]


def _is_module(package: str, node: ast.ImportFrom, name: str) -> bool:
    """Whether `from .x import name as name` re-exports a subpackage (it has its own page)."""
    base = importlib.import_module(package)
    return isinstance(getattr(base, name, None), types.ModuleType)


def main() -> int:
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site"
    if not (site / "api").is_dir():
        print(f"no API reference under {site}/api: run `mkdocs build` first", file=sys.stderr)
        return 1
    missing, total = [], 0
    for package, page in PAGES.items():
        html = (site / "api" / page / "index.html").read_text()
        for name in public_names(package):
            total += 1
            if f'id="{package}.{name}"' not in html:
                missing.append(f"{package}.{name} (page api/{page}/)")
    for entry in missing:
        print(f"missing from the API reference: {entry}", file=sys.stderr)
    print(f"{total - len(missing)} of {total} public names have a reference entry")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
