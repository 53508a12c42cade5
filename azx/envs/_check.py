import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._types import PRNGKey
from .._validate import check_positive_int
from ._abstract import AbstractEnv


_READERS = (
    "observation",
    "legal_action_mask",
    "rewards",
    "terminated",
    "truncated",
    "current_player",
)


def check_env(
    env: AbstractEnv, *, key: PRNGKey | None = None, num_games: int = 16, max_steps: int = 200
) -> None:
    """Check that `env` keeps the promises of [`azx.envs.AbstractEnv`][], by playing
    random games with it.

    Checked, in this order, each broken promise raising its own error:

    1. The sizes: `num_actions` and `num_players` positive ints, `observation_shape` a
       tuple of non-negative ints, `observation_dtype` a NumPy dtype.
    2. Shapes and dtypes, traced without running: `observation` of `observation_shape`
       and `observation_dtype`; `legal_action_mask` bool `[num_actions]`; `rewards` float
       `[num_players]`; `terminated` and `truncated` bool scalars; `current_player` an int
       scalar; `step` returns a state of the same structure, shapes and dtypes as the one
       it takes (so that `jax.lax.scan` can carry it).
    3. Purity: `init` and `step` give the same result when called twice, under `jax.jit`,
       and row by row under `jax.vmap` (no Python-side state, no randomness but `key`, no
       host callback that mixes a batch's rows).
    4. Over `num_games` random games of `max_steps` steps, each picking uniformly among
       the legal actions: a new episode is neither terminated nor truncated and has zero
       rewards; observations and rewards are finite; `current_player` lies in
       `[0, num_players)` and a state that is not over has at least one legal action;
       once an episode is terminated (or truncated), every further `step`, whatever its
       action, keeps it so with zero rewards; in a two-player game, the rewards of every
       step sum to zero (AlphaZero's games are zero-sum).

    Chance games' extra methods ([`azx.envs.AbstractChanceEnv`][]) are not checked.

    **Arguments:**

    - `env`: the environment.
    - `key`: the random games' key (default `jax.random.key(0)`).
    - `num_games`: games played at once (a `jax.vmap` batch).
    - `max_steps`: steps per game; a game that ends earlier keeps being stepped, which
      is how the terminal promise is checked.

    **Returns:** nothing; warns (`UserWarning`) if no game ended within `max_steps`, as
    then the terminal promise went unchecked.

    **Raises:** `ValueError` naming the first broken promise, the method, and (for the
    random games) the game and step where it broke; `TypeError` if `env` is not an
    `azx.envs.AbstractEnv`.
    """
    if not isinstance(env, AbstractEnv):
        raise TypeError(f"env must be an azx.envs.AbstractEnv, got {type(env).__name__}")
    check_positive_int("num_games", num_games)
    check_positive_int("max_steps", max_steps)
    key = jax.random.key(0) if key is None else key
    name = type(env).__name__
    _check_sizes(env, name)
    _check_shapes(env, name)
    init_key, purity_key, games_key = jax.random.split(key, 3)
    _check_purity(env, name, init_key, purity_key, num_games)
    _check_games(env, name, games_key, num_games, max_steps)


def _fail(name: str, message: str) -> ValueError:
    return ValueError(f"{name}: {message}")


def _check_sizes(env: AbstractEnv, name: str) -> None:
    for size in ("num_actions", "num_players"):
        value = getattr(env, size)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(name, f"{size} must be a positive Python int, got {value!r}")
    shape = env.observation_shape
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise _fail(name, f"observation_shape must be a tuple of non-negative ints, got {shape!r}")
    if not isinstance(env.observation_dtype, np.dtype):
        raise _fail(
            name,
            "observation_dtype must be a NumPy dtype (e.g. jnp.dtype(jnp.float32)), got "
            f"{env.observation_dtype!r}",
        )


def _spec(struct: Any) -> str:
    return f"{struct.dtype}{list(struct.shape)}"


def _check_shapes(env: AbstractEnv, name: str) -> None:
    key = jax.random.key(0)
    try:
        state = jax.eval_shape(env.init, key)
    except Exception as error:
        raise _fail(name, f"init(key) fails when traced: {error}") from error
    num_actions, num_players = env.num_actions, env.num_players
    expected = {
        "observation": (env.observation_shape, "observation_dtype", env.observation_dtype),
        "legal_action_mask": ((num_actions,), "bool", np.dtype(bool)),
        "rewards": ((num_players,), "floating", None),
        "terminated": ((), "bool", np.dtype(bool)),
        "truncated": ((), "bool", np.dtype(bool)),
        "current_player": ((), "integer", None),
    }
    for reader, (shape, kind, dtype) in expected.items():
        try:
            out = jax.eval_shape(getattr(env, reader), state)
        except Exception as error:
            raise _fail(name, f"{reader}(state) fails when traced: {error}") from error
        if not hasattr(out, "shape") or not hasattr(out, "dtype"):
            raise _fail(name, f"{reader}(state) must return one array, got {out!r}")
        if dtype is not None:
            dtype_ok = np.dtype(out.dtype) == dtype
        else:
            dtype_ok = jnp.issubdtype(out.dtype, getattr(jnp, kind))
        if tuple(out.shape) != shape or not dtype_ok:
            want = f"{dtype if kind == 'observation_dtype' else kind}{list(shape)}"
            raise _fail(name, f"{reader}(state) must return {want}, got {_spec(out)}")
    action = jax.ShapeDtypeStruct((), jnp.int32)
    try:
        after = jax.eval_shape(env.step, state, action, key)
    except Exception as error:
        raise _fail(name, f"step(state, action, key) fails when traced: {error}") from error
    before_tree, after_tree = jax.tree.structure(state), jax.tree.structure(after)
    if before_tree != after_tree:
        raise _fail(
            name,
            "step must return a state of the same structure as the one it takes; "
            f"took {before_tree}, returned {after_tree}",
        )
    for path, old, new in zip(
        (jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state)),
        jax.tree.leaves(state),
        jax.tree.leaves(after),
    ):
        if old.shape != new.shape or old.dtype != new.dtype:
            raise _fail(
                name,
                f"step must keep every state leaf's shape and dtype; state{path} is "
                f"{_spec(old)} after init and {_spec(new)} after step",
            )


def _readout(env: AbstractEnv, state: Any) -> dict[str, Any]:
    return {reader: getattr(env, reader)(state) for reader in _READERS}


def _first_difference(left: Any, right: Any) -> str | None:
    """The path of the first leaf where two trees of arrays differ (floats within a
    rounding tolerance, since XLA may fuse operations differently under jit), or `None`."""
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(left), jax.tree.leaves(right)):
        if jax.dtypes.issubdtype(jnp.asarray(a).dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return jax.tree_util.keystr(path)
        if np.issubdtype(a.dtype, np.inexact):
            same = np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        if not same:
            return jax.tree_util.keystr(path)
    return None


def _check_purity(
    env: AbstractEnv, name: str, init_key: PRNGKey, step_key: PRNGKey, num_games: int
) -> None:
    def init_and_read(key):
        state = env.init(key)
        return state, _readout(env, state)

    def step_and_read(state, action, key):
        state = env.step(state, action, key)
        return state, _readout(env, state)

    def compare(what: str, reference: Any, other: Any, promise: str) -> None:
        where = _first_difference(reference, other)
        if where is not None:
            raise _fail(name, f"{what} is not pure: {promise} (first difference at {where})")

    def run(what: str, function, *args):
        try:
            return function(*args)
        except Exception as error:
            raise _fail(name, f"{what} fails: {error}") from error

    # Eager calls, the reference; then the same under jax.jit; then jax.vmap rows
    # against the same rows made (or stepped) alone, both jitted so that only vmap
    # differs.
    init_keys = jax.random.split(init_key, num_games)
    first = run("init", init_and_read, init_keys[0])
    compare("init", first, run("init", init_and_read, init_keys[0]), "two calls differ")
    init_alone = jax.jit(init_and_read)
    jitted = [run("init under jax.jit", init_alone, k) for k in init_keys]
    compare("init", first, jitted[0], "it differs under jax.jit")
    batched = run("init under jax.vmap", jax.jit(jax.vmap(init_and_read)), init_keys)
    for row, alone in enumerate(jitted):
        compare(
            "init",
            alone,
            jax.tree.map(lambda x: x[row], batched),
            f"row {row} of a jax.vmap batch differs from the same key's state made alone",
        )
    batch = batched[0]

    # One step from every game's first state, with a legal action where there is one.
    action_keys = jax.random.split(step_key, num_games)
    step_keys = jax.random.split(jax.random.fold_in(step_key, 1), num_games)
    masks = batched[1]["legal_action_mask"]
    logits = jnp.where(masks | ~masks.any(axis=-1, keepdims=True), 0.0, -jnp.inf)
    actions = jax.vmap(jax.random.categorical)(action_keys, logits).astype(jnp.int32)
    states = [jax.tree.map(lambda x: x[i], batch) for i in range(num_games)]
    stepped = run("step", step_and_read, states[0], actions[0], step_keys[0])
    compare(
        "step",
        stepped,
        run("step", step_and_read, states[0], actions[0], step_keys[0]),
        "two calls with the same state, action and key differ",
    )
    step_alone = jax.jit(step_and_read)
    jitted = [
        run("step under jax.jit", step_alone, s, a, k)
        for s, a, k in zip(states, actions, step_keys, strict=True)
    ]
    compare("step", stepped, jitted[0], "it differs under jax.jit")
    vmapped = run(
        "step under jax.vmap", jax.jit(jax.vmap(step_and_read)), batch, actions, step_keys
    )
    for row, alone in enumerate(jitted):
        compare(
            "step",
            alone,
            jax.tree.map(lambda x: x[row], vmapped),
            f"row {row} of a jax.vmap batch differs from the same state stepped alone",
        )


def _check_games(env: AbstractEnv, name: str, key: PRNGKey, num_games: int, max_steps: int) -> None:
    def play(key):
        def one_step(state, key):
            action_key, step_key = jax.random.split(key)
            mask = env.legal_action_mask(state)
            # Any action once none is legal (a finished game may mask them all).
            logits = jnp.where(mask | ~mask.any(), 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits).astype(jnp.int32)
            state = env.step(state, action, step_key)
            return state, _readout(env, state)

        init_key, steps_key = jax.random.split(key)
        state = env.init(init_key)
        _, later = jax.lax.scan(one_step, state, jax.random.split(steps_key, max_steps))
        first = _readout(env, state)
        # [max_steps + 1, ...]: the new episode's readout, then one per step.
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, later)

    try:
        games = jax.jit(jax.vmap(play))(jax.random.split(key, num_games))
    except Exception as error:
        raise _fail(name, f"random games fail under jax.jit and jax.vmap: {error}") from error
    games = {reader: np.asarray(value) for reader, value in games.items()}
    rewards, observation = games["rewards"], games["observation"]
    terminated, truncated = games["terminated"], games["truncated"]
    over = terminated | truncated  # [game, step]

    def first_where(bad: np.ndarray, promise: str) -> None:
        if bad.any():
            game, step = np.argwhere(bad)[0]
            raise _fail(name, f"{promise} (random game {game}, step {step})")

    first_where(over[:, :1], "init must return a new episode, neither terminated nor truncated")
    first_where(
        (rewards[:, :1] != 0).any(axis=-1), "rewards of a new episode (after init) must be zero"
    )
    if np.issubdtype(observation.dtype, np.inexact):
        finite = np.isfinite(observation).reshape(*observation.shape[:2], -1).all(axis=-1)
        first_where(~finite, "observation must be finite (no NaN or inf)")
    first_where(~np.isfinite(rewards).all(axis=-1), "rewards must be finite (no NaN or inf)")
    player = games["current_player"]
    first_where(
        ~over & ((player < 0) | (player >= env.num_players)),
        f"current_player must lie in [0, num_players) = [0, {env.num_players})",
    )
    first_where(
        ~over & ~games["legal_action_mask"].any(axis=-1),
        "legal_action_mask must allow at least one action while the episode is not over",
    )
    was_over = over[:, :-1]
    first_where(
        was_over & (terminated[:, :-1] & ~terminated[:, 1:]),
        "a terminated episode must stay terminated when stepped again",
    )
    first_where(
        was_over & (truncated[:, :-1] & ~truncated[:, 1:]),
        "a truncated episode must stay truncated when stepped again",
    )
    first_where(
        was_over & (rewards[:, 1:] != 0).any(axis=-1),
        "step on a finished (terminated or truncated) episode must give zero rewards",
    )
    if env.num_players == 2:
        first_where(
            np.abs(rewards.sum(axis=-1)) > 1e-5,
            "a two-player game's rewards must sum to zero on every step (zero-sum)",
        )
    if not over.any():
        warnings.warn(
            f"{name}: no random game ended within max_steps={max_steps}, so the promise "
            "about finished episodes went unchecked; raise max_steps",
            stacklevel=3,
        )
