"""Batched search: one interface, a native MCTS and an mctx backend."""

from ._abstract import AbstractSearch as AbstractSearch, SearchOutput as SearchOutput
from ._kernels import Kernels as Kernels
from ._make import make as make
from ._mctx import (
    AbstractMctxSearch as AbstractMctxSearch,
    MctxGumbel as MctxGumbel,
    MctxPUCT as MctxPUCT,
    MctxTree as MctxTree,
)
from ._model import (
    ILLEGAL_LOGIT as ILLEGAL_LOGIT,
    Evaluation as Evaluation,
    PolicyValueNet as PolicyValueNet,
    Transition as Transition,
    evaluate as evaluate,
    transition as transition,
)
from ._native import PUCT as PUCT, AbstractNativeSearch as AbstractNativeSearch, Gumbel as Gumbel
from ._tree import (
    NO_PARENT as NO_PARENT,
    ROOT_INDEX as ROOT_INDEX,
    UNVISITED as UNVISITED,
    Tree as Tree,
)
