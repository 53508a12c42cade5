"""The xminigrid adapter, checked against xminigrid's own `step` and scripted episodes.

xminigrid's step takes seconds to compile, so the tests share a few configurations and
compile each once (`eqx.filter_jit` with the environment as static data).
"""

import collections
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx.envs
from azx._numerics import third_party_numerics


pytest.importorskip("xminigrid")  # the optional extra: pip install "azx[envs]"
from xminigrid.benchmarks import save_bz2_pickle
from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles
from xminigrid.core.goals import AgentHoldGoal, AgentNearGoal
from xminigrid.core.rules import AgentHoldRule
from xminigrid.types import StepType


FORWARD, CLOCKWISE, PICK_UP = 0, 1, 3
# xminigrid's directions: up, right, down, left.
DIRECTIONS = [(-1, 0), (0, 1), (1, 0), (0, -1)]
# Empty-6x6: the agent starts at (1, 1) facing right, the goal is at (4, 4).
TO_THE_GOAL = [FORWARD] * 3 + [CLOCKWISE] + [FORWARD] * 3
RED_BALL = TILES_REGISTRY[Tiles.BALL, Colors.RED]


def _red_ball_ruleset():
    # Pick up the red ball; picking up the green square turns it into a blue pyramid.
    return azx.envs.xland_ruleset(
        AgentHoldGoal(tile=RED_BALL),
        rules=[
            AgentHoldRule(
                tile=TILES_REGISTRY[Tiles.SQUARE, Colors.GREEN],
                prod_tile=TILES_REGISTRY[Tiles.PYRAMID, Colors.BLUE],
            )
        ],
        init_tiles=[(Tiles.BALL, Colors.RED), TILES_REGISTRY[Tiles.SQUARE, Colors.GREEN]],
    )


def _empty():
    # The time limit is the length of the shortest path to the goal.
    return azx.envs.make("xminigrid:MiniGrid-Empty-6x6", max_episode_steps=len(TO_THE_GOAL))


def _xland():
    return azx.envs.make(
        "xminigrid:XLand-MiniGrid-R1-9x9", ruleset=_red_ball_ruleset(), max_episode_steps=40
    )


@eqx.filter_jit
def _init(env, key):
    return env.init(key)


@eqx.filter_jit
def _step(env, state, action):
    return env.step(state, action, jax.random.key(0))


@eqx.filter_jit
def _reference_step(env, timestep, action):
    with third_party_numerics():
        return env.env.step(env.params, timestep, action)


def _episode(env, actions, key=jax.random.key(0), *, reference=True):
    """The adapter's states after each of `actions`, and xminigrid's own time steps for
    the same actions from the same start (an independent run of xminigrid's `step`)."""
    state = timestep = _init(env, key)
    states, references = [], []
    for action in actions:
        state = _step(env, state, jnp.int32(action))
        states.append(state)
        if reference:
            timestep = _reference_step(env, timestep, jnp.int32(action))
            references.append(timestep)
    return states, references


def _flags(env, state):
    reward = float(env.rewards(state)[0])
    return reward, bool(env.terminated(state)), bool(env.truncated(state))


def _reference_flags(timestep):
    """xminigrid's own reading: the last step, with discount 0 where the goal was reached."""
    last, discount = bool(timestep.step_type == StepType.LAST), float(timestep.discount)
    return float(timestep.reward), last and discount == 0.0, last and discount == 1.0


def _close(flags):
    """`flags` with the reward compared to a float32 rounding: xminigrid's jitted step and
    the adapter's compile the reward's arithmetic into different programs."""
    reward, *rest = flags
    return (pytest.approx(reward, rel=1e-6), *rest)


def test_declared_sizes_match_states():
    env = _empty()
    assert (env.num_actions, env.num_players, env.max_episode_steps) == (6, 1, 7)
    assert (env.observation_shape, env.observation_dtype) == ((7, 7, 2), jnp.uint8)
    assert azx.envs.make("xminigrid:MiniGrid-Empty-6x6", view_size=5).observation_shape == (5, 5, 2)
    assert azx.envs.make("xminigrid:MiniGrid-Empty-6x6").max_episode_steps == 144
    state = _init(env, jax.random.key(1))
    child = _step(env, state, jnp.int32(FORWARD))
    assert jax.tree.structure(state) == jax.tree.structure(child)
    for fresh, stepped in zip(jax.tree.leaves(state), jax.tree.leaves(child), strict=True):
        assert (fresh.shape, fresh.dtype) == (stepped.shape, stepped.dtype)
        assert getattr(fresh, "weak_type", None) == getattr(stepped, "weak_type", None)
    for state in (state, child):
        assert env.observation(state).shape == env.observation_shape
        assert env.observation(state).dtype == jnp.uint8
        assert env.legal_action_mask(state).shape == (6,)
        assert bool(jnp.all(env.legal_action_mask(state)))
        assert env.rewards(state).shape == (1,) and env.rewards(state).dtype == jnp.float32
        assert env.current_player(state).dtype == jnp.int32


@pytest.mark.parametrize(
    "actions",
    [
        TO_THE_GOAL + [FORWARD, PICK_UP],
        [CLOCKWISE] * 9,  # turning on the spot: the time limit ends it
        np.random.default_rng(0).integers(0, 6, size=9).tolist(),
    ],
    ids=["goal", "turning", "random"],
)
def test_steps_match_xminigrid(actions):
    env = _empty()
    states, references = _episode(env, actions)
    limit = env.max_episode_steps
    for t, (state, reference) in enumerate(zip(states[:limit], references, strict=False)):
        assert _flags(env, state) == _close(_reference_flags(reference)), t
        np.testing.assert_array_equal(env.observation(state), reference.observation)
    # Past the limit xminigrid would go on; the adapter stays as the episode ended.
    for state in states[limit:]:
        assert _flags(env, state) == (0.0, *_flags(env, states[limit - 1])[1:])
        np.testing.assert_array_equal(env.observation(state), references[limit - 1].observation)


def test_goal_on_the_last_step_is_termination():
    # Onto the goal on the last allowed step: xminigrid ends it with discount 0, and the
    # reward is the known 1 - 0.9 * steps / max_steps.
    env = _empty()
    states, references = _episode(env, TO_THE_GOAL)
    assert _reference_flags(references[-1]) == (pytest.approx(0.1, rel=1e-6), True, False)
    assert _flags(env, states[-1]) == _close(_reference_flags(references[-1]))
    # Turning for as long: the limit, with discount 1, which is truncation.
    states, references = _episode(env, [CLOCKWISE] * len(TO_THE_GOAL))
    assert [_flags(env, s) for s in states] == [(0.0, False, False)] * 6 + [(0.0, False, True)]


def _walk_to_pick_up(state, target):
    """Actions of a scripted agent: a shortest path (breadth-first) to a cell next to
    the first tile equal to `target`, turn to face it, pick it up."""
    grid = np.asarray(state.state.grid)
    position = tuple(int(x) for x in state.state.agent.position)
    direction = int(state.state.agent.direction)
    walkable = np.isin(grid[..., 0], [Tiles.FLOOR, Tiles.GOAL, Tiles.DOOR_OPEN])
    goal = tuple(int(x) for x in np.argwhere(np.all(grid == np.asarray(target), axis=-1))[0])
    previous, queue = {position: None}, collections.deque([position])
    while queue:
        cell = queue.popleft()
        if abs(cell[0] - goal[0]) + abs(cell[1] - goal[1]) == 1:
            break
        for dy, dx in DIRECTIONS:
            near = (cell[0] + dy, cell[1] + dx)
            if walkable[near] and near not in previous:
                previous[near] = cell
                queue.append(near)
    path = [cell]
    while previous[path[-1]] is not None:
        path.append(previous[path[-1]])
    path.reverse()
    actions = []
    for here, there in zip(path, [*path[1:], goal], strict=True):
        facing = DIRECTIONS.index((there[0] - here[0], there[1] - here[1]))
        actions += [CLOCKWISE] * ((facing - direction) % 4) + [FORWARD]
        direction = facing
    return actions[:-1] + [PICK_UP]  # the last move faces the ball


def test_xland_random_and_scripted_play_under_jit_and_vmap():
    ruleset = _red_ball_ruleset()
    np.testing.assert_array_equal(ruleset.goal, AgentHoldGoal(tile=RED_BALL).encode())
    assert ruleset.rules.shape == (1, 7) and ruleset.init_tiles.shape == (2, 2)
    env = _xland()
    assert env.observation_shape == (5, 5, 2)  # XLand's default view
    limit, batch = env.max_episode_steps, 32
    starts = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.key(0), batch))
    actions = np.random.default_rng(0).integers(0, env.num_actions, size=(batch, limit + 5))
    # Rows 0-2: a scripted agent walks to the red ball and picks it up. The others play
    # at random.
    plans = [_walk_to_pick_up(jax.tree.map(lambda x: x[row], starts), RED_BALL) for row in range(3)]
    for row, plan in enumerate(plans):
        actions[row, : len(plan)] = plan

    def play(state, actions):
        def body(carry, action):
            state, length = carry
            was_done = env.terminated(state) | env.truncated(state)
            next_state = env.step(state, action, jax.random.key(0))
            frozen = ~was_done | (
                jnp.all(env.observation(next_state) == env.observation(state))
                & jnp.all(env.rewards(next_state) == 0.0)
                & (env.terminated(next_state) == env.terminated(state))
                & (env.truncated(next_state) == env.truncated(state))
            )
            both = env.terminated(next_state) & env.truncated(next_state)
            length = length + (~was_done).astype(jnp.int32)
            return (next_state, length), (frozen, both, env.rewards(next_state)[0])

        return jax.lax.scan(body, (state, jnp.int32(0)), actions)

    (state, length), (frozen, both, rewards) = jax.jit(jax.vmap(play))(
        starts, jnp.asarray(actions, jnp.int32)
    )
    terminated = np.asarray(jax.vmap(env.terminated)(state))
    truncated = np.asarray(jax.vmap(env.truncated)(state))
    assert np.all(terminated | truncated) and bool(jnp.all(frozen)) and not bool(jnp.any(both))
    np.testing.assert_array_equal(np.asarray(length)[truncated], limit)
    # A reward only on the step that reaches the goal: 1 - 0.9 * steps / max_steps.
    np.testing.assert_array_equal(np.sum(np.asarray(rewards) > 0.0, axis=1), terminated)
    for row, plan in enumerate(plans):
        assert terminated[row] and int(length[row]) == len(plan)
        assert float(rewards[row, len(plan) - 1]) == pytest.approx(1 - 0.9 * len(plan) / limit)
    assert rewards.dtype == jnp.float32
    observation = jax.vmap(env.observation)(state)
    assert observation.shape == (batch, 5, 5, 2) and observation.dtype == env.observation_dtype


def test_xland_ruleset_from_a_benchmark_file(tmp_path):
    # A two-ruleset benchmark in the layout xminigrid's load_benchmark_from_path reads.
    first = _red_ball_ruleset()
    second = azx.envs.xland_ruleset(
        AgentNearGoal(tile=TILES_REGISTRY[Tiles.KEY, Colors.YELLOW]),
        init_tiles=[(Tiles.KEY, Colors.YELLOW)],
    )
    # Padded to the first's number of tiles with an empty tile, as benchmarks are.
    padding = jnp.zeros((1, 2), jnp.uint8)
    second = second.replace(init_tiles=jnp.concatenate([second.init_tiles, padding]))
    path = str(tmp_path / "tiny_benchmark")
    save_bz2_pickle(
        {
            "goals": np.stack([first.goal, second.goal]),
            "rules": np.stack([first.rules, second.rules]),
            "init_tiles": np.stack([first.init_tiles, second.init_tiles]),
            "num_rules": np.array([1, 0]),
        },
        path,
    )
    name = "xminigrid:XLand-MiniGrid-R1-9x9"
    env = azx.envs.make(name, benchmark_path=path, ruleset_id=1)
    for got, want in zip(jax.tree.leaves(env.params.ruleset), jax.tree.leaves(second), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == jnp.uint8
    # The same ruleset given in code is the same environment (static data, one compile).
    assert env == azx.envs.make(name, ruleset=second)
    assert hash(env) == hash(azx.envs.make(name, ruleset=second))
    assert env != azx.envs.make(name, benchmark_path=path, ruleset_id=0)
    with pytest.raises(ValueError, match=r"ruleset_id must be an int in \[0, 2\)"):
        azx.envs.make(name, benchmark_path=path, ruleset_id=2)


def test_errors_say_what_to_give():
    with pytest.raises(ValueError, match="needs a ruleset: ruleset=azx.envs.xland_ruleset"):
        azx.envs.make("xminigrid:XLand-MiniGrid-R1-9x9")
    with pytest.raises(ValueError, match="not both"):
        azx.envs.make(
            "xminigrid:XLand-MiniGrid-R1-9x9",
            ruleset=_red_ball_ruleset(),
            benchmark_path="x",
            ruleset_id=0,
        )
    with pytest.raises(ValueError, match="takes no argument.*ruleset.*accepts:.*view_size"):
        azx.envs.make("xminigrid:MiniGrid-Empty-6x6", ruleset=_red_ball_ruleset())
    with pytest.raises(ValueError, match="takes no argument.*colour.*accepts:.*max_steps"):
        azx.envs.make("xminigrid:MiniGrid-Empty-6x6", colour=1)
    with pytest.raises(ValueError, match="not both"):
        azx.envs.make("xminigrid:MiniGrid-Empty-6x6", max_episode_steps=3, max_steps=3)
    with pytest.raises(ValueError, match="unknown environment 'xminigrid:Empty'.*xminigrid:Mini"):
        azx.envs.make("xminigrid:Empty")
    with pytest.raises(ValueError, match="goal must be an xminigrid goal"):
        azx.envs.xland_ruleset((Tiles.BALL, Colors.RED))
    with pytest.raises(ValueError, match=r"init_tiles\[0\] must be integers of shape \(2,\)"):
        azx.envs.xland_ruleset(AgentHoldGoal(tile=RED_BALL), init_tiles=[(3, 1, 0)])


def test_missing_xminigrid_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "xminigrid", None)  # `import xminigrid` now fails
    with pytest.raises(ImportError, match=r'pip install "azx\[envs\]"'):
        azx.envs.make("xminigrid:MiniGrid-Empty-6x6")
    assert not any(name.startswith("xminigrid:") for name in azx.envs.available())
