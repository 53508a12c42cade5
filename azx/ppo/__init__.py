"""Proximal policy optimisation as one pure function: `step(state, key) -> state`.

Feed-forward and recurrent (GRU) actor-critics on single-player environments with
discrete actions, and feed-forward ones with continuous actions, with the
same trainer contract, sharding and checkpoints as [`azx.alphazero`][].
"""

from .._episodes import EvaluationResult as EvaluationResult
from ._config import Config as Config
from ._continuous_net import ContinuousActorCritic as ContinuousActorCritic
from ._distributions import (
    AbstractActionDistribution as AbstractActionDistribution,
    Beta as Beta,
    Categorical as Categorical,
    ClippedNormal as ClippedNormal,
    TanhNormal as TanhNormal,
    action_distribution as action_distribution,
)
from ._evaluate import evaluate as evaluate
from ._gae import gae as gae
from ._loss import LossParts as LossParts, loss as loss
from ._policy import ObservationStats as ObservationStats
from ._trainer import (
    PPO as PPO,
    Metrics as Metrics,
    Minibatch as Minibatch,
    Rollout as Rollout,
    TrainState as TrainState,
    Trajectory as Trajectory,
)
