"""``zgrad.distributions.transforms``: invertible maps with a computable log |det Jacobian|, for
:class:`~zgrad.distributions.TransformedDistribution` (torch.distributions.transforms's names).

Here: the base :class:`Transform` (with ``.inv``, caching, shape inference), ``ComposeTransform``
and ``identity_transform``, ``IndependentTransform``, ``ReshapeTransform``, and the elementwise
``ExpTransform``, ``PowerTransform``, ``SigmoidTransform``, ``SoftplusTransform``,
``TanhTransform``, ``AbsTransform`` and ``AffineTransform``.
"""

from zgrad.distributions._transform_base import Transform
from zgrad.distributions._transform_compose import (
    ComposeTransform, IndependentTransform, ReshapeTransform, identity_transform,
)
from zgrad.distributions._transform_elementwise import (
    AbsTransform, AffineTransform, ExpTransform, PowerTransform, SigmoidTransform, SoftplusTransform, TanhTransform,
)

__all__ = ["AbsTransform", "AffineTransform", "ComposeTransform", "ExpTransform", "IndependentTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform", "Transform",
           "identity_transform"]
