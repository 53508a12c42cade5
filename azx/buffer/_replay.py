from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import PRNGKey
from .._validate import check_positive_int
from ._ring import empty_rings, sample_valid, write_rings


class Experience(eqx.Module):
    """One self-play step, as the buffer stores it: one per environment row per `add`.

    Every field may carry leading batch axes (`*batch`): none for the `example` given to
    [`azx.buffer.ReplayBuffer.init`][], `num_envs` for `add`, `num_envs capacity_per_env`
    inside [`azx.buffer.BufferState`][].
    """

    observation: Shaped[Array, "..."]
    """What the network sees, for the player to move (any shape and dtype)."""
    legal_action_mask: Bool[Array, "*batch num_actions"]
    policy_target: Float[Array, "*batch num_actions"]
    """The search's improved policy: probabilities, zero on illegal actions."""
    reward: Float[Array, "*batch"]
    """Reward to the player to move, for the transition its action caused."""
    discount: Float[Array, "*batch"]
    """How the next step's value counts for this step's mover, gamma included: `-gamma`
    when the turn passes to the opponent, `+gamma` when the same player moves again (the
    convention of [`azx.search.Transition`][]). Never read on the step that ends an
    episode, so a `0` there (as `Transition` gives at terminal states) is fine."""
    root_value: Float[Array, "*batch"]
    """The search's value of this step's state, for the player to move."""


class BufferState(eqx.Module):
    """The contents of a [`azx.buffer.ReplayBuffer`][]: one ring of steps per env row.

    Every leaf has the row axis first, so that sharding rows over devices shards the whole
    state and `add` / `sample` need no communication between rows.
    """

    experience: Experience
    """Stored steps; every leaf is `[num_envs, capacity_per_env, ...]`."""
    value_target: Float[Array, "num_envs capacity_per_env"]
    """The value target where `has_target`. While a step's episode is still running it
    holds the partial return `sum_k (d_t ... d_{k-1}) r_k` over the steps seen so far."""
    discount_product: Float[Array, "num_envs capacity_per_env"]
    """For steps of a running episode: `d_t ... d_now`, what the rest of the episode's
    value is multiplied by in this step's target."""
    has_target: Bool[Array, "num_envs capacity_per_env"]
    """The slot holds a step whose value target is known: the only slots sampled."""
    pending: Bool[Array, "num_envs capacity_per_env"]
    """The slot holds a step of its row's running episode (target not yet known)."""
    position: Int[Array, " num_envs"]
    """Next slot to write in each row (the oldest step, once the ring is full)."""


class Batch(eqx.Module):
    """A training minibatch drawn by [`azx.buffer.ReplayBuffer.sample`][]."""

    observation: Shaped[Array, "batch ..."]
    legal_action_mask: Bool[Array, "batch num_actions"]
    policy_target: Float[Array, "batch num_actions"]
    value_target: Float[Array, " batch"]
    """Return of the step's episode for its mover (or bootstrapped, see `ReplayBuffer`)."""
    root_value: Float[Array, " batch"]
    """The search's value at the step, e.g. to blend with `value_target`."""
    mask: Bool[Array, " batch"]
    """Which rows are real samples. Rows with `False` hold finite filler: weight them zero.
    All `False` exactly when the buffer has no step with a known target."""


_TRUNCATION_MODES = ("drop", "bootstrap")


def _check_experience(experience: Experience, batch_shape: tuple[int, ...]) -> None:
    # Shapes are static, so these checks cost nothing under jit and give a readable error
    # where the alternative is a broadcasting failure deep inside `add`.
    scalars = {
        "reward": experience.reward,
        "discount": experience.discount,
        "root_value": experience.root_value,
    }
    for name, value in scalars.items():
        if jnp.shape(value) != batch_shape:
            raise ValueError(
                f"Experience.{name} must have shape {batch_shape}, got {jnp.shape(value)}"
            )
        if not jnp.issubdtype(jnp.result_type(value), jnp.floating):
            raise ValueError(
                f"Experience.{name} must be floating point, got {jnp.result_type(value)}"
            )
    dtypes = {jnp.result_type(value) for value in scalars.values()}
    if len(dtypes) != 1:
        raise ValueError(
            "Experience.reward, discount and root_value must share one float dtype, got "
            f"{sorted(str(dtype) for dtype in dtypes)}"
        )
    mask_shape = jnp.shape(experience.legal_action_mask)
    if len(mask_shape) != len(batch_shape) + 1 or mask_shape[:-1] != batch_shape:
        raise ValueError(
            f"Experience.legal_action_mask must have shape {batch_shape} + (num_actions,), "
            f"got {mask_shape}"
        )
    if jnp.shape(experience.policy_target) != mask_shape:
        raise ValueError(
            f"Experience.policy_target must have the shape of legal_action_mask {mask_shape}, "
            f"got {jnp.shape(experience.policy_target)}"
        )
    if jnp.shape(experience.observation)[: len(batch_shape)] != batch_shape:
        raise ValueError(
            f"Experience.observation must start with the batch axes {batch_shape}, got "
            f"shape {jnp.shape(experience.observation)}"
        )


class ReplayBuffer(eqx.Module):
    """Episode replay buffer: fixed-size rings of self-play steps with value targets.

    Configuration only; the contents live in a [`azx.buffer.BufferState`][] that `init`
    creates and `add` returns updated. Storage is one ring per environment row, and every
    `add` writes one step into every row, overwriting that row's oldest step once full.

    **Value targets.** A step's target is the return, for the player to move at that step,
    of the rest of its episode: with per-step reward `r` and discount `d`,

        target_t = r_t + d_t * target_{t+1}

    - Terminated at step `T` (the transition caused by step `T`'s action ended the game):
      `target_T = r_T`. Two-player zero-sum games (`d = -1`, the mover's outcome in `r`
      of the final ply) get the outcome with its sign flipping each ply; single-player
      games (`d = gamma`) get the discounted return of their intermediate rewards. Turns
      that pass to the same player again (`d = +gamma`) keep the sign.
    - Truncated at step `T` (time limit; the true outcome is unknown): with
      `truncation="drop"` the episode's steps are never sampled. With
      `truncation="bootstrap"`, `target_T = root_value_T`, the search's own estimate of
      step `T`'s state, and earlier steps follow the recursion from there. This needs no
      look at the state after truncation, and treats the search value as the best
      available estimate of the return from `T` on. An episode both terminated and
      truncated counts as terminated: its outcome is known.
    - A running episode's steps have no target yet and are never sampled.

    Each step keeps its partial return and the product of discounts since it was stored,
    updated at every `add`, so that when its episode ends its target is one multiply-add
    away. That costs `O(num_envs * capacity_per_env)` elementwise work per `add`, with no
    sequential loop over the ring, and stays correct when an episode outgrows the ring:
    its oldest steps are overwritten, and the steps still held get their targets from the
    later steps alone, which is all the recursion needs.

    `add` and `sample` read the row count from the state, not from `num_envs`, so under
    `shard_map` each shard passes its own rows.
    """

    capacity: int = eqx.field(static=True)
    num_envs: int = eqx.field(static=True)
    truncation: Literal["drop", "bootstrap"] = eqx.field(static=True)

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        *,
        truncation: str = "drop",
    ):
        """**Arguments:**

        - `capacity`: total number of steps held, over all rows; a multiple of `num_envs`.
        - `num_envs`: number of environment rows (the self-play batch size).
        - `truncation`: what a truncated episode's steps get: `"drop"` (never sampled) or
          `"bootstrap"` (targets from the last step's root value; see the class docstring).

        Discounting lives in each step's `Experience.discount`, not here, so that the
        buffer and the search can never disagree about `gamma`.
        """
        check_positive_int("capacity", capacity)
        check_positive_int("num_envs", num_envs)
        if capacity % num_envs != 0:
            lower = max(num_envs, capacity - capacity % num_envs)
            raise ValueError(
                f"capacity must be a multiple of num_envs={num_envs} (one ring per row), got "
                f"{capacity}; e.g. {lower} or {lower + num_envs}"
            )
        if truncation not in _TRUNCATION_MODES:
            raise ValueError(f"truncation must be one of {_TRUNCATION_MODES}, got {truncation!r}")
        self.capacity = capacity
        self.num_envs = num_envs
        self.truncation = truncation

    @property
    def capacity_per_env(self) -> int:
        """Length of each row's ring."""
        return self.capacity // self.num_envs

    def init(self, example: Experience) -> BufferState:
        """An empty buffer for steps shaped like `example` (ONE step, no batch axes).

        **Arguments:** `example`: any step of the right shapes and dtypes; values unused.

        **Returns:** a `BufferState` with nothing to sample.
        """
        _check_experience(example, ())
        rows, slots = self.num_envs, self.capacity_per_env
        experience = empty_rings(example, rows, slots)
        float_dtype = jnp.result_type(example.reward)
        return BufferState(
            experience=experience,
            value_target=jnp.zeros((rows, slots), float_dtype),
            discount_product=jnp.ones((rows, slots), float_dtype),
            has_target=jnp.zeros((rows, slots), jnp.bool_),
            pending=jnp.zeros((rows, slots), jnp.bool_),
            position=jnp.zeros(rows, jnp.int32),
        )

    def add(
        self,
        state: BufferState,
        experience: Experience,
        *,
        terminated: Bool[Array, " num_envs"],
        truncated: Bool[Array, " num_envs"],
    ) -> BufferState:
        """Store one step per row and assign value targets where an episode just ended.

        **Arguments:**

        - `state`: the buffer so far.
        - `experience`: this step in every row (leading axis `num_envs`).
        - `terminated`: the transition caused by this step's action ended the episode by
          the rules of the game (keyword-only).
        - `truncated`: the episode was cut short after this step (keyword-only).

        The next `add` to a row whose episode ended starts a new episode there.

        **Returns:** the updated `BufferState`.
        """
        rows, slots = state.has_target.shape
        _check_experience(experience, (rows,))
        if terminated.shape != (rows,) or truncated.shape != (rows,):
            raise ValueError(
                f"terminated and truncated must have shape ({rows},), got {terminated.shape} "
                f"and {truncated.shape}"
            )
        written = jax.nn.one_hot(state.position, slots, dtype=jnp.bool_)
        stored = write_rings(state.experience, state.position, experience)
        # The new step joins its row's running episode as a fresh partial return (empty sum,
        # empty product); whatever the slot held before is forgotten.
        pending = state.pending | written
        partial = jnp.where(written, 0.0, state.value_target)
        product = jnp.where(written, 1.0, state.discount_product)

        reward = experience.reward[:, None]
        discount = experience.discount[:, None]
        ended = (terminated | truncated)[:, None]
        bootstrap = self.truncation == "bootstrap"
        gets_target = terminated | (truncated if bootstrap else jnp.zeros_like(truncated))
        # Value, for this step's mover, of everything from this step on: its reward once
        # the game is over; the search's estimate when bootstrapping a truncation.
        tail = jnp.where(terminated, experience.reward, experience.root_value)[:, None]
        running = pending & ~ended
        value_target = jnp.where(
            pending & gets_target[:, None],
            partial + product * tail,
            jnp.where(running, partial + product * reward, partial),
        )
        return BufferState(
            experience=stored,
            value_target=value_target,
            discount_product=jnp.where(running, product * discount, product),
            has_target=(state.has_target & ~written) | (pending & gets_target[:, None]),
            pending=running,
            position=(state.position + 1) % slots,
        )

    def sample(self, state: BufferState, *, key: PRNGKey, batch_size: int) -> Batch:
        """Draw `batch_size` steps uniformly, with replacement, from steps with targets.

        Draws over all rows of `state` (under `shard_map`: this shard's rows).

        **Arguments:**

        - `state`: the buffer.
        - `key`: random key (keyword-only).
        - `batch_size`: number of steps (keyword-only; a positive int).

        **Returns:** a [`azx.buffer.Batch`][]; `mask` is all `True` once any step has a
        target and all `False` before, in which case the learner should skip its update.
        """
        check_positive_int("batch_size", batch_size)
        rows, slots = state.has_target.shape
        valid = state.has_target.reshape(rows * slots)
        flat = sample_valid(valid, key=key, batch_size=batch_size)
        row, slot = flat // slots, flat % slots
        picked = jax.tree.map(lambda ring: ring[row, slot], state.experience)
        return Batch(
            observation=picked.observation,
            legal_action_mask=picked.legal_action_mask,
            policy_target=picked.policy_target,
            value_target=state.value_target[row, slot],
            root_value=picked.root_value,
            mask=valid[flat],
        )

    def num_valid(self, state: BufferState) -> Int[Array, ""]:
        """How many stored steps have a value target (can be sampled)."""
        return jnp.sum(state.has_target, dtype=jnp.int32)

    def num_pending(self, state: BufferState) -> Int[Array, ""]:
        """How many stored steps belong to still-running episodes."""
        return jnp.sum(state.pending, dtype=jnp.int32)
