import math

import equinox as eqx

from .._validate import check_positive_int
from ._distributions import CONTINUOUS_DISTRIBUTIONS, DISCRETE_DISTRIBUTIONS


def _number(name: str, value: object, *, low: float, high: float = math.inf, open_low=False):
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < low or value > high or (open_low and value == low):
        bound = f"> {low}" if open_low else f">= {low}"
        allowed = bound if high == math.inf else f"{bound} and <= {high}"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


class Config(eqx.Module):
    """Sizes and learning settings of a PPO run. Validated on construction.

    One `step` plays `rollout_length` steps in each of `num_envs` environments, then makes
    `num_epochs` passes over those transitions, each split into `num_minibatches` gradient
    updates. A feed-forward network's minibatch takes `rollout_length // num_minibatches`
    steps from every environment; a recurrent network's takes whole sequences of
    `num_envs // num_minibatches` environments.
    """

    num_envs: int = 4
    """Environments stepped in parallel."""
    rollout_length: int = 128
    """Steps taken in every environment per `step`."""
    num_epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Gradient updates per epoch."""
    learning_rate: float = 2.5e-4
    critic_learning_rate: float | None = None
    """If set, the critic's parameters (those under a field whose name starts with
    `value`, such as [`azx.nets.ActorCritic`][]'s value torso and head) learn at this
    rate and the rest at `learning_rate`, each with an Adam of its own. It needs separate
    torsos. `None`: one rate for all."""
    anneal_iterations: int | None = None
    """If set, the learning rate falls linearly to 0 over this many iterations (`step`
    calls), constant within each; afterwards it stays 0. `None`: constant."""
    adam_eps: float = 1e-5
    max_grad_norm: float = 0.5
    """Gradients are clipped to this global norm; 0 switches clipping off."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation (0: one-step TD, 1: Monte Carlo)."""
    clip_eps: float = 0.2
    """The policy ratio's clip range, `[1 - clip_eps, 1 + clip_eps]`."""
    kl_coef: float | None = None
    """If set, the policy loss is the KL-penalty objective instead of the clipped one:
    `-ratio * advantage + kl_coef * ((ratio - 1) - log(ratio))`, the penalty a
    per-sample estimate of KL(old policy ‖ new policy). `None`: the clipped objective."""
    value_clip_eps: float | None = 0.2
    """The value prediction may move at most this far from the rollout's value before the
    loss stops rewarding it (the larger of the clipped and unclipped squared errors).
    `None`: a plain squared error."""
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    normalize_advantages: str = "minibatch"
    """`"minibatch"`: advantages standardised over each minibatch; `"batch"`: over the
    whole rollout; `"off"`: used as they are."""
    truncation: str = "bootstrap"
    """What an episode cut short by a time limit gives the advantage: `"bootstrap"`, the
    value of its final observation (it had a future); `"terminate"`, nothing, as if it had
    ended by the rules."""
    normalize_observations: bool = False
    """Standardise observations by running statistics of every observation seen (combined
    over all shards), clipped to ±10."""
    observation_warmup_steps: int = 0
    """With `normalize_observations`: `init` plays this many steps in every environment
    with the initial policy, only to gather observation statistics, so that the first
    updates already see standardised observations. The environments continue from where
    the warm-up left them; its steps are neither learned from nor counted."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before the advantages and value targets are
    computed (the reported episode returns stay unscaled)."""
    action_distribution: str = "categorical"
    """The policy over actions: `"categorical"` for discrete actions; for continuous
    (box) actions `"tanh_normal"` (a Normal squashed into the bounds by tanh),
    `"normal"` (a Normal clipped to the bounds) or `"beta"` (a Beta scaled to the
    bounds). See [`azx.ppo.AbstractActionDistribution`][]."""

    def __check_init__(self):
        for name in ("num_envs", "rollout_length", "num_epochs", "num_minibatches"):
            check_positive_int(name, getattr(self, name))
        _number("learning_rate", self.learning_rate, low=0.0, open_low=True)
        for name in ("critic_learning_rate", "kl_coef"):
            if getattr(self, name) is not None:
                _number(name, getattr(self, name), low=0.0, open_low=True)
        _number("reward_scale", self.reward_scale, low=0.0, open_low=True)
        _choice(
            "action_distribution",
            self.action_distribution,
            DISCRETE_DISTRIBUTIONS + CONTINUOUS_DISTRIBUTIONS,
        )
        if self.anneal_iterations is not None:
            check_positive_int("anneal_iterations", self.anneal_iterations)
        _number("adam_eps", self.adam_eps, low=0.0, open_low=True)
        _number("max_grad_norm", self.max_grad_norm, low=0.0)
        _number("gamma", self.gamma, low=0.0, high=1.0)
        _number("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        _number("clip_eps", self.clip_eps, low=0.0, open_low=True)
        if self.value_clip_eps is not None:
            _number("value_clip_eps", self.value_clip_eps, low=0.0, open_low=True)
        _number("entropy_coef", self.entropy_coef, low=0.0)
        _number("value_coef", self.value_coef, low=0.0)
        _choice("normalize_advantages", self.normalize_advantages, ("minibatch", "batch", "off"))
        _choice("truncation", self.truncation, ("bootstrap", "terminate"))
        if not isinstance(self.normalize_observations, bool):
            raise ValueError(
                f"normalize_observations must be True or False, got {self.normalize_observations!r}"
            )
        if self.observation_warmup_steps != 0:
            check_positive_int("observation_warmup_steps", self.observation_warmup_steps)
            if not self.normalize_observations:
                raise ValueError(
                    f"observation_warmup_steps={self.observation_warmup_steps} gathers "
                    "observation statistics, which only normalize_observations=True uses; "
                    "set it or leave observation_warmup_steps at 0"
                )

    @property
    def updates_per_iteration(self) -> int:
        return self.num_epochs * self.num_minibatches
