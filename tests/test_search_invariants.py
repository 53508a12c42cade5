"""Properties every search must keep, on random positions (hypothesis), and the interface:
one compile, configuration errors, the mctx backend behind the same calls."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tiers import slow_repeats
from hypothesis import given, settings, strategies as st
from test_search_common import RewardChain, assert_trees_equal, mlp, random_positions

import azx
from azx.search import (
    PUCT,
    UNVISITED,
    AbstractSearch,
    Gumbel,
    GumbelRule,
    LockstepBackend,
    MctxGumbel,
    MctxPUCT,
    PlatformBackend,
    PUCTRoot,
    PUCTRule,
    QByTree,
    ReferenceBackend,
    RowBackend,
    SearchOutput,
    SequentialHalving,
    Tree,
    UnrolledBackend,
    make,
)


BATCH = 4
SIMULATIONS = 24
ENV = azx.envs.make("connect_four")
NET = mlp(ENV, seed=5)

# Small capacities force the "tree is full" path: leaves are evaluated, not stored.
SEARCHES = {
    "puct": PUCT(SIMULATIONS, reuse_tree=True),
    "puct-capacity-5": PUCT(SIMULATIONS, capacity=5, reuse_tree=True),
    "gumbel": Gumbel(
        SIMULATIONS, reuse_tree=True, root_policy=SequentialHalving(max_num_considered_actions=4)
    ),
    "gumbel-capacity-3-depth-2": Gumbel(SIMULATIONS, capacity=3, max_depth=2, reuse_tree=True),
}


@eqx.filter_jit
def _move(search, tree, states, key):
    """One search, the move it chose, and the tree advanced along it."""
    output = search(NET, ENV, tree, states, key=key)
    done_key, step_key = jax.random.split(key)
    keys = jax.random.split(step_key, BATCH)
    next_states = jax.vmap(ENV.step)(states, output.action, keys)
    done = jax.vmap(ENV.terminated)(next_states)
    return output, search.advance(output.tree, output.action, done), next_states


def _check_tree(tree: Tree, search):
    num_nodes = np.asarray(tree.num_nodes)
    assert np.all((1 <= num_nodes) & (num_nodes <= search.capacity))
    for b in range(BATCH):
        n = int(num_nodes[b])
        children = np.asarray(tree.children[b, :n])
        assert np.all((children == UNVISITED) | ((children > 0) & (children < n)))
        parent = np.asarray(tree.parent[b, :n])
        action = np.asarray(tree.action_from_parent[b, :n])
        legal = np.asarray(tree.legal_action_mask[b, :n])
        visits = np.asarray(tree.visits[b, :n])
        terminal = np.asarray(tree.terminal[b, :n])
        for node in range(1, n):
            assert 0 <= parent[node] < node
            assert children[parent[node], action[node]] == node
            assert legal[parent[node], action[node]], "an illegal move was stored"
        assert np.all(visits >= 1)
        # A node's visits are its own evaluation plus its children's, and more only when
        # leaves could not be stored (full tree), a terminal node was revisited, or the
        # depth limit stopped the descent at it.
        child_visits = np.where(children == UNVISITED, 0, visits[np.maximum(children, 0)])
        below = 1 + child_visits.sum(axis=1)
        assert np.all(visits >= below)
        if n < search.capacity and search.max_depth is None:  # never full, no depth limit
            np.testing.assert_array_equal(visits[~terminal], below[~terminal])


# The slow tier repeats the check on trees that fill up.
@pytest.mark.parametrize(
    "name", slow_repeats(sorted(SEARCHES), {"puct-capacity-5", "gumbel-capacity-3-depth-2"})
)
@settings(max_examples=3, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**16))
def test_invariants_over_several_moves(name, seed):
    search = SEARCHES[name]
    states = random_positions(ENV, jax.random.key(seed), BATCH, max_moves=30)
    tree = search.init(ENV, BATCH)
    for move in range(3):
        reused = np.asarray(tree.visits[:, 0]) * (np.asarray(tree.num_nodes) > 0)
        output, tree_after, next_states = _move(search, tree, states, jax.random.key(seed + move))
        legal = np.asarray(jax.vmap(ENV.legal_action_mask)(states))
        terminal = np.asarray(jax.vmap(ENV.terminated)(states))
        action = np.asarray(output.action)
        assert np.all(legal[np.arange(BATCH), action]), "an illegal action was chosen"
        target = np.asarray(output.policy_target)
        assert np.all(target[~legal] == 0)
        np.testing.assert_allclose(target.sum(axis=1), 1.0, rtol=1e-5)
        # Root visits: the simulations plus what was reused (a fresh root counts itself).
        root_visits = np.asarray(output.tree.visits[:, 0])
        np.testing.assert_array_equal(root_visits, np.maximum(reused, 1) + SIMULATIONS)
        assert np.all(np.isfinite(np.asarray(output.root_value)))
        _check_tree(output.tree, search)
        tree, states = tree_after, next_states
        if terminal.all():
            break


def test_full_tree_keeps_searching_without_writing_out_of_bounds():
    # Capacity 2: the root and one child. Every other leaf is evaluated and backed up only.
    search = PUCT(16, capacity=2, root_policy=PUCTRoot(dirichlet_fraction=0.0))
    states = random_positions(ENV, jax.random.key(0), BATCH, max_moves=4)
    output, _, _ = _move(search, search.init(ENV, BATCH), states, jax.random.key(1))
    assert output.tree.visits.shape == (BATCH, 2)
    np.testing.assert_array_equal(np.asarray(output.tree.num_nodes), 2)
    np.testing.assert_array_equal(np.asarray(output.tree.visits[:, 0]), 17)


def test_one_compile_for_many_searches():
    search = Gumbel(8, reuse_tree=True)

    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def move(tree, states, key):
        output = search(NET, ENV, tree, states, key=key)
        return output, search.advance(output.tree, output.action, jnp.zeros(BATCH, bool))

    tree = search.init(ENV, BATCH)
    for seed in range(3):
        states = random_positions(ENV, jax.random.key(seed), BATCH, max_moves=6)
        _, tree = move(tree, states, jax.random.key(seed))


@pytest.mark.parametrize("cls", [MctxPUCT, MctxGumbel])
def test_mctx_backend_behind_the_same_interface(cls):
    search = make("puct" if cls is MctxPUCT else "gumbel", 8, backend="mctx")
    assert isinstance(search, cls) and isinstance(search, AbstractSearch)
    states = random_positions(ENV, jax.random.key(0), BATCH, max_moves=6)
    output, tree, _ = _move(search, search.init(ENV, BATCH), states, jax.random.key(0))
    assert isinstance(output, SearchOutput)
    legal = np.asarray(jax.vmap(ENV.legal_action_mask)(states))
    assert np.all(legal[np.arange(BATCH), np.asarray(output.action)])
    np.testing.assert_allclose(np.asarray(output.policy_target).sum(axis=1), 1.0, rtol=1e-5)
    assert jax.tree.leaves(tree) == []  # mctx keeps nothing between searches


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: PUCT(0), "num_simulations"),
        (lambda: PUCT(8, capacity=1), "capacity"),
        (lambda: PUCT(8, root_policy=PUCTRoot(dirichlet_fraction=1.5)), "dirichlet_fraction"),
        (lambda: PUCT(8, root_policy=PUCTRoot(temperature=-1.0)), "temperature"),
        (lambda: PUCT(8, rule=PUCTRule(c_base=0.0)), "c_base"),
        (lambda: PUCT(8, gamma=0.0), "gamma"),
        (lambda: SequentialHalving(max_num_considered_actions=0), "max_num_considered_actions"),
        (lambda: MctxGumbel(8, root_policy=SequentialHalving(gumbel_scale=-1.0)), "gumbel_scale"),
        (lambda: make("puct", 8, temperature=-1.0), "temperature"),
        (lambda: make("alphazero", 8), "algo"),
        (lambda: make("puct", 8, backend="mctx", reuse_tree=True), "MctxPUCT"),
    ],
)
def test_configuration_errors_name_the_bad_value(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: PUCT(8, rule=GumbelRule()), "rule"),
        (lambda: Gumbel(8, qtransform="tree"), "qtransform"),
        (lambda: Gumbel(8, backend="row"), "backend"),
    ],
)
def test_parts_of_the_wrong_kind_are_refused(build, message):
    # A ValueError from the search's own check, or the runtime type checker's TypeError
    # (on in the tests) for the field's annotation, first.
    with pytest.raises((ValueError, TypeError), match=message):
        build()


# The options of `make` that switch each search's exploration off (what evaluations used
# to spell out by the search's name): `without_exploration` must build the same search.
_EXPLORATION_OFF = {
    "puct": {"temperature": 0.0, "dirichlet_fraction": 0.0},
    "gumbel": {"gumbel_scale": 0.0},
}
_SEARCH_OPTIONS = {
    "puct": {"temperature": 1.5, "dirichlet_fraction": 0.5, "dirichlet_alpha": 0.1, "c_init": 2.0},
    "gumbel": {"gumbel_scale": 0.7, "max_num_considered_actions": 4, "value_scale": 0.2},
}


@pytest.mark.parametrize("backend", ["native", "mctx"])
@pytest.mark.parametrize("algo", ["puct", "gumbel"])
def test_without_exploration_is_the_search_made_with_exploration_off(algo, backend):
    options = dict(_SEARCH_OPTIONS[algo], qtransform=QByTree(), gamma=0.9, max_depth=5)
    if backend == "native":
        options |= {"reuse_tree": True, "capacity": 40}
    search = make(algo, 12, backend=backend, **options)
    greedy = make(algo, 12, backend=backend, **(options | _EXPLORATION_OFF[algo]))
    off = search.without_exploration()
    assert type(off) is type(greedy)
    assert jax.tree.structure(off) == jax.tree.structure(greedy)  # the static settings
    assert {f.name: getattr(off, f.name) for f in dataclasses.fields(off)} == {
        f.name: getattr(greedy, f.name) for f in dataclasses.fields(greedy)
    }
    assert off.without_exploration() == off
    assert search.root_policy != off.root_policy  # the options above do explore


# The default run checks the chance game; the slow tier adds the boards, go's the largest.
@pytest.mark.parametrize(
    "game",
    slow_repeats(
        ["connect_four", "othello", "go_9x9", "2048"], {"connect_four", "othello", "go_9x9"}
    ),
)
def test_storing_only_what_a_step_reads_changes_nothing(game):
    """The tree keeps only the state leaves that `step` reads (for pgx: not the observation
    or the rewards). A search over trees that keep every leaf must give the same result."""
    env = azx.envs.make(game)
    net = mlp(env, seed=3)
    states = random_positions(env, jax.random.key(4), 2, max_moves=6)
    # Trees with chance nodes keep every leaf: 2048 is searched here by sampling outcomes.
    halving = SequentialHalving(max_num_considered_actions=4)
    search = Gumbel(6, root_policy=halving, chance_nodes=False)

    def run(search):
        output = eqx.filter_jit(search)(
            net, env, search.init(env, 2), states, key=jax.random.key(5)
        )
        return output, output.tree.state_words.shape[-1]

    read = azx.search._tree.leaves_read_by_step(env, env.init(jax.random.key(0)))
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(states)]
    assert {path for path, r in zip(paths, read, strict=True) if not r} == {
        ".observation",
        ".rewards",
    }
    pruned, pruned_words = run(search)
    full, full_words = run(dataclasses.replace(search, store_all_state_leaves=True))
    assert pruned_words < full_words
    legal = jax.vmap(env.legal_action_mask)(states)
    assert bool(jnp.all(legal[jnp.arange(2), pruned.action]))
    for name in ("action", "policy_target", "root_value"):
        np.testing.assert_array_equal(getattr(pruned, name), getattr(full, name))
    np.testing.assert_array_equal(pruned.tree.node_stats, full.tree.node_stats)
    np.testing.assert_array_equal(pruned.tree.children, full.tree.children)


def test_packed_states_round_trip():
    """Every kind of leaf survives packing into words, read back whole (`unpack_state`) or
    row by row, one gather per leaf (`unpack_rows`, what the search uses)."""
    from azx.search._store import pack_state, state_layout, unpack_rows, unpack_state

    keys = jax.random.split(jax.random.key(0), 6)
    states = {
        "flags": jax.random.bernoulli(keys[0], shape=(6, 3)),
        "small": jax.random.randint(keys[1], (6, 5), -128, 128).astype(jnp.int8),
        "half": jax.random.randint(keys[2], (6, 3), 0, 60000).astype(jnp.uint16),
        "board": jax.random.randint(keys[3], (6, 2, 3), -5, 5),
        "value": jax.random.normal(keys[4], (6,)),
        "key": keys,
    }
    layout = state_layout(jax.tree.map(lambda x: x[0], states))
    words = pack_state(layout, states)
    rows = jnp.array([4, 0, 4, 5])

    assert_trees_equal(unpack_state(layout, words), states)
    assert_trees_equal(unpack_rows(layout, words, rows), jax.tree.map(lambda x: x[rows], states))


BACKUP_CASES = {
    **{name: (search, ENV) for name, search in SEARCHES.items()},
    "puct-chain-discount": (PUCT(SIMULATIONS, gamma=0.9, qtransform=QByTree()), RewardChain()),
    "gumbel-chain-discount": (Gumbel(SIMULATIONS, gamma=0.9, reuse_tree=True), RewardChain()),
}


def _two_moves(search, env, net, states):
    """The outputs of two searches, the second after the move the first chose and the
    tree advanced along it."""

    @eqx.filter_jit
    def run(states):
        def move(carry, seed):
            tree, states = carry
            output = search(net, env, tree, states, key=jax.random.key(seed))
            keys = jax.random.split(jax.random.key(9), BATCH)
            states = jax.vmap(env.step)(states, output.action, keys)
            tree = search.advance(output.tree, output.action, jax.vmap(env.terminated)(states))
            return (tree, states), output

        # One search compiled and scanned over the two moves, not two copies of it.
        _, outputs = jax.lax.scan(move, (search.init(env, BATCH), states), jnp.arange(2))
        return outputs

    outputs = run(states)
    return [jax.tree.map(lambda x: x[move], outputs) for move in range(2)]


# The default run checks Gumbel backing up discounted rewards; the slow tier adds the other
# five.
@pytest.mark.parametrize(
    "name",
    slow_repeats(
        sorted(BACKUP_CASES),
        {"puct", "puct-capacity-5", "puct-chain-discount", "gumbel", "gumbel-capacity-3-depth-2"},
    ),
)
def test_every_backend_agrees_with_the_reference_bit_for_bit(name):
    """With `RowBackend` the backup runs one batch row at a time (`azx.search._rows`)
    and PUCT's descent finishes its last rows one at a time; with `LockstepBackend` all
    rows move together, and with `UnrolledBackend` several levels and path positions per
    loop iteration; `PlatformBackend(cpu_rows=False)` runs PUCT in lockstep here. Over two
    moves (so that reused statistics are backed up into as well), all must leave the same
    trees as `ReferenceBackend`, the plain specification of the descent and the backup."""
    search, env = BACKUP_CASES[name]
    net = NET if env is ENV else mlp(env, seed=2)
    states = random_positions(env, jax.random.key(3), BATCH, max_moves=8)
    rows = _two_moves(dataclasses.replace(search, backend=RowBackend()), env, net, states)[-1]
    lockstep = _two_moves(dataclasses.replace(search, backend=LockstepBackend()), env, net, states)[
        -1
    ]
    reference = _two_moves(
        dataclasses.replace(search, backend=ReferenceBackend()), env, net, states
    )[-1]
    # Several levels and path positions per loop iteration, in sizes that do not divide
    # the depths (so that levels past `max_depth` and partial chunks are masked).
    unrolled = dataclasses.replace(search, backend=UnrolledBackend(levels=3, backup_chunk=5))
    assert_trees_equal(rows, reference)
    assert_trees_equal(lockstep, reference)
    assert_trees_equal(_two_moves(unrolled, env, net, states)[-1], reference)
    if isinstance(search, PUCT):
        # The default backend as several seeds under `vmap` run it: lockstep on the CPU
        # where PUCT's descent would otherwise finish by row, on the unrolled backend's
        # path buffer.
        mapped = dataclasses.replace(search, backend=PlatformBackend(cpu_rows=False))
        assert_trees_equal(_two_moves(mapped, env, net, states)[-1], reference)


ORDER_CASES = {
    "default": Gumbel(SIMULATIONS),
    # Four of the seven actions considered: the first round chooses among more than it visits.
    "four-considered-reused": Gumbel(
        SIMULATIONS, root_policy=SequentialHalving(max_num_considered_actions=4), reuse_tree=True
    ),
    # A tree that fills up: the order decides which nodes are stored, so it is kept.
    "capacity-9": Gumbel(SIMULATIONS, capacity=9),
}


# The default run checks fewer considered actions with a reused tree; the slow tier adds
# the plain search and a tree that fills up.
@pytest.mark.parametrize("name", slow_repeats(sorted(ORDER_CASES), {"default", "capacity-9"}))
def test_gumbel_rounds_in_any_order_leave_the_same_statistics(name):
    """Rounds of sequential halving that visit every candidate once run in any order
    (`reorder_rounds=True`, the default); over two moves with Gumbel noise, the searches must
    end as the sequential rule does: the same root visits, Q, choices and targets, and the
    root value to rounding."""
    search = ORDER_CASES[name]
    states = random_positions(ENV, jax.random.key(4), BATCH, max_moves=8)

    def summary(output):
        tree = output.tree
        stats = (tree.edge_visits[:, 0], tree.edge_q[:, 0], tree.num_nodes)
        return (output.action, output.policy_target, *stats)

    any_order = _two_moves(search, ENV, NET, states)
    halving = dataclasses.replace(search.root_policy, reorder_rounds=False)
    in_order = dataclasses.replace(search, root_policy=halving)
    sequential = _two_moves(in_order, ENV, NET, states)
    for a, b in zip(any_order, sequential):
        assert_trees_equal(summary(a), summary(b))
        np.testing.assert_allclose(np.asarray(a.root_value), np.asarray(b.root_value), atol=1e-6)


def _entry(compiled_text: str) -> str:
    entry = compiled_text[compiled_text.index("ENTRY") :]
    return entry[: entry.index("\n}")]


@pytest.mark.xla_cpu
@pytest.mark.parametrize("q_normalisation", ["siblings", "tree"])
def test_cpu_row_loops_compile_to_one_kernel(q_normalisation):
    """XLA:CPU-specific: the row kernels (`azx.search._rows`: the backup and PUCT's
    finishing descent) are fast on XLA:CPU only because XLA compiles their loops, which
    touch a few elements per iteration, into one function (a "small call"); run as loops
    of separate kernels they would be a hundred times slower. Checks the code XLA:CPU
    compiles for each (on the CPU device, whatever the default platform), the descent's for
    connect four and for the most actions `kernels="auto"` uses it with."""
    with jax.default_device(jax.devices("cpu")[0]):
        _check_row_loops_compile_to_one_kernel(q_normalisation)


def _check_row_loops_compile_to_one_kernel(q_normalisation):
    from azx.search import _backend, _rows

    qtransform = QByTree() if q_normalisation == "tree" else azx.search.QBySiblings()
    search = PUCT(SIMULATIONS, qtransform=qtransform)
    states = random_positions(ENV, jax.random.key(0), BATCH, max_moves=4)
    tree = eqx.filter_jit(search)(NET, ENV, search.init(ENV, BATCH), states, key=jax.random.key(0))
    tree = tree.tree
    path = search.backend.path_buffer(BATCH, SIMULATIONS)
    rows = jnp.zeros((BATCH,), jnp.int32)
    tree_range = qtransform.range(tree)

    def finish(tree, path, rows):
        return _rows.finish_descent(
            tree, search.rule, tree_range, SIMULATIONS, jnp.int32(0), rows, path, rows
        )

    # The per-action arrays of a game with the most actions the row descent is used for.
    shape = tree.children.shape[:2] + (_backend.ROW_LOOPS_MAX_ACTIONS,)
    widest = eqx.tree_at(
        lambda t: (t.children, t.edge_visits, t.edge_q, t.selection_prior),
        tree,
        (jnp.zeros(shape, jnp.int32), jnp.zeros(shape), jnp.zeros(shape), jnp.zeros(shape)),
    )
    for fn, args in [
        (_rows.backup, (tree, path, rows, rows, jnp.ones(BATCH))),
        (finish, (tree, path, rows + 1)),
        (finish, (widest, path, rows + 1)),
    ]:
        entry = _entry(jax.jit(fn).lower(*args).compile().as_text())
        assert 'xla_cpu_small_call="true"' in entry
        assert " while(" not in entry


def test_masked_best_matches_argmax_and_max():
    """Selection's one-reduction argmax (`masked_best`) against `jnp.argmax` and `jnp.max`
    of the masked scores: scores on a coarse grid, so that most rows have ties (the lowest
    index wins), and rows with no legal action (action 0, score -inf)."""
    keys = jax.random.split(jax.random.key(0), 3)
    score = jnp.round(2.0 * jax.random.normal(keys[0], (512, 7))) / 2.0
    legal = jax.random.bernoulli(keys[1], 0.6, (512, 7))
    legal = legal.at[:8].set(False)
    action, best = jax.jit(azx.search._simulate.masked_best)(score, legal)
    masked = jnp.where(legal, score, -jnp.inf)
    np.testing.assert_array_equal(action, jnp.argmax(masked, axis=-1))
    np.testing.assert_array_equal(best, jnp.max(masked, axis=-1))
    assert np.all(np.asarray(best[:8]) == -np.inf)
