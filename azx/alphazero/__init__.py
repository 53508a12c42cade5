"""AlphaZero training as one pure function: `step(state, key) -> state`."""

from ._config import Config as Config
from ._loss import LossMetrics as LossMetrics, loss as loss
from ._trainer import AlphaZero as AlphaZero, Metrics as Metrics, TrainState as TrainState
