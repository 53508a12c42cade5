import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import PRNGKey
from .._validate import check_positive_int
from ._abstract import AbstractEnv
from ._chance import AbstractChanceEnv


_READERS = (
    "observation",
    "legal_action_mask",
    "rewards",
    "terminated",
    "truncated",
    "current_player",
)


_CHANCE_METHODS = ("afterstate", "has_chance", "chance_probabilities", "apply_outcome")

#: The probability that `check_env` fails a correct chance game in its sampled tests, all
#: tests together (a Bonferroni bound).
_FALSE_ALARM = 1e-6


def check_env(
    env: AbstractEnv,
    *,
    key: PRNGKey | None = None,
    num_games: int = 16,
    max_steps: int = 200,
    chance_samples: int = 1000,
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

    A chance game ([`azx.envs.AbstractChanceEnv`][]) is checked further:

    5. Its `num_outcomes` is a positive int; `afterstate` traces, `has_chance` returns a
       bool scalar, `chance_probabilities` float `[num_outcomes]`, `chance_outcome_mask`
       bool `[num_outcomes]`, `sample_outcome` an int scalar, and `apply_outcome` a state
       of the structure, shapes and dtypes of `init`'s.
    6. At every state of the random games, with a random legal action: the probabilities
       are finite and non-negative, sum to one over the outcome mask (within `1e-4`), the
       mask is true exactly where they are positive, and where `has_chance` is false all
       the mass is on outcome 0.
    7. At up to 16 of those afterstates with chance, `chance_samples` calls of `step`
       (each with its own key) are distributed as `apply_outcome` of an outcome drawn
       from the probabilities, and so are `chance_samples` draws of `sample_outcome`.
       States are compared by what the search reads of them (observation, legal moves,
       rewards, terminated, truncated, player), so outcomes that give the same state are
       counted together. Every sampled state must be one an outcome of positive
       probability gives, and each outcome's count must pass an exact two-sided binomial
       test against its probability at level `1e-6` divided by the number of counts
       tested (Bonferroni): a correct game fails it with probability below `1e-6`, while
       a count `chance_samples * p` off by about `6 * sqrt(chance_samples * p * (1 - p))`
       or more is caught (about 95 of 1000 steps at `p = 1/2`).
    8. At up to 16 afterstates without chance, `step` is deterministic: each of
       `chance_samples` keys gives the state `apply_outcome(afterstate, 0)` gives.
    9. At up to 16 finished (terminated or truncated) states, every outcome of positive
       probability keeps the episode finished with zero rewards, as `step` must: a search
       reads a node's end and its reward from the state `apply_outcome` gives.

    A game with chance methods (`afterstate`, `apply_outcome`, ...) that does not subclass
    [`azx.envs.AbstractChanceEnv`][] is an error: searches would sample its chance through
    `step` instead of planning over it.

    **Arguments:**

    - `env`: the environment.
    - `key`: the random games' key (default `jax.random.key(0)`).
    - `num_games`: games played at once (a `jax.vmap` batch).
    - `max_steps`: steps per game; a game that ends earlier keeps being stepped, which
      is how the terminal promise is checked.
    - `chance_samples`: in a chance game, the samples of `step` and of `sample_outcome`
      per tested afterstate.

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
    check_positive_int("chance_samples", chance_samples)
    key = jax.random.key(0) if key is None else key
    name = type(env).__name__
    chance = isinstance(env, AbstractChanceEnv)
    if not chance:
        _check_no_chance_methods(env, name)
    _check_sizes(env, name)
    _check_shapes(env, name)
    if chance:
        _check_chance_shapes(env, name)
    init_key, purity_key, games_key = jax.random.split(key, 3)
    _check_purity(env, name, init_key, purity_key, num_games)
    _check_games(env, name, games_key, num_games, max_steps)
    if chance:
        chance_key = jax.random.fold_in(key, 3)
        _check_chance(env, name, chance_key, num_games, max_steps, chance_samples)


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
    _check_layout(name, "step", state, after)


def _check_layout(name: str, method: str, state: Any, other: Any) -> None:
    """That `method` returned a state (`other`) of the structure, shapes and dtypes of
    `init`'s (`state`), so that `jax.lax.scan` can carry it and a search store it."""
    before_tree, after_tree = jax.tree.structure(state), jax.tree.structure(other)
    if before_tree != after_tree:
        raise _fail(
            name,
            f"{method} must return a state of the same structure as the one init makes; "
            f"init made {before_tree}, {method} returned {after_tree}",
        )
    for path, old, new in zip(
        (jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state)),
        jax.tree.leaves(state),
        jax.tree.leaves(other),
    ):
        if old.shape != new.shape or old.dtype != new.dtype:
            raise _fail(
                name,
                f"{method} must keep every state leaf's shape and dtype; state{path} is "
                f"{_spec(old)} after init and {_spec(new)} after {method}",
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


def _random_legal(mask: Any, key: PRNGKey) -> Any:
    """A uniformly random legal action; any action once none is legal (a finished game may
    mask them all)."""
    logits = jnp.where(mask | ~mask.any(), 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def _random_game(env: AbstractEnv, key: PRNGKey, max_steps: int, read) -> Any:
    """`read` of every state of one game of uniformly random legal actions, stepped on
    after its end: `[max_steps + 1, ...]`, the new episode's first."""

    def one_step(state, key):
        action_key, step_key = jax.random.split(key)
        action = _random_legal(env.legal_action_mask(state), action_key)
        state = env.step(state, action, step_key)
        return state, read(state)

    init_key, steps_key = jax.random.split(key)
    state = env.init(init_key)
    _, later = jax.lax.scan(one_step, state, jax.random.split(steps_key, max_steps))
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), read(state), later)


def _check_games(env: AbstractEnv, name: str, key: PRNGKey, num_games: int, max_steps: int) -> None:
    def play(key):
        return _random_game(env, key, max_steps, lambda state: _readout(env, state))

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


# --- chance --------------------------------------------------------------------------------


def _check_no_chance_methods(env: AbstractEnv, name: str) -> None:
    found = [method for method in _CHANCE_METHODS if callable(getattr(env, method, None))]
    if found:
        raise _fail(
            name,
            f"it has chance methods ({', '.join(found)}) but does not subclass "
            "azx.envs.AbstractChanceEnv, so a search would sample its chance through step "
            "instead of planning over it; subclass azx.envs.AbstractChanceEnv (which also "
            "asks for num_outcomes)",
        )


def _check_chance_shapes(env: AbstractChanceEnv, name: str) -> None:
    num_outcomes = env.num_outcomes
    if isinstance(num_outcomes, bool) or not isinstance(num_outcomes, int) or num_outcomes < 1:
        raise _fail(name, f"num_outcomes must be a positive Python int, got {num_outcomes!r}")
    key = jax.random.key(0)
    state = jax.eval_shape(env.init, key)
    action = jax.ShapeDtypeStruct((), jnp.int32)
    outcome = jax.ShapeDtypeStruct((), jnp.int32)
    try:
        after = jax.eval_shape(env.afterstate, state, action)
    except Exception as error:
        raise _fail(name, f"afterstate(state, action) fails when traced: {error}") from error
    expected = {
        "has_chance(afterstate)": (env.has_chance, (after,), (), "bool"),
        "chance_probabilities(afterstate)": (
            env.chance_probabilities,
            (after,),
            (num_outcomes,),
            "floating",
        ),
        "chance_outcome_mask(afterstate)": (
            env.chance_outcome_mask,
            (after,),
            (num_outcomes,),
            "bool",
        ),
        "sample_outcome(afterstate, key)": (env.sample_outcome, (after, key), (), "integer"),
    }
    for call, (method, args, shape, kind) in expected.items():
        try:
            out = jax.eval_shape(method, *args)
        except Exception as error:
            raise _fail(name, f"{call} fails when traced: {error}") from error
        if not hasattr(out, "shape") or not hasattr(out, "dtype"):
            raise _fail(name, f"{call} must return one array, got {out!r}")
        if tuple(out.shape) != shape or not jnp.issubdtype(out.dtype, getattr(jnp, kind)):
            raise _fail(name, f"{call} must return {kind}{list(shape)}, got {_spec(out)}")
    try:
        applied = jax.eval_shape(env.apply_outcome, after, outcome)
    except Exception as error:
        raise _fail(
            name, f"apply_outcome(afterstate, outcome) fails when traced: {error}"
        ) from error
    _check_layout(name, "apply_outcome", state, applied)


def _flat_readout(env: AbstractEnv, state: Any) -> Float[Array, " size"]:
    """What the search reads of one state, as one float vector in the order of `_READERS`
    (so that it ends with the rewards, terminated, truncated and the player)."""
    return jnp.concatenate(
        [jnp.ravel(getattr(env, reader)(state)).astype(jnp.float32) for reader in _READERS]
    )


def _binomial_p_value(count: int, trials: int, probability: float) -> float:
    """Exact two-sided p-value of `count` successes in `trials` draws of probability
    `probability`: twice the smaller tail, at most 1."""
    if probability <= 0.0:
        return 1.0 if count == 0 else 0.0
    if probability >= 1.0:
        return 1.0 if count == trials else 0.0
    log_p, log_q = math.log(probability), math.log1p(-probability)

    def pmf(k: int) -> float:
        log_choose = math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1)
        return math.exp(log_choose + k * log_p + (trials - k) * log_q)

    lower = sum(pmf(k) for k in range(count + 1))
    upper = sum(pmf(k) for k in range(count, trials + 1))
    return min(1.0, 2.0 * min(lower, upper))


def _check_chance(
    env: AbstractChanceEnv,
    name: str,
    key: PRNGKey,
    num_games: int,
    max_steps: int,
    num_samples: int,
) -> None:
    games_key, actions_key, pick_key, samples_key = jax.random.split(key, 4)

    # Every state of random games (also those after the end), with a random legal action.
    def play(key):
        return _random_game(env, key, max_steps, lambda state: state)

    def read(state, key):
        action = _random_legal(env.legal_action_mask(state), key)
        after = env.afterstate(state, action)
        return {
            "action": action,
            "has_chance": env.has_chance(after),
            "probabilities": env.chance_probabilities(after),
            "mask": env.chance_outcome_mask(after),
            "over": env.terminated(state) | env.truncated(state),
        }

    try:
        states = jax.jit(jax.vmap(play))(jax.random.split(games_key, num_games))
        states = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), states)
        count = num_games * (max_steps + 1)
        reads = jax.jit(jax.vmap(read))(states, jax.random.split(actions_key, count))
    except Exception as error:
        raise _fail(name, f"the chance methods fail under jax.jit and jax.vmap: {error}") from error
    reads = {what: np.asarray(value) for what, value in reads.items()}
    actions = reads["action"]

    def where(index: int) -> str:
        game, step = divmod(index, max_steps + 1)
        return f"random game {game}, step {step}, action {actions[index]}"

    def first_where(bad: np.ndarray, promise: str) -> None:
        if bad.any():
            raise _fail(name, f"{promise} ({where(int(np.argmax(bad)))})")

    probabilities, mask = reads["probabilities"], reads["mask"]
    bad = ~np.isfinite(probabilities).all(axis=-1) | (probabilities < 0).any(axis=-1)
    first_where(
        bad,
        "chance_probabilities(afterstate) must be finite and non-negative, got "
        f"{probabilities[np.argmax(bad)]}",
    )
    first_where(
        (mask != (probabilities > 0)).any(axis=-1),
        "chance_outcome_mask(afterstate) must be true exactly where chance_probabilities is "
        "positive",
    )
    total = np.where(mask, probabilities, 0.0).sum(axis=-1)
    first_where(
        np.abs(total - 1.0) > 1e-4,
        "chance_probabilities(afterstate) must sum to 1 over the outcome mask, sums to "
        f"{total[np.argmax(np.abs(total - 1.0) > 1e-4)]:.6f}",
    )
    no_chance = ~reads["has_chance"]
    first_where(
        no_chance & (np.abs(probabilities[:, 0] - 1.0) > 1e-4),
        "where has_chance(afterstate) is false, chance_probabilities must put all the mass "
        "on outcome 0",
    )

    # The sampled tests, at a few afterstates of each kind.
    over = reads["over"]
    kinds = {
        "chance": reads["has_chance"] & ~over,
        "no chance": no_chance & ~over,
        "over": over,
    }
    rng = np.random.default_rng(np.asarray(jax.random.key_data(pick_key)).ravel())
    picked = {
        kind: rng.permutation(np.flatnonzero(is_kind))[:16] for kind, is_kind in kinds.items()
    }
    rows = np.concatenate(list(picked.values()))
    if not rows.size:
        return

    def sample(state, action, key):
        after = env.afterstate(state, action)
        outcomes = jnp.arange(env.num_outcomes, dtype=jnp.int32)
        applied = jax.vmap(lambda o: _flat_readout(env, env.apply_outcome(after, o)))(outcomes)
        step_keys = jax.random.split(key, num_samples)
        stepped = jax.vmap(lambda k: _flat_readout(env, env.step(state, action, k)))(step_keys)
        draw_keys = jax.random.split(jax.random.fold_in(key, 1), num_samples)
        drawn = jax.vmap(lambda k: env.sample_outcome(after, k))(draw_keys)
        return applied, stepped, drawn

    chosen = jax.tree.map(lambda x: x[rows], states)
    try:
        applied, stepped, drawn = jax.jit(jax.vmap(sample))(
            chosen, jnp.asarray(actions[rows]), jax.random.split(samples_key, len(rows))
        )
    except Exception as error:
        raise _fail(name, f"the chance methods fail under jax.jit and jax.vmap: {error}") from error
    applied, stepped, drawn = np.asarray(applied), np.asarray(stepped), np.asarray(drawn)
    # Two counts (step's and sample_outcome's) per outcome and tested afterstate.
    num_tests = max(1, 2 * len(picked["chance"]) * env.num_outcomes)
    level = _FALSE_ALARM / num_tests
    kind_of_row = [kind for kind, some in picked.items() for _ in some]
    for index, (row, kind) in enumerate(zip(rows, kind_of_row, strict=True)):
        at = where(int(row))
        p = probabilities[row]
        if kind == "over":
            _check_finished(env, name, applied[index], p, at)
            continue
        # Outcomes that give the same state are one class; the class of each outcome and
        # of each sampled state (-1: no outcome gives it).
        same = _close(applied[index][:, None], applied[index][None])  # [outcome, outcome]
        outcome_class = np.argmax(same, axis=1)
        unique, inverse = np.unique(stepped[index], axis=0, return_inverse=True)
        matches = _close(unique[:, None], applied[index][None])  # [unique, outcome]
        sample_class = np.where(matches.any(axis=1), outcome_class[np.argmax(matches, axis=1)], -1)
        sample_class = sample_class[np.ravel(inverse)]
        if kind == "no chance":
            if (sample_class != outcome_class[0]).any():
                raise _fail(
                    name,
                    "has_chance(afterstate) is false, but step(state, action, key) gives "
                    "different states for different keys, not always the state "
                    f"apply_outcome(afterstate, 0) gives ({at})",
                )
            continue
        if (sample_class < 0).any():
            raise _fail(
                name,
                "step(state, action, key) gives a state that apply_outcome(afterstate(state, "
                f"action), outcome) gives for no outcome ({at})",
            )
        class_probability = np.bincount(outcome_class, weights=p, minlength=len(p))
        _test_counts(
            name,
            "step(state, action, key) is not distributed as apply_outcome(afterstate(state, "
            "action), outcome) with outcome drawn from chance_probabilities",
            np.bincount(sample_class, minlength=len(p)),
            class_probability,
            num_samples,
            level,
            at,
        )
        out_of_range = (drawn[index] < 0) | (drawn[index] >= env.num_outcomes)
        if out_of_range.any():
            raise _fail(
                name,
                f"sample_outcome(afterstate, key) must draw an outcome in [0, "
                f"{env.num_outcomes}), drew {drawn[index][out_of_range][0]} ({at})",
            )
        _test_counts(
            name,
            "sample_outcome(afterstate, key) is not distributed as chance_probabilities",
            np.bincount(outcome_class[drawn[index]], minlength=len(p)),
            class_probability,
            num_samples,
            level,
            at,
        )


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which readouts agree (floats within a rounding tolerance), over the last axis."""
    return np.isclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True).all(axis=-1)


def _test_counts(
    name: str,
    promise: str,
    counts: np.ndarray,
    probabilities: np.ndarray,
    trials: int,
    level: float,
    where: str,
) -> None:
    for outcome in np.flatnonzero((counts > 0) | (probabilities > 0)):
        count, probability = int(counts[outcome]), float(probabilities[outcome])
        p_value = _binomial_p_value(count, trials, probability)
        if p_value < level:
            raise _fail(
                name,
                f"{promise}: outcome {outcome} (probability {probability:.4f}, with the "
                f"outcomes that give the same state) came {count} times in {trials} samples, "
                f"expected {trials * probability:.1f}; two-sided binomial p-value "
                f"{p_value:.1e} < {level:.1e} ({where})",
            )


def _check_finished(
    env: AbstractChanceEnv, name: str, applied: np.ndarray, probabilities: np.ndarray, where: str
) -> None:
    # The flat readout ends with rewards [num_players], terminated, truncated, player.
    n = env.num_players
    rewards = applied[:, -(n + 3) : -3]
    finished = (applied[:, -3] != 0) | (applied[:, -2] != 0)
    possible = probabilities > 0
    if (possible & ~finished).any():
        raise _fail(
            name,
            "apply_outcome at a finished (terminated or truncated) episode must keep it "
            f"finished, as step does; outcome {np.argmax(possible & ~finished)} restarts it "
            f"({where})",
        )
    if (possible & (rewards != 0).any(axis=-1)).any():
        raise _fail(
            name,
            "apply_outcome at a finished (terminated or truncated) episode must give zero "
            f"rewards, as step does; outcome {np.argmax(possible & (rewards != 0).any(-1))} "
            f"pays {rewards[np.argmax(possible & (rewards != 0).any(-1))]} ({where})",
        )
