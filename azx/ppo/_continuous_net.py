import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._types import PRNGKey
from .._validate import check_positive_int
from ..nets import ActorCritic


class ContinuousActorCritic(eqx.Module):
    """Feed-forward actor-critic for continuous actions: one observation in,
    `(policy_outputs, value)` out, with `2 * action_size` policy outputs.

    An [`azx.nets.ActorCritic`][] gives the first half of the outputs (a Normal's means,
    or a Beta's first shapes; see [`azx.ppo.Config.action_distribution`][]). The second
    half (log standard deviations, or second shapes) comes either from the same head, so
    that it depends on the observation, or from one learned parameter per component,
    independent of the observation.
    """

    body: ActorCritic
    log_std: Float[Array, " action_size"] | None
    """The state-independent second half of the outputs (`None` when the head gives it)."""

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        action_size: int,
        *,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared_torso: bool = False,
        state_dependent_std: bool = False,
        initial_log_std: float = 0.0,
        key: PRNGKey,
    ):
        """**Arguments:**

        - `observation_shape`: shape of one observation.
        - `action_size`: components of an action (the environment's `num_actions`).
        - `hidden_sizes`, `activation`, `shared_torso`: as for [`azx.nets.ActorCritic`][].
        - `state_dependent_std`: the head gives the second half of the outputs too,
          instead of a parameter.
        - `initial_log_std`: the parameter's initial value (with
          `state_dependent_std=False`).
        - `key`: random key for the initial weights (keyword-only).
        """
        if not isinstance(state_dependent_std, bool):
            raise ValueError(
                f"state_dependent_std must be True or False, got {state_dependent_std!r}"
            )
        check_positive_int("action_size", action_size)
        head_size = 2 * action_size if state_dependent_std else action_size
        self.body = ActorCritic(
            observation_shape,
            head_size,
            hidden_sizes=hidden_sizes,
            activation=activation,
            shared_torso=shared_torso,
            key=key,
        )
        self.log_std = (
            None if state_dependent_std else jnp.full(action_size, initial_log_std, jnp.float32)
        )

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " outputs"], Float[Array, ""]]:
        """**Arguments:** one observation.

        **Returns:** `(policy_outputs, value)`.
        """
        outputs, value = self.body(observation)
        if self.log_std is not None:
            outputs = jnp.concatenate([outputs, self.log_std])
        return outputs, value
