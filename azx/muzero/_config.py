import equinox as eqx

from .._validate import check_float, check_non_negative_number, check_positive_int


class Config(eqx.Module):
    """Sizes and learning settings of a MuZero training run. Validated on construction.

    One `step` plays `collect_steps` moves in each of `num_envs` games (with a search over
    the learned model at every move), then makes `train_steps` gradient updates on
    minibatches of `batch_size` trajectory segments drawn from a replay of
    `buffer_capacity` steps. Each segment trains the model unrolled `unroll_steps` moves
    from its first observation, against value targets of `td_steps` rewards bootstrapped
    from the search's stored root values.
    """

    num_envs: int = 16
    """Games played in parallel (the self-play batch)."""
    collect_steps: int = 16
    """Moves played in every game per `step`."""
    train_steps: int = 4
    """Learner updates per `step`."""
    batch_size: int = 128
    """Segments per learner update: a multiple of `num_envs` (each game row contributes
    `batch_size // num_envs`, so the batch is the same however rows are sharded)."""
    buffer_capacity: int = 16384
    """Steps held in the replay: a multiple of `num_envs`; each row's ring must hold more
    than `collect_steps + unroll_steps + td_steps` steps."""
    unroll_steps: int = 5
    """K: moves the model is unrolled through its dynamics in the loss."""
    td_steps: int = 10
    """n: rewards summed before bootstrapping from a stored root value."""
    learning_rate: float = 1e-3
    decay_iterations: int | None = None
    """If set, the learning rate follows a cosine decay to 3% of `learning_rate` over
    this many iterations (`step` calls); afterwards it stays there. `None`: constant."""
    weight_decay: float = 1e-4
    """Decoupled weight decay (AdamW); 0 switches it off."""
    max_grad_norm: float = 5.0
    """Gradients are clipped to this global norm; 0 switches clipping off."""
    value_loss_weight: float = 0.25
    """Weight of the value terms (the MuZero paper's 0.25 for reanalysed-free training)."""
    reward_loss_weight: float = 1.0

    def __check_init__(self):
        for name in (
            "num_envs",
            "collect_steps",
            "train_steps",
            "batch_size",
            "buffer_capacity",
            "unroll_steps",
            "td_steps",
        ):
            check_positive_int(name, getattr(self, name))
        if self.decay_iterations is not None:
            check_positive_int("decay_iterations", self.decay_iterations)
        check_float("learning_rate", self.learning_rate, low=0.0, low_open=True)
        for name in ("weight_decay", "max_grad_norm", "value_loss_weight", "reward_loss_weight"):
            check_non_negative_number(name, getattr(self, name))
        if self.batch_size % self.num_envs:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of num_envs "
                f"({self.num_envs}): each game row contributes the same number of segments"
            )
        if self.buffer_capacity % self.num_envs:
            raise ValueError(
                f"buffer_capacity ({self.buffer_capacity}) must be a multiple of num_envs "
                f"({self.num_envs}): one ring per game row"
            )
        per_row = self.buffer_capacity // self.num_envs
        needed = self.collect_steps + self.unroll_steps + self.td_steps + 1
        if per_row < needed:
            raise ValueError(
                f"buffer_capacity ({self.buffer_capacity}) gives each of the {self.num_envs} "
                f"rows {per_row} steps; a segment and one step's self-play need "
                f"collect_steps + unroll_steps + td_steps + 1 = {needed}: use at least "
                f"{needed * self.num_envs}"
            )
