"""Every search's outputs over several moves, saved, so that a change to the search can be
checked bit for bit against the code before it.

    python -m benchmarks.search_identity save PATH.npz     # on the code before
    python -m benchmarks.search_identity check PATH.npz    # on the code after
    python -m benchmarks.search_identity check PATH.npz --backend unrolled
    python -m benchmarks.search_identity save-hlo PATH.json
    python -m benchmarks.search_identity check-hlo PATH.json

For tic-tac-toe, connect four and othello, each search variant (PUCT and Gumbel, with and
without tree reuse, each backend, small capacities and depth limits, the tree
normalisation, the mctx backend) plays five moves from eight starting positions with a
fixed MLP; after each move the action, policy target, root value and every array of the
tree (after `advance`) are saved. `check` recomputes them and reports any array that is not
byte-identical (the reference backend's variants against the lockstep backend's arrays).
With `--backend NAME`, every native variant (chance nodes and MuZero's learned model
included) searches with that backend instead of its own, against the arrays saved with
its own: every backend must give the same arrays.

`save-hlo` and `check-hlo` compare what XLA compiles instead: for PUCT and Gumbel, with and
without reuse, at connect four and go 9x9 (batch 256, 64 simulations, the search
benchmark's MLP), the number of instructions of each opcode in the optimised program. A
change that leaves them equal leaves the search's speed where it was, which a timing on a
shared machine cannot show as precisely.
"""

import argparse
import collections
import dataclasses
import json
import re
import sys

import equinox as eqx
import jax
import numpy as np

import azx
from azx import search


GAMES = ("tic_tac_toe", "connect_four", "othello", "2048", "backgammon")
#: The games with chance: searched by the chance variants below, not the others.
CHANCE_GAMES = ("2048", "backgammon")
#: The games whose roots MuZero's learned model is searched from.
MUZERO_GAMES = ("tic_tac_toe", "2048")
BATCH = 8
MOVES = 5
SIMULATIONS = 16


def _variants() -> dict:
    """Each variant as (class name, options) for `azx.search.make`: the parts' options flat,
    the search's own by name."""
    row, lockstep = search.RowBackend(), search.LockstepBackend()
    reference = search.ReferenceBackend()
    by_tree = search.QByTree()
    return {
        "puct": ("PUCT", {}),
        "puct-reuse": ("PUCT", {"reuse_tree": True}),
        "puct-row": ("PUCT", {"backend": row}),
        "puct-row-reuse": ("PUCT", {"backend": row, "reuse_tree": True}),
        "puct-lockstep": ("PUCT", {"backend": lockstep}),
        "puct-lockstep-reuse": ("PUCT", {"backend": lockstep, "reuse_tree": True}),
        "puct-reference-reuse": ("PUCT", {"backend": reference, "reuse_tree": True}),
        "puct-tree-q": ("PUCT", {"qtransform": by_tree, "gamma": 0.9}),
        "puct-capacity-5": ("PUCT", {"capacity": 5, "reuse_tree": True}),
        "puct-depth-2": ("PUCT", {"max_depth": 2}),
        "puct-greedy": ("PUCT", {"temperature": 0.0, "dirichlet_fraction": 0.0}),
        "puct-all-leaves": ("PUCT", {"store_all_state_leaves": True}),
        "gumbel": ("Gumbel", {}),
        "gumbel-reuse": ("Gumbel", {"reuse_tree": True}),
        "gumbel-row": ("Gumbel", {"backend": row}),
        "gumbel-lockstep-reuse": ("Gumbel", {"backend": lockstep, "reuse_tree": True}),
        "gumbel-reference-reuse": ("Gumbel", {"backend": reference, "reuse_tree": True}),
        "gumbel-mctx-order": ("Gumbel", {"reorder_rounds": False}),
        "gumbel-tree-q": ("Gumbel", {"qtransform": by_tree, "reuse_tree": True}),
        "gumbel-visits": ("Gumbel", {"visit_count_target": True}),
        "gumbel-capacity-9": ("Gumbel", {"capacity": 9, "max_num_considered_actions": 4}),
        "gumbel-depth-2": ("Gumbel", {"max_depth": 2, "gumbel_scale": 0.0}),
        "mctx-puct": ("MctxPUCT", {}),
        "mctx-puct-tree-q": ("MctxPUCT", {"qtransform": by_tree}),
        "mctx-gumbel": ("MctxGumbel", {}),
        "mctx-gumbel-tree-q": ("MctxGumbel", {"qtransform": by_tree}),
    }


def _chance_variants() -> dict:
    """The variants for a game with chance: chance nodes (reused or not), sampled
    outcomes, and mctx's stochastic policies."""
    return {
        "chance-puct": ("PUCT", {}),
        "chance-puct-reuse": ("PUCT", {"reuse_tree": True}),
        "chance-puct-sampled": ("PUCT", {"chance_nodes": False}),
        "chance-gumbel": ("Gumbel", {}),
        "chance-gumbel-reuse": ("Gumbel", {"reuse_tree": True}),
        "chance-mctx-puct": ("MctxPUCT", {}),
        # mctx's stochastic policy is PUCT only: its Gumbel policy samples the outcomes.
        "chance-mctx-gumbel-sampled": ("MctxGumbel", {"chance_nodes": False}),
    }


def _muzero_variants() -> dict:
    """The variants searching MuZero's learned model (a new tree every move)."""
    by_tree = search.QByTree()
    return {
        "muzero-puct": ("PUCT", {}),
        "muzero-puct-tree-q": ("PUCT", {"qtransform": by_tree, "gamma": 0.997}),
        "muzero-gumbel": ("Gumbel", {}),
        "muzero-mctx-puct": ("MctxPUCT", {}),
        "muzero-mctx-gumbel": ("MctxGumbel", {}),
    }


#: Variants whose saved arrays are another variant's: the reference backend must give what
#: the lockstep backend gave (and did before it existed).
SAME_AS = {
    "puct-reference-reuse": "puct-lockstep-reuse",
    "gumbel-reference-reuse": "gumbel-lockstep-reuse",
}


def _saved_key(key: str) -> str:
    game, name, rest = key.split("/", 2)
    return f"{game}/{SAME_AS.get(name, name)}/{rest}"


def _tree_arrays(tree) -> dict[str, np.ndarray]:
    """The tree's arrays by name: native trees through their named statistics."""
    if not isinstance(tree, search.Tree):
        return {}
    names = ("value", "visits", "raw_value", "reward", "discount", "parent")
    names += ("action_from_parent", "children", "edge_visits", "edge_q", "selection_prior")
    names += ("state_words", "num_nodes")
    return {name: np.asarray(getattr(tree, name)) for name in names}


#: The backend part every native variant searches with, by `--backend`'s name.
BACKENDS = {
    "row": search.RowBackend,
    "lockstep": search.LockstepBackend,
    "reference": search.ReferenceBackend,
    "unrolled": search.UnrolledBackend,
}
_OVERRIDE: list[search.AbstractBackend] = []  # `--backend`'s, when given


def _searcher(cls_name: str, options: dict) -> search.AbstractSearch:
    algo = "puct" if cls_name.endswith("PUCT") else "gumbel"
    backend = "mctx" if cls_name.startswith("Mctx") else "native"
    options = dict(options)
    part = options.pop("backend", None)  # the native search's backend part, not make's name
    if backend == "native" and _OVERRIDE:
        part = _OVERRIDE[0]
    searcher = search.make(algo, SIMULATIONS, backend=backend, **options)
    if part is not None:
        searcher = dataclasses.replace(searcher, backend=part)
    return searcher


def _step(env, state, action, key):
    """One move of each row, and the chance outcome that followed it (a game with chance
    is stepped as its afterstate and a sampled outcome, which `advance` needs)."""
    keys = jax.random.split(key, BATCH)
    if not isinstance(env, azx.envs.AbstractChanceEnv):
        return jax.vmap(env.step)(state, action, keys), None
    after = jax.vmap(env.afterstate)(state, action)
    outcome = jax.vmap(env.sample_outcome)(after, keys)
    return jax.vmap(env.apply_outcome)(after, outcome), outcome


def _save(out: dict, prefix: str, result) -> None:
    out[f"{prefix}/action"] = np.asarray(result.action)
    out[f"{prefix}/policy_target"] = np.asarray(result.policy_target)
    out[f"{prefix}/root_value"] = np.asarray(result.root_value)
    for array_name, array in _tree_arrays(result.tree).items():
        out[f"{prefix}/tree/{array_name}"] = array


def run(game: str, name: str, cls_name: str, options: dict) -> dict[str, np.ndarray]:
    env = azx.envs.make(game)
    net = azx.nets.MLP(env.observation_shape, env.num_actions, key=jax.random.key(1))
    searcher = _searcher(cls_name, options)
    keys = jax.random.split(jax.random.key(2), BATCH)
    state = jax.vmap(env.init)(keys)
    tree = searcher.init(env, BATCH)

    @eqx.filter_jit
    def move(tree, state, key):
        search_key, step_key, row_key = jax.random.split(key, 3)
        # Alternate one key for the batch and one key per row.
        output = searcher(net, env, tree, state, key=search_key)
        rows = searcher(net, env, output.tree, state, key=jax.random.split(row_key, BATCH))
        child, outcome = _step(env, state, output.action, step_key)
        done = jax.vmap(env.terminated)(child) | jax.vmap(env.truncated)(child)
        return output, rows, searcher.advance(output.tree, output.action, done, outcome), child

    out = {}
    key = jax.random.key(3)
    for index in range(MOVES):
        key, move_key = jax.random.split(key)
        output, rows, tree, state = move(tree, state, move_key)
        for label, result in (("one-key", output), ("row-keys", rows)):
            _save(out, f"{game}/{name}/{index}/{label}", result)
        for array_name, array in _tree_arrays(tree).items():
            out[f"{game}/{name}/{index}/advanced/{array_name}"] = array
    return out


def run_muzero(game: str, name: str, cls_name: str, options: dict) -> dict[str, np.ndarray]:
    """Five moves of `azx.muzero.search_states` over fixed learned models (scalar heads,
    and categorical heads of support 10), the true game stepping the roots."""
    env = azx.envs.make(game)
    searcher = _searcher(cls_name, options)
    nets = {
        "scalar": azx.muzero.mlp_net(env.observation_shape, env.num_actions, key=jax.random.key(1)),
        "support": azx.muzero.mlp_net(
            env.observation_shape, env.num_actions, support_size=10, key=jax.random.key(4)
        ),
    }
    out = {}
    for label, net in nets.items():

        @eqx.filter_jit
        def move(state, key, net=net):
            search_key, step_key = jax.random.split(key)
            keys = jax.random.split(search_key, BATCH)
            output = azx.muzero.search_states(searcher, net, env, state, key=keys)
            return output, _step(env, state, output.action, step_key)[0]

        state = jax.vmap(env.init)(jax.random.split(jax.random.key(2), BATCH))
        key = jax.random.key(3)
        for index in range(MOVES):
            key, move_key = jax.random.split(key)
            output, state = move(state, move_key)
            _save(out, f"{game}/{name}/{index}/{label}", output)
    return out


KEY = jax.random.key(0)
#: An instruction of an HLO module's text, its opcode captured.
INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%\S+ = .*? ([\w-]+)\(", re.M)


def compiled_opcodes() -> dict[str, dict[str, int]]:
    """Each compiled search's instructions, counted by opcode."""
    from benchmarks.search import root_states

    counts = {}
    for game in ("connect_four", "go_9x9"):
        env = azx.envs.make(game)
        net = azx.nets.MLP(env.observation_shape, env.num_actions, width=128, depth=2, key=KEY)
        states = root_states(env, 256, 4, jax.random.key(1))
        for algo in ("puct", "gumbel"):
            for reuse in (False, True):
                searcher = search.make(algo, 64, reuse_tree=reuse)

                def call(tree, states, key, searcher=searcher):
                    return searcher(net, env, tree, states, key=key)

                tree = searcher.init(env, 256)
                compiled = jax.jit(call).lower(tree, states, jax.random.key(2)).compile()
                opcodes = re.findall(
                    r"^\s*(?:ROOT )?%\S+ = \S+ ([\w-]+)\(", compiled.as_text(), re.M
                )
                counts[f"{game}/{algo}/reuse={reuse}"] = dict(collections.Counter(opcodes))
                print(f"{game} {algo} reuse={reuse}: {len(opcodes)} instructions", flush=True)
    return counts


def _hlo(mode: str, path: str) -> int:
    counts = compiled_opcodes()
    if mode == "save-hlo":
        with open(path, "w") as file:
            json.dump(counts, file, indent=1, sort_keys=True)
        return 0
    with open(path) as file:
        saved = json.load(file)
    differing = [name for name in counts if saved.get(name) != counts[name]]
    for name in differing:
        old, new = collections.Counter(saved.get(name, {})), collections.Counter(counts[name])
        print(f"differs: {name}: more {dict(new - old)}, fewer {dict(old - new)}")
    print(f"{len(counts) - len(differing)} of {len(counts)} compiled searches with equal opcodes")
    return 1 if differing else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("save", "check", "save-hlo", "check-hlo"))
    parser.add_argument("path")
    parser.add_argument("--games", nargs="*", default=list(GAMES))
    parser.add_argument("--variants", nargs="*", default=None)
    parser.add_argument(
        "--backend", choices=sorted(BACKENDS), help="every native variant's backend (check)"
    )
    args = parser.parse_args(argv)
    if args.backend is not None:
        if args.mode != "check":
            parser.error("--backend checks another backend against saved arrays: mode check")
        _OVERRIDE.append(BACKENDS[args.backend]())
    if args.mode.endswith("-hlo"):
        return _hlo(args.mode, args.path)
    arrays = {}
    for game in args.games:
        variants = _chance_variants() if game in CHANCE_GAMES else _variants()
        jobs = [(run, name, variants[name]) for name in variants]
        if game in MUZERO_GAMES:
            jobs += [(run_muzero, name, v) for name, v in _muzero_variants().items()]
        for function, name, variant in jobs:
            if args.variants and name not in args.variants:
                continue
            arrays |= function(game, name, *variant)
            # Every variant compiles its own programs; dropping them keeps one process
            # from running out of memory for compiled code.
            jax.clear_caches()
            print(f"{game} {name}: done", flush=True)
        if args.mode == "save":  # after each game, so that a long run keeps what it did
            np.savez_compressed(args.path, **arrays)
            print(f"saved {len(arrays)} arrays to {args.path}", flush=True)
    if args.mode == "save":
        return 0
    saved = np.load(args.path)
    differing = []
    for key, array in arrays.items():
        old = _saved_key(key)
        if old not in saved or saved[old].dtype != array.dtype or saved[old].shape != array.shape:
            differing.append(key)
        elif saved[old].tobytes() != array.tobytes():
            differing.append(key)
    for key in differing:
        print(f"differs: {key}")
    print(f"{len(arrays) - len(differing)} of {len(arrays)} arrays byte-identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
