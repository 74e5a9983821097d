"""``zgrad.nn.utils.parametrizations``: weight normalization, spectral normalization and
orthogonal matrices as parametrizations (:mod:`zgrad.nn.utils.parametrize`), as
``torch.nn.utils.parametrizations``.

- :func:`weight_norm`: ``weight = g * v / ||v||`` (norm over every dim but ``dim``), with ``g``
  and ``v`` stored as ``parametrizations.weight.original0`` and ``original1``.
- :func:`spectral_norm`: ``weight = W / sigma(W)``, ``sigma`` the largest singular value estimated
  by power iteration; the vectors are buffers ``_u`` and ``_v`` of the parametrization, updated
  (in place) on each read in training mode only.
- :func:`orthogonal`: an orthogonal (semi-orthogonal for non-square) matrix from the matrix
  exponential, the Cayley map or Householder reflections of the original.
"""

from __future__ import annotations

from enum import Enum, auto
from typing import Any

from zgrad.creation import eye, zeros, zeros_like
from zgrad.creation_random import randn
from zgrad.engine.grad_mode import no_grad
from zgrad.linalg.decompositions import qr
from zgrad.linalg.matrix_functions import matrix_exp
from zgrad.linalg.solvers import solve
from zgrad.nn.module import Module
from zgrad.nn.utils import parametrize
from zgrad.ops.functions import cat
from zgrad.ops.products import mv, vdot
from zgrad.ops.vector import normalize
from zgrad.ops.vector_norm import vector_norm
from zgrad.tensor import Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# --- weight norm ----------------------------------------------------------------------------------

def _norm_except_dim(v: Tensor, p: float, dim: int) -> Tensor:
    """PyTorch's ``norm_except_dim``: the p-norm over every dim but ``dim``, kept as size-1 dims
    (broadcastable against ``v``); ``dim=-1`` means the norm of the whole tensor (0-d)."""
    if dim == -1:
        return vector_norm(v, p)
    dim = dim + v.ndim if dim < 0 else dim
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:
        return v.abs()
    return vector_norm(v, p, dim=others, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """PyTorch's ``_weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / _norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    """The weight-norm parametrization: ``forward(g, v)`` is the weight; ``right_inverse`` splits
    a weight into ``(g, v)``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||``, the norm taken over every dim but
    ``dim`` (the whole tensor for ``dim=None``): ``parametrizations.<name>.original0`` is ``g``
    (size 1 except along ``dim``) and ``original1`` is ``v`` (the weight's shape).

    Returns:
        ``module``, which also loads state dicts saved with the old ``nn.utils.weight_norm``: their
        ``<name>_g`` / ``<name>_v`` entries are renamed on load, as PyTorch's.
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def rename_old_keys(module: Module, state_dict: dict, prefix: str, *_: Any) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(rename_old_keys)
    return module


# --- spectral norm --------------------------------------------------------------------------------

def _to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` with ``dim`` moved first and the other dims flattened: (size of dim, rest)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.flatten(1)


class _SpectralNorm(Module):
    """The spectral-norm parametrization: ``weight / sigma``, ``sigma = u . (W v)`` for the
    power-iteration vectors ``_u`` and ``_v`` (buffers; 15 iterations at construction, then
    ``n_power_iterations`` per read in training mode). A 1-D weight is simply normalized."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = _to_matrix(weight.detach(), self.dim)
            h, w = weight_mat.shape
            u = randn(h, dtype=weight.dtype, device=weight.device)
            v = randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """Update ``_u`` and ``_v`` in place (outside autograd) by ``n_power_iterations`` steps."""
        with no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = _to_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # later in-place updates must not reach the graph
        sigma = vdot(u, mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def _is_conv_transpose(module: Module) -> bool:
    """Whether ``module`` is one of zgrad's ConvTranspose1d/2d/3d (or a subclass), by name: no import of the layers."""
    names = {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}
    return any(c.__name__ in names and c.__module__.startswith("zgrad.nn.") for c in type(module).__mro__)


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Reparametrize ``module.<name>`` as itself divided by its spectral norm (largest singular
    value of the weight viewed as a matrix with ``dim`` as rows; ``dim`` defaults to 1 for
    transposed convolutions, else 0), estimated by power iteration as in Miyato et al. (2018).

    The vectors are buffers ``parametrizations.<name>.0._u`` and ``_v``, saved in the state dict;
    each read of the weight in training mode first runs ``n_power_iterations`` steps (in eval mode
    none). ``eps`` guards the normalizations.

    Returns:
        ``module``.

    Raises:
        ValueError: ``module`` has no tensor ``name``, or ``n_power_iterations`` is not positive.
        IndexError: ``dim`` is out of range.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _is_conv_transpose(module) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# --- orthogonal -----------------------------------------------------------------------------------

class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:  # noqa: N803 - LAPACK's names
    """``linalg.householder_product``: the first k columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^H``
    with ``v_i`` column i of ``A`` below the diagonal and 1 on it (the part at and above it is
    ignored), in zgrad ops so it is differentiable."""
    n, k = A.shape[-2], A.shape[-1]
    V = A.tril(-1) + eye(n, k, dtype=A.dtype, device=A.device)
    Q = eye(n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], n, n)
    for i in range(k):
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * (Q @ v)) @ v.mH
    return Q[..., :k]


def _make_orthogonal(A: Tensor) -> Tensor:  # noqa: N803
    """The Q of A's QR decomposition, with the signs making R's diagonal non-negative."""
    Q, R = qr(A)
    signs = R.diagonal(dim1=-2, dim2=-1).sgn()
    return Q * signs.unsqueeze(-2)


def _is_orthogonal(Q: Tensor) -> bool:  # noqa: N803
    from zgrad.ops.reduce_logical import allclose
    from zgrad.type_info import finfo
    n, k = Q.shape[-2], Q.shape[-1]
    identity = eye(k, dtype=Q.dtype, device=Q.device)
    return bool(allclose(Q.mH @ Q, identity, atol=10.0 * n * finfo(Q.dtype).eps))


class _Orthogonal(Module):
    """The orthogonal parametrization: maps a matrix (or batch) to one with orthonormal columns
    (rows, if wider than tall). With ``use_trivialization`` (the default) the result is
    ``base @ map(X)``, ``base`` a buffer set by ``right_inverse``."""

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:  # noqa: N803
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, zeros(n, n - k, dtype=X.dtype, device=X.device).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                identity = eye(n, dtype=A.dtype, device=A.device)
                Q = solve(identity - 0.5 * A, identity + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.detach().diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:  # noqa: N803
        """An X that ``forward`` maps to ``Q``: with a trivialization, ``base`` becomes ``Q``
        (completed and orthogonalized) and X is minus the identity."""
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            if n < k:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential "
                                              "or the Cayley parametrizations when use_trivialization=False.")
                raise NotImplementedError("zgrad has no geqrf: the householder parametrization with "
                                          "use_trivialization=False cannot be assigned to")
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            neg_identity = zeros_like(Q_init)
            neg_identity.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_identity


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain ``module.<name>`` (a matrix or a batch of matrices) to be orthogonal, or to have
    orthonormal columns (rows, if it is wider than tall).

    Args:
        orthogonal_map: ``"matrix_exp"``, ``"cayley"`` or ``"householder"``; by default the matrix
            exponential for square (or complex) matrices, else Householder reflections.
        use_trivialization: keep a ``base`` buffer so that optimization happens around it (the
            dynamic trivialization of Lezcano-Casado 2019) and the weight can be assigned.

    Returns:
        ``module``.

    Raises:
        ValueError: no tensor ``name``, fewer than 2 dims, an unknown map, or householder with a
            complex tensor.
        NotImplementedError: householder with ``use_trivialization=False`` (it needs ``geqrf``,
            which zgrad lacks).
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum: Any = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    if orth_enum == _OrthMaps.householder and not use_trivialization:
        raise NotImplementedError("zgrad has no geqrf: orthogonal_map='householder' needs use_trivialization=True")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
