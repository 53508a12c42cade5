"""MuZero: a learned model (representation, dynamics, prediction) that azx's searches plan
with, trained end to end on the unrolled model."""

from ._agent import MuZeroAgent as MuZeroAgent, StochasticMuZeroAgent as StochasticMuZeroAgent
from ._config import Config as Config
from ._evaluate import (
    evaluate as evaluate,
    greedy_search as greedy_search,
    stochastic_evaluate as stochastic_evaluate,
)
from ._loss import (
    LossParts as LossParts,
    loss as loss,
    scale_gradient as scale_gradient,
    segment_loss as segment_loss,
)
from ._model import (
    LearnedModel as LearnedModel,
    Observation as Observation,
    search_observations as search_observations,
    search_states as search_states,
)
from ._nets import (
    ConsistencyHead as ConsistencyHead,
    MLPDynamics as MLPDynamics,
    MLPPrediction as MLPPrediction,
    MLPRepresentation as MLPRepresentation,
    MuZeroNet as MuZeroNet,
    mlp_net as mlp_net,
    normalise_embedding as normalise_embedding,
)
from ._replay import (
    ReplayState as ReplayState,
    SegmentReplay as SegmentReplay,
    Step as Step,
    Targets as Targets,
    unroll_targets as unroll_targets,
)
from ._resnet import (
    ResNetDynamics as ResNetDynamics,
    ResNetPrediction as ResNetPrediction,
    ResNetRepresentation as ResNetRepresentation,
    resnet_net as resnet_net,
)
from ._scaling import (
    SCALING_EPSILON as SCALING_EPSILON,
    expected_value as expected_value,
    scale_value as scale_value,
    support as support,
    two_hot as two_hot,
    unscale_value as unscale_value,
)
from ._stochastic import (
    StochasticLearnedModel as StochasticLearnedModel,
    StochasticState as StochasticState,
    stochastic_search_observations as stochastic_search_observations,
    stochastic_search_states as stochastic_search_states,
)
from ._stochastic_nets import (
    MLPAfterstateDynamics as MLPAfterstateDynamics,
    MLPChanceDynamics as MLPChanceDynamics,
    MLPChanceEncoder as MLPChanceEncoder,
    StochasticMuZeroNet as StochasticMuZeroNet,
    stochastic_mlp_net as stochastic_mlp_net,
    straight_through_code as straight_through_code,
)
from ._stochastic_trainer import (
    StochasticLossParts as StochasticLossParts,
    StochasticMetrics as StochasticMetrics,
    StochasticMuZero as StochasticMuZero,
    StochasticTrainState as StochasticTrainState,
    stochastic_loss as stochastic_loss,
    stochastic_segment_loss as stochastic_segment_loss,
)
from ._trainer import Metrics as Metrics, MuZero as MuZero, TrainState as TrainState
