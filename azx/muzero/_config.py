import equinox as eqx

from .._validate import (
    check_float,
    check_non_negative_int,
    check_non_negative_number,
    check_positive_int,
)


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
    random_opening_moves: int = 0
    """The first this many moves of every self-play game are uniformly random legal moves
    (the search still runs and its policy target is stored; the model learns the move
    played), as [`azx.alphazero.Config`][]'s. 0: off."""
    random_move_probability: float = 0.0
    """Every later self-play move is a uniformly random legal move with this probability,
    as [`azx.alphazero.Config`][]'s. 0: off."""
    augment_symmetries: bool = False
    """Every training segment transformed by one of the game's board symmetries
    ([`azx.envs.AbstractEnv.symmetries`][]), drawn uniformly per segment: its first
    observation, its actions and its policy targets alike. False: off."""
    absorbing_end: bool = False
    """Unroll steps after an episode's termination train value 0 and reward 0 (the end of
    the game as an absorbing state, as in the MuZero paper) instead of being left out of
    the loss ([`azx.muzero.unroll_targets`][]). For games the search can look past the end
    of, such as board games, where an untrained guess there would be backed up."""
    reanalyse_steps: int = 0
    """MuZero Reanalyse: stored steps of every game row searched again each iteration with
    the current network, their policy targets and root values replaced (fresher targets
    for old positions, at the cost of that many more searches per row). 0: off."""
    value_loss_weight: float = 0.25
    """Weight of the value terms (the MuZero paper's 0.25 for reanalysed-free training)."""
    reward_loss_weight: float = 1.0
    consistency_loss_weight: float = 0.0
    """Weight of EfficientZero's self-supervised consistency loss: each unroll step's
    dynamics embedding, through a projection and a predictor, pulled towards the
    projection of the representation of the observation the game reached there
    ([`azx.muzero.segment_loss`][]). With a weight above 0 the trainer's `init` gives the
    network a [`azx.muzero.ConsistencyHead`][] if it has none. 0: off (EfficientZero
    uses 2)."""

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
        check_non_negative_int("reanalyse_steps", self.reanalyse_steps)
        check_non_negative_int("random_opening_moves", self.random_opening_moves)
        check_float("random_move_probability", self.random_move_probability, low=0.0, high=1.0)
        for name in ("absorbing_end", "augment_symmetries"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.decay_iterations is not None:
            check_positive_int("decay_iterations", self.decay_iterations)
        check_float("learning_rate", self.learning_rate, low=0.0, low_open=True)
        for name in (
            "weight_decay",
            "max_grad_norm",
            "value_loss_weight",
            "reward_loss_weight",
            "consistency_loss_weight",
        ):
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
        if self.reanalyse_steps > per_row:
            raise ValueError(
                f"reanalyse_steps ({self.reanalyse_steps}) exceeds the {per_row} steps each "
                f"row of the replay holds (buffer_capacity // num_envs)"
            )
        needed = self.collect_steps + self.unroll_steps + self.td_steps + 1
        if per_row < needed:
            raise ValueError(
                f"buffer_capacity ({self.buffer_capacity}) gives each of the {self.num_envs} "
                f"rows {per_row} steps; a segment and one step's self-play need "
                f"collect_steps + unroll_steps + td_steps + 1 = {needed}: use at least "
                f"{needed * self.num_envs}"
            )
