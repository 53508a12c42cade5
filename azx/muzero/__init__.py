"""MuZero: a learned model (representation, dynamics, prediction) that azx's searches plan
with, trained end to end on the unrolled model."""

from ._model import LearnedModel as LearnedModel, Observation as Observation
from ._nets import (
    MLPDynamics as MLPDynamics,
    MLPPrediction as MLPPrediction,
    MLPRepresentation as MLPRepresentation,
    MuZeroNet as MuZeroNet,
    mlp_net as mlp_net,
    normalise_embedding as normalise_embedding,
)
from ._scaling import (
    SCALING_EPSILON as SCALING_EPSILON,
    expected_value as expected_value,
    scale_value as scale_value,
    support as support,
    two_hot as two_hot,
    unscale_value as unscale_value,
)
