"""The shape of azx's imports, read from the source with `ast` (nothing is imported): no
import circle among azx's modules, no algorithm package importing another and PPO nothing
of the search, directly or through the modules they import.

Every import counts, at module level or inside a function: an import deferred into a
function still ties the two modules together, it only hides the circle from the
interpreter. `import a.b` and `from a import b` are edges to the module `a.b` when it is
one of azx's modules, else to `a`. A package stands for its `__init__.py`; importing a
submodule is not counted as an import of the packages above it, so a package's
`__init__` that re-exports its submodules is not a circle by itself, but a submodule that
imports its own package back is.
"""

import ast
import collections
import pathlib

import pytest


_AZX = pathlib.Path(__file__).resolve().parent.parent / "azx"
_ALGORITHMS = ("azx.alphazero", "azx.muzero", "azx.ppo")


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Every module of azx: its dotted name, its file and whether it is a package."""
    modules = {}
    for path in sorted(_AZX.rglob("*.py")):
        parts = path.relative_to(_AZX.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = (path, is_package)
    return modules


_MODULES = _modules()


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _module_of(dotted: str) -> str | None:
    """The longest prefix of `dotted` that is one of azx's modules."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in _MODULES:
            return prefix
    return None


def _imports(name: str) -> set[str]:
    """The azx modules that module `name` imports."""
    path, is_package = _MODULES[name]
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(_module_of(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in _MODULES else _module_of(base))
    targets.discard(None)
    return targets


_GRAPH = {name: _imports(name) for name in _MODULES}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The shortest circle through each module that is on one, each written once from its
    first module (Tarjan's algorithm for the strongly connected components, breadth-first
    search within them for the circles)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)

    circles = set()
    for component in components:
        for member in component:
            circle = _shortest_circle(graph, component, member)[:-1]
            first = circle.index(min(circle))
            circles.add(tuple(circle[first:] + circle[:first] + [circle[first]]))
    return sorted(map(list, circles))


def _shortest_circle(graph: dict[str, set[str]], component: set[str], start: str) -> list[str]:
    """A shortest circle from `start` back to itself within `component`."""
    parents, queue = {start: None}, collections.deque([start])
    while True:
        node = queue.popleft()
        if start in graph[node]:
            circle = [node]
            while parents[circle[0]] is not None:
                circle.insert(0, parents[circle[0]])
            return [*circle, start]
        for target in sorted(graph[node] & component):
            if target not in parents:
                parents[target] = node
                queue.append(target)


def test_reader_sees_the_library():
    # Guards the reader itself: the package, its subpackages and the edges they re-export.
    assert "azx" in _MODULES and "azx.ppo._trainer" in _MODULES
    assert "azx.ppo._trainer" in _GRAPH["azx.ppo"]
    assert "azx.envs" in _GRAPH["azx.ppo._evaluate"]


def test_circles_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"d"}, "e": {"a"}}
    assert _circles(graph) == [["a", "b", "c", "a"], ["d", "d"]]


def test_no_import_circle():
    circles = _circles(_GRAPH)
    assert not circles, "import circles among azx's modules:\n" + "\n".join(
        " -> ".join(circle) for circle in circles
    )


def _chain_into(package: str, forbidden: tuple[str, ...]) -> list[str] | None:
    """A shortest chain of imports from a module of `package` to a module within one of
    `forbidden`, directly or through other modules; None if there is none."""
    starts = sorted(name for name in _MODULES if _within(name, package))
    parents = dict.fromkeys(starts)
    queue = collections.deque(starts)
    while queue:
        node = queue.popleft()
        if any(_within(node, other) for other in forbidden):
            chain = [node]
            while parents[chain[0]] is not None:
                chain.insert(0, parents[chain[0]])
            return chain
        for target in sorted(_GRAPH[node]):
            if target not in parents:
                parents[target] = node
                queue.append(target)
    return None


@pytest.mark.parametrize("algorithm", _ALGORITHMS)
def test_algorithm_packages_stand_apart(algorithm):
    # Not even through common modules: what the algorithms share lives outside them.
    others = tuple(other for other in _ALGORITHMS if other != algorithm)
    chain = _chain_into(algorithm, others)
    assert chain is None, " -> ".join(chain)


def test_ppo_imports_nothing_from_search():
    chain = _chain_into("azx.ppo", ("azx.search",))
    assert chain is None, " -> ".join(chain)


def test_chains_found():
    chain = _chain_into("azx.muzero", ("azx.search",))
    assert _within(chain[0], "azx.muzero") and _within(chain[-1], "azx.search")
    assert all(target in _GRAPH[name] for name, target in zip(chain, chain[1:]))
