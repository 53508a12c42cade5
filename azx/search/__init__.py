"""Batched search: one interface, a native MCTS made of injected parts, and an mctx backend."""

from ._abstract import AbstractSearch as AbstractSearch, SearchOutput as SearchOutput
from ._backend import (
    AbstractBackend as AbstractBackend,
    LockstepBackend as LockstepBackend,
    PlatformBackend as PlatformBackend,
    RowBackend as RowBackend,
    UnrolledBackend as UnrolledBackend,
)
from ._chance import ChanceModel as ChanceModel, ChanceState as ChanceState
from ._gumbel import GumbelRule as GumbelRule, SequentialHalving as SequentialHalving
from ._make import make as make
from ._mctx import (
    AbstractMctxSearch as AbstractMctxSearch,
    MctxGumbel as MctxGumbel,
    MctxPUCT as MctxPUCT,
    MctxTree as MctxTree,
)
from ._model import (
    ILLEGAL_LOGIT as ILLEGAL_LOGIT,
    AbstractModel as AbstractModel,
    EnvironmentModel as EnvironmentModel,
    Evaluation as Evaluation,
    PolicyValueNet as PolicyValueNet,
    Transition as Transition,
    evaluate as evaluate,
    transition as transition,
)
from ._native import PUCT as PUCT, Gumbel as Gumbel
from ._puct import PUCTRoot as PUCTRoot, PUCTRule as PUCTRule
from ._simulate import (
    AbstractNativeSearch as AbstractNativeSearch,
    AbstractQTransform as AbstractQTransform,
    AbstractRootPolicy as AbstractRootPolicy,
    AbstractSelectionRule as AbstractSelectionRule,
    QBySiblings as QBySiblings,
    QByTree as QByTree,
    ReferenceBackend as ReferenceBackend,
    RootPlan as RootPlan,
)
from ._tree import (
    NO_PARENT as NO_PARENT,
    ROOT_INDEX as ROOT_INDEX,
    UNVISITED as UNVISITED,
    Node as Node,
    Tree as Tree,
)
