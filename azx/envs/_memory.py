import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._types import PRNGKey
from .._validate import check_non_negative_int, check_positive_int
from ._abstract import AbstractEnv


class CueMemoryState(eqx.Module):
    cue: Int[Array, ""]
    time: Int[Array, ""]
    reward: Float[Array, ""]
    terminated: Bool[Array, ""]


class CueMemory(AbstractEnv):
    """A single-player task that only a policy with memory can solve.

    The first observation shows one of `num_cues` cues (one-hot); the next `delay`
    observations are blank; the last one asks for the cue back (a query flag). Answering
    the query with the action of the cue's number gives reward 1, any other action 0, and
    ends the episode. Actions before the query do nothing. A memoryless policy sees the same
    query whatever the cue was, so its success rate is `1 / num_cues`; a policy that
    remembers the first observation succeeds every time.

    Observation: `num_cues + 1` floats (the cue's one-hot, then the query flag).
    """

    name = "cue_memory"

    num_cues: int = eqx.field(static=True)
    delay: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, num_cues: int = 2, delay: int = 4):
        """**Arguments:**

        - `num_cues`: cues to tell apart (and actions), at least 2.
        - `delay`: blank steps between the cue and the query.
        """
        check_positive_int("num_cues", num_cues)
        if num_cues < 2:
            raise ValueError(f"num_cues must be at least 2, got {num_cues}")
        check_non_negative_int("delay", delay)
        self.num_cues = num_cues
        self.delay = delay
        self.num_actions = num_cues
        self.num_players = 1
        self.observation_shape = (num_cues + 1,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key: PRNGKey) -> CueMemoryState:
        return CueMemoryState(
            cue=jax.random.randint(key, (), 0, self.num_cues),
            time=jnp.int32(0),
            reward=jnp.float32(0.0),
            terminated=jnp.bool_(False),
        )

    def step(self, state: CueMemoryState, action: Int[Array, ""], key: PRNGKey) -> CueMemoryState:
        del key
        answered = (state.time == self.delay + 1) & ~state.terminated
        reward = jnp.where(answered & (action == state.cue), 1.0, 0.0).astype(jnp.float32)
        return CueMemoryState(
            cue=state.cue,
            time=jnp.where(state.terminated, state.time, state.time + 1),
            reward=reward,
            terminated=state.terminated | answered,
        )

    def observation(self, state: CueMemoryState) -> Float[Array, " observation"]:
        cue = jax.nn.one_hot(state.cue, self.num_cues, dtype=jnp.float32)
        shown = jnp.where(state.time == 0, cue, jnp.zeros_like(cue))
        query = (state.time == self.delay + 1).astype(jnp.float32)
        return jnp.concatenate([shown, query[None]])

    def legal_action_mask(self, state: CueMemoryState) -> Bool[Array, " num_actions"]:
        return jnp.ones(self.num_actions, jnp.bool_)

    def rewards(self, state: CueMemoryState) -> Float[Array, "1"]:
        return state.reward[None]

    def terminated(self, state: CueMemoryState) -> Bool[Array, ""]:
        return state.terminated

    def truncated(self, state: CueMemoryState) -> Bool[Array, ""]:
        return jnp.bool_(False)

    def current_player(self, state: CueMemoryState) -> Int[Array, ""]:
        return jnp.int32(0)
