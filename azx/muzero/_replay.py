"""The replay of trajectory segments: one ring of self-play steps per game row, from which
the learner draws segments of consecutive steps, and their unroll targets."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import PRNGKey
from ..buffer._ring import empty_rings, sample_valid, write_rings
from ..envs import AbstractEnv


class Step(eqx.Module):
    """One self-play step as the replay stores it (leading axes `*batch`: none for the
    example given to `init`, `num_envs` for `add`, `num_envs slots` inside the state)."""

    observation: Shaped[Array, "..."]
    legal_action_mask: Bool[Array, "*batch num_actions"]
    """The legal actions at `observation` (what a fresh search there needs: reanalyse)."""
    action: Int[Array, "*batch"]
    policy_target: Float[Array, "*batch num_actions"]
    """The search's policy (zero on illegal actions)."""
    reward: Float[Array, "*batch"]
    """Reward to the mover for the transition its action caused."""
    discount: Float[Array, "*batch"]
    """`+gamma`, or `-gamma` when the turn passed to the other player (as in
    [`azx.search.Transition`][])."""
    root_value: Float[Array, "*batch"]
    """The search's value of the step's state, for its mover: what n-step returns
    bootstrap from."""
    terminated: Bool[Array, "*batch"]
    """The step's action ended the episode by the rules."""
    truncated: Bool[Array, "*batch"]
    """The episode was cut short after this step (time limit)."""


def blank_step(env: AbstractEnv) -> Step:
    """ONE step of `env` with every field zero (and `False`): the example a
    [`azx.muzero.SegmentReplay`][] lays its empty rings out from."""
    return Step(
        observation=jnp.zeros(env.observation_shape, env.observation_dtype),
        legal_action_mask=jnp.zeros(env.num_actions, bool),
        action=jnp.int32(0),
        policy_target=jnp.zeros(env.num_actions, jnp.float32),
        reward=jnp.float32(0.0),
        discount=jnp.float32(0.0),
        root_value=jnp.float32(0.0),
        terminated=jnp.bool_(False),
        truncated=jnp.bool_(False),
    )


class ReplayState(eqx.Module):
    """The contents of a [`azx.muzero.SegmentReplay`][]; every leaf has the row axis
    first, so sharding rows over devices shards the replay."""

    steps: Step
    """Every leaf `[num_envs, slots, ...]`."""
    written: Bool[Array, "num_envs slots"]
    position: Int[Array, " num_envs"]
    """Next slot to write in each row (the oldest, once the ring is full)."""


class Targets(eqx.Module):
    """What one segment trains, unroll step by unroll step (`k = 0 ... K`)."""

    actions: Int[Array, " unroll"]
    """The actions the model is unrolled with (`K` of them)."""
    policy_target: Float[Array, "unroll_plus_one num_actions"]
    value_target: Float[Array, " unroll_plus_one"]
    reward_target: Float[Array, " unroll"]
    """Reward of the `k`-th action, `k = 0 ... K - 1`."""
    mask: Bool[Array, " unroll_plus_one"]
    """Step `k` lies in the segment's episode (its policy is trained there)."""
    value_mask: Bool[Array, " unroll_plus_one"]
    """Step `k`'s value is trained: `mask`, and with `absorbing_end` also every step after
    a termination (its target 0)."""
    next_observation: Shaped[Array, "unroll ..."]
    """The observations of steps `k = 1 ... K`, what the consistency loss compares the
    dynamics' embeddings with; where `mask[k]` is False they are the next episode's."""
    reward_mask: Bool[Array, " unroll"]
    """The `k`-th action's reward is trained: it was taken in the segment's episode, or,
    with `absorbing_end`, after the episode terminated (its target 0)."""


def unroll_targets(
    window: Step, unroll_steps: int, td_steps: int, *, absorbing_end: bool = False
) -> Targets:
    """The targets of the segment that starts at `window`'s first step (`window`: `K + n + 1`
    consecutive steps of one row, `K = unroll_steps`, `n = td_steps`).

    The value target of step `p` is the n-step return for its mover,
    `r_p + d_p r_{p+1} + ... + (d_p ... d_{p+n-2}) r_{p+n-1} + (d_p ... d_{p+n-1}) v_{p+n}`
    with `v` the stored root values, cut at the episode's end: after a termination nothing
    is added (the game is over), and at a truncation the truncated step's root value
    stands for the rest (the state after it was never searched). Steps past the episode's
    end (later steps of the ring belong to the next episode) are masked out; with
    `absorbing_end`, the steps after a termination (not a truncation: what follows a time
    limit is unknown) train value 0 and reward 0 instead, the end of the game an absorbing
    state as in the MuZero paper, so that a search that looks past the end of the game
    finds nothing there. Their policy stays untrained.
    """
    horizon = unroll_steps + 1
    ended = window.terminated | window.truncated
    # mask[k]: no end among steps 0 .. k-1.
    no_end_before = jnp.cumprod(jnp.concatenate([jnp.ones(1, bool), ~ended[:-1]]))
    mask = no_end_before[:horizon].astype(bool)

    value = jnp.zeros(horizon, jnp.float32)
    product = jnp.ones(horizon, jnp.float32)
    stopped = jnp.zeros(horizon, bool)
    for i in range(td_steps):
        index = slice(i, i + horizon)
        reward, discount = window.reward[index], window.discount[index]
        terminated, truncated = window.terminated[index], window.truncated[index]
        tail = jnp.where(terminated, reward, jnp.where(truncated, window.root_value[index], reward))
        value = jnp.where(stopped, value, value + product * tail)
        product = jnp.where(stopped | terminated | truncated, product, product * discount)
        stopped = stopped | terminated | truncated
    bootstrap = window.root_value[td_steps : td_steps + horizon]
    value = jnp.where(stopped, value, value + product * bootstrap)
    if absorbing_end:
        # The segment's episode terminated (its first end is a termination) before step k.
        first_end = jnp.argmax(ended)
        terminated_first = jnp.any(ended) & window.terminated[first_end]
        value_mask = mask | terminated_first
    else:
        value_mask = mask
    return Targets(
        actions=window.action[:unroll_steps],
        policy_target=window.policy_target[:horizon],
        value_target=jnp.where(mask, value, 0.0),
        reward_target=jnp.where(mask[:unroll_steps], window.reward[:unroll_steps], 0.0),
        mask=mask,
        value_mask=value_mask,
        reward_mask=value_mask[:unroll_steps],
        next_observation=window.observation[1:horizon],
    )


class SegmentReplay(eqx.Module):
    """Fixed-size rings of self-play steps, one per game row, sampled as segments.

    A step is drawn as a segment start once `unroll_steps + td_steps` later steps of its
    row are stored: the window its targets read ([`azx.muzero.unroll_targets`][]) is then
    complete and, being the newest steps, not yet overwritten. Configuration only; the
    contents live in a [`azx.muzero.ReplayState`][].
    """

    slots: int = eqx.field(static=True)
    """Steps held per row."""
    unroll_steps: int = eqx.field(static=True)
    td_steps: int = eqx.field(static=True)
    absorbing_end: bool = eqx.field(static=True, default=False)
    """As in [`azx.muzero.unroll_targets`][]."""

    @property
    def window(self) -> int:
        return self.unroll_steps + self.td_steps + 1

    def init(self, example: Step, num_envs: int) -> ReplayState:
        """An empty replay for `num_envs` rows of steps shaped like `example` (ONE step)."""
        return ReplayState(
            steps=empty_rings(example, num_envs, self.slots),
            written=jnp.zeros((num_envs, self.slots), bool),
            position=jnp.zeros(num_envs, jnp.int32),
        )

    def add(self, state: ReplayState, step: Step) -> ReplayState:
        """Store one step in every row (leading axis: the rows of `state`)."""
        rows = jnp.arange(state.position.shape[0])
        return ReplayState(
            steps=write_rings(state.steps, state.position, step),
            written=state.written.at[rows, state.position].set(True),
            position=(state.position + 1) % self.slots,
        )

    def sampleable(self, state: ReplayState) -> Bool[Array, "num_envs slots"]:
        """Slots whose whole window is stored."""
        slots = jnp.arange(self.slots)[None, :]
        later = (state.position[:, None] - 1 - slots) % self.slots
        return state.written & (later >= self.window - 1)

    def choose_row(self, state: ReplayState, *, key: PRNGKey, count: int) -> Int[Array, " count"]:
        """`count` distinct slots of ONE row (`state`'s leaves without the row axis), drawn
        uniformly among its stored steps (as many as are stored, the rest unstored slots):
        the steps reanalyse re-searches."""
        if count > self.slots:
            raise ValueError(f"count ({count}) exceeds the row's {self.slots} slots")
        noise = jax.random.gumbel(key, (self.slots,))
        return jax.lax.top_k(jnp.where(state.written, noise, -jnp.inf), count)[1]

    def sample_row(
        self, state: ReplayState, *, key: PRNGKey, batch_size: int
    ) -> tuple[Targets, Shaped[Array, "batch ..."], Bool[Array, " batch"]]:
        """`batch_size` segments drawn uniformly, with replacement, from ONE row (`state`'s
        leaves without the row axis): their targets, first observations, and which are
        real (all `False` while the row has no complete window; the rest is filler)."""
        valid = self.sampleable(jax.tree.map(lambda x: x[None], state))[0]
        start = sample_valid(valid, key=key, batch_size=batch_size)
        index = (start[:, None] + jnp.arange(self.window)[None, :]) % self.slots
        windows = jax.tree.map(lambda ring: ring[index], state.steps)
        targets = jax.vmap(
            lambda w: unroll_targets(
                w, self.unroll_steps, self.td_steps, absorbing_end=self.absorbing_end
            )
        )(windows)
        return targets, windows.observation[:, 0], valid[start]
