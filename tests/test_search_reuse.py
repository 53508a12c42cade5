"""Tree reuse: `advance` keeps exactly the subtree under the played action.

The compaction is checked against a brute-force copy written with plain Python loops
(depth-first search over the children table, then renumbering in slot order).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from test_search_common import mlp, random_positions

import azx
from azx.search import NO_PARENT, PUCT, UNVISITED, Gumbel, SequentialHalving


BATCH = 4
SIMULATIONS = 24


@eqx.filter_jit
def _search(search, net, env, tree, states, key):
    return search(net, env, tree, states, key=key)


@eqx.filter_jit
def _advance(search, tree, action, done):
    return search.advance(tree, action, done)


@eqx.filter_jit
def _step(env, states, action):
    keys = jax.random.split(jax.random.key(0), action.shape[0])
    return jax.vmap(env.step)(states, action, keys)


def _brute_force_subtree(tree, b, action):
    """Expected arrays of batch element `b` after keeping the subtree under `action`."""
    children = np.asarray(tree.children[b])
    new_root = children[0, action]
    if new_root == UNVISITED:
        return None
    members, stack = [], [int(new_root)]
    while stack:
        node = stack.pop()
        members.append(node)
        stack.extend(int(c) for c in children[node] if c != UNVISITED)
    members.sort()
    renumber = {old: new for new, old in enumerate(members)}
    expected = {}
    for name in ("visits", "value", "raw_value", "selection_prior", "legal_action_mask"):
        expected[name] = np.asarray(getattr(tree, name)[b])[members]
    for name in ("reward", "discount", "terminal"):
        expected[name] = np.asarray(getattr(tree, name)[b])[members]
    parent = np.asarray(tree.parent[b])[members]
    expected["parent"] = np.array(
        [NO_PARENT if i == 0 else renumber[int(p)] for i, p in enumerate(parent)]
    )
    action_from_parent = np.asarray(tree.action_from_parent[b])[members]
    action_from_parent[0] = NO_PARENT
    expected["action_from_parent"] = action_from_parent
    expected["children"] = np.array(
        [[UNVISITED if c == UNVISITED else renumber[int(c)] for c in children[m]] for m in members]
    )
    expected["state"] = jax.tree.map(lambda x: np.asarray(x[b])[members], tree.state)
    return expected


def _check_against_brute_force(old, new, action, done):
    for b in range(BATCH):
        expected = None if done[b] else _brute_force_subtree(old, b, int(action[b]))
        if expected is None:
            assert int(new.num_nodes[b]) == 0, "a finished or unvisited move must reset"
            continue
        count = len(expected["visits"])
        assert int(new.num_nodes[b]) == count
        for name, value in expected.items():
            if name == "state":
                for got, want in zip(
                    jax.tree.leaves(new.state), jax.tree.leaves(value), strict=True
                ):
                    np.testing.assert_array_equal(np.asarray(got[b])[:count], want)
            else:
                got = np.asarray(getattr(new, name)[b])[:count]
                np.testing.assert_array_equal(got, value, err_msg=name)
        # The new root carries the statistics of the child it was.
        child = int(old.children[b, 0, int(action[b])])
        assert int(new.visits[b, 0]) == int(old.visits[b, child])
        assert float(new.value[b, 0]) == float(old.value[b, child])


def _play_and_reuse(search, done, pick_action=None):
    env = azx.envs.make("connect_four")
    net = mlp(env, seed=3)
    states = random_positions(env, jax.random.key(4), BATCH, max_moves=8)
    tree = search.init(env, BATCH)
    for move in range(3):
        output = _search(search, net, env, tree, states, jax.random.key(move))
        visits_before = np.asarray(output.tree.visits[:, 0])
        action = output.action if pick_action is None else pick_action(output)
        new = _advance(search, output.tree, action, done)
        _check_against_brute_force(output.tree, new, np.asarray(action), np.asarray(done))
        tree = new
        states = _step(env, states, action)
        reused = np.asarray(tree.visits[:, 0])
        # The next search starts from the kept statistics: its root gains exactly
        # `num_simulations` visits (a fresh root counts its own evaluation as one).
        following = _search(search, net, env, tree, states, jax.random.key(10 + move))
        root_visits = np.asarray(following.tree.visits[:, 0])
        np.testing.assert_array_equal(
            root_visits, np.where(reused > 0, reused, 1) + search.num_simulations
        )
        assert np.all(visits_before == 1 + SIMULATIONS) or move > 0


def test_puct_advance_matches_brute_force_copy():
    search = PUCT(SIMULATIONS, reuse_tree=True)
    _play_and_reuse(search, done=jnp.array([False, True, False, False]))


def test_gumbel_advance_resets_where_the_move_was_never_searched():
    # Two considered actions: the others have no node, so advancing along one resets.
    search = Gumbel(
        SIMULATIONS, reuse_tree=True, root_policy=SequentialHalving(max_num_considered_actions=2)
    )

    def least_visited_legal(output):
        visits = output.tree.root_child_visits()
        legal = output.tree.legal_action_mask[:, 0]
        return jnp.argmin(jnp.where(legal, visits, 10**6), axis=1).astype(jnp.int32)

    _play_and_reuse(search, done=jnp.zeros(BATCH, bool), pick_action=least_visited_legal)


def test_without_reuse_every_search_starts_afresh():
    env = azx.envs.make("connect_four")
    net = mlp(env, seed=3)
    states = random_positions(env, jax.random.key(5), BATCH, max_moves=8)
    search = PUCT(SIMULATIONS)
    first = _search(search, net, env, search.init(env, BATCH), states, jax.random.key(0))
    tree = _advance(search, first.tree, first.action, jnp.zeros(BATCH, bool))
    second = _search(search, net, env, tree, states, jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(first.action), np.asarray(second.action))
    np.testing.assert_array_equal(np.asarray(second.tree.visits[:, 0]), 1 + SIMULATIONS)
