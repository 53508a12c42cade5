"""The native searches, [`azx.search.PUCT`][] and [`azx.search.Gumbel`][]: each is
[`azx.search.AbstractNativeSearch`][] (its tree, settings and the loop of
`azx.search._simulate`) with its own selection rule and root policy.
"""

from ._abstract import check_part, part_field
from ._gumbel import GumbelRule, SequentialHalving
from ._puct import PUCTRoot, PUCTRule
from ._simulate import AbstractNativeSearch


class PUCT(AbstractNativeSearch):
    """AlphaZero search: PUCT selection ([`azx.search.PUCTRule`][]), Dirichlet noise at the
    root, the action sampled from the root's visit counts and the policy target their
    distribution ([`azx.search.PUCTRoot`][]); the root value is the root's mean backed-up
    value. With `reuse_tree`, `advance` keeps the subtree under the played action (and, with
    chance nodes, the outcome that followed it), and the next search starts from its
    statistics.

    **Arguments:** those of [`azx.search.AbstractNativeSearch`][].
    """

    rule: PUCTRule = part_field(PUCTRule)
    root_policy: PUCTRoot = part_field(PUCTRoot)

    def __check_init__(self):
        check_part("rule", self.rule, PUCTRule)
        check_part("root_policy", self.root_policy, PUCTRoot)


class Gumbel(AbstractNativeSearch):
    """Gumbel MuZero search (Danihelka et al., 2022): Gumbel-top-k and sequential halving at
    the root ([`azx.search.SequentialHalving`][]), the deterministic improved-policy rule
    below it ([`azx.search.GumbelRule`][]), and policy targets
    `softmax(logits + sigma(completed_q))` (or the visit counts). The root value is the
    root's mean backed-up value. Tree reuse works as for [`azx.search.PUCT`][].

    **Arguments:** those of [`azx.search.AbstractNativeSearch`][].
    """

    rule: GumbelRule = part_field(GumbelRule)
    root_policy: SequentialHalving = part_field(SequentialHalving)

    def __check_init__(self):
        check_part("rule", self.rule, GumbelRule)
        check_part("root_policy", self.root_policy, SequentialHalving)
