import math

import equinox as eqx

from .._validate import check_non_negative_int, check_positive_int


def _non_negative_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


class Config(eqx.Module):
    """Sizes and learning settings of an AlphaZero training run. Validated on construction.

    One `step` plays `collect_steps` moves in each of `num_envs` games (with search at
    every move), then makes `train_steps` gradient updates on minibatches of
    `batch_size` positions drawn from a replay buffer of `buffer_capacity` positions.
    """

    num_envs: int = 64
    """Games played in parallel (the self-play batch)."""
    collect_steps: int = 16
    """Moves played in every game per `step`."""
    train_steps: int = 8
    """Learner updates per `step`."""
    batch_size: int = 256
    """Positions per learner update: a multiple of `num_envs` (each game row contributes
    `batch_size // num_envs`, so the batch is the same however rows are sharded)."""
    buffer_capacity: int = 16384
    """Positions held in the replay buffer: a multiple of `num_envs`, at least
    `num_envs * collect_steps` and at least `batch_size`."""
    learning_rate: float = 1e-3
    decay_iterations: int | None = None
    """If set, the learning rate follows a cosine decay to 3% of `learning_rate` over
    this many iterations (`step` calls); afterwards it stays there. `None`: constant."""
    weight_decay: float = 1e-4
    """Decoupled weight decay (AdamW); 0 switches it off."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm; 0 switches clipping off."""
    value_loss_weight: float = 1.0
    exploration_moves: int | None = None
    """Moves at the start of every game played with the search's own, exploring action
    choice (sampled visits for PUCT, noisy halving for Gumbel); later moves take the action
    with the highest policy target, so that game outcomes (the value targets) reflect good
    play. `None`: explore on every move."""
    random_opening_moves: int = 0
    """The first this many moves of every self-play game are uniformly random legal moves
    instead of the search's choice (the search still runs and its policy target is stored).
    Games then start from varied positions, which exposes the network to positions its own
    play never reaches. 0: off."""
    random_move_probability: float = 0.0
    """Every self-play move after the opening is, with this probability, a uniformly random
    legal move instead of the search's choice (the policy target is still the search's).
    Games then pass through positions that follow a blunder, which good play never reaches
    but a good player must answer. 0: off."""
    augment_symmetries: bool = False
    """Transform every training position by one of the game's board symmetries
    ([`azx.envs.AbstractEnv.symmetries`][]), drawn uniformly per position (identity
    included): more distinct positions for the same self-play. False: off."""
    root_value_weight: float = 0.0
    """Value targets mix the game's outcome with the search's root value:
    `(1 - w) * outcome + w * root_value`. The root value is less noisy than one game's
    outcome but biased by the network that searched; 0 trains on outcomes only (the
    AlphaZero target), 1 on root values only."""
    fast_search_simulations: int | None = None
    """Playout-cap randomisation (Wu, 2019, KataGo): each self-play move is, with
    probability `full_search_probability`, a full search (the search's own
    `num_simulations`, its policy target trained on) and otherwise a fast search with this
    many simulations that plays the best move it finds and gives no policy target (its
    position still trains the value). Fewer simulations per move for the same number of
    policy targets: more games, hence more value targets, per CPU-minute. The choice is
    made per move for all games at once, so that one search runs. `None`: every move a
    full search."""
    full_search_probability: float = 0.25
    """With `fast_search_simulations` set: the probability that a move's search is a full
    one."""
    past_opponent_fraction: float = 0.0
    """Self-play against past versions of the network (two-player games): one game row in
    every `n = 1 / past_opponent_fraction` (`n` a whole number dividing the game rows on
    each device) has one side played by a past network instead of the current one, the
    same search run with the past parameters. Those moves give no policy target; their
    positions still train the value. Self-play against the current network alone can
    settle into lines that only beat itself; past versions keep older lines in play. 0:
    off."""
    past_opponents: int = 8
    """With `past_opponent_fraction`: how many past versions are kept. Each move draws one
    of them uniformly, the same for all those games, so a game's opponent is a mixture of
    past versions."""
    past_opponent_interval: int = 50
    """With `past_opponent_fraction`: iterations between two kept versions. The newest
    `past_opponents` are kept, taken at iterations 0, `past_opponent_interval`, ... (the
    first at iteration 0 is the untrained network until the second is taken)."""
    truncation: str = "drop"
    """What truncated episodes give the buffer: `"drop"` or `"bootstrap"` (see
    [`azx.buffer.ReplayBuffer`][])."""

    def __check_init__(self):
        for name in ("num_envs", "collect_steps", "train_steps", "batch_size", "buffer_capacity"):
            check_positive_int(name, getattr(self, name))
        for name in ("learning_rate", "weight_decay", "max_grad_norm", "value_loss_weight"):
            _non_negative_float(name, getattr(self, name))
        for name in ("random_move_probability", "root_value_weight", "full_search_probability"):
            value = getattr(self, name)
            _non_negative_float(name, value)
            if value > 1:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if self.full_search_probability == 0:
            raise ValueError(
                "full_search_probability must be > 0, got 0: no move would give a policy target"
            )
        if self.fast_search_simulations is not None:
            check_positive_int("fast_search_simulations", self.fast_search_simulations)
        _non_negative_float("past_opponent_fraction", self.past_opponent_fraction)
        fraction = self.past_opponent_fraction
        if fraction:
            n = round(1 / fraction) if fraction <= 1 else 0
            if n < 1 or abs(n * fraction - 1) > 1e-9 or self.num_envs % n:
                raise ValueError(
                    f"past_opponent_fraction must be 1/n for a whole n dividing num_envs "
                    f"({self.num_envs}), got {fraction!r}"
                )
        check_positive_int("past_opponents", self.past_opponents)
        check_positive_int("past_opponent_interval", self.past_opponent_interval)
        if self.decay_iterations is not None:
            check_positive_int("decay_iterations", self.decay_iterations)
        check_non_negative_int("exploration_moves", self.exploration_moves, optional=True)
        check_non_negative_int("random_opening_moves", self.random_opening_moves)
        if not isinstance(self.augment_symmetries, bool):
            raise ValueError(
                f"augment_symmetries must be True or False, got {self.augment_symmetries!r}"
            )
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0, got 0")
        if self.batch_size % self.num_envs:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of num_envs "
                f"({self.num_envs}): each game row contributes the same number of positions"
            )
        if self.buffer_capacity % self.num_envs:
            raise ValueError(
                f"buffer_capacity ({self.buffer_capacity}) must be a multiple of num_envs "
                f"({self.num_envs}): one ring per game row"
            )
        smallest = max(self.num_envs * self.collect_steps, self.batch_size)
        if self.buffer_capacity < smallest:
            raise ValueError(
                f"buffer_capacity ({self.buffer_capacity}) must be at least "
                f"max(num_envs * collect_steps, batch_size) = {smallest}, or one step's "
                "self-play would overwrite itself"
            )
        if self.truncation not in ("drop", "bootstrap"):
            raise ValueError(f"truncation must be 'drop' or 'bootstrap', got {self.truncation!r}")
