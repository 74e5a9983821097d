"""``AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (https://arxiv.org/abs/1609.04309),
as ``torch.nn.AdaptiveLogSoftmaxWithLoss``: the same submodules, parameter names and drawing order, results and
errors. A head scores the most frequent classes and one entry per tail cluster; each tail cluster scores its own
classes through a two-layer projection that narrows by ``div_value`` per cluster."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from zgrad import ops
from zgrad.nn.containers import ModuleList, Sequential
from zgrad.nn.layers import Linear
from zgrad.nn.module import Module
from zgrad.tensor import Tensor

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _check_cutoffs(cutoffs: list[Any], n_classes: int) -> None:
    """PyTorch's checks, in its order: a non-empty, strictly increasing run of integers in [1, n_classes - 1].

    Raises:
        ValueError: ``cutoffs`` is empty or breaks one of those rules.
    """
    if not cutoffs:
        raise ValueError("cutoffs should be a sequence of length larger than 0")
    if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
        raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                         "where each value is between 1 and n_classes-1")


def _check_shapes(input_: Tensor, target: Tensor) -> None:
    """A batch is (N, in_features) inputs with (N,) targets; one example is (in_features,) with a 0-d target.

    Raises:
        RuntimeError: any other combination (PyTorch's messages, checked in its order).
    """
    if target.dim() == 1:
        if input_.size(0) != target.size(0):
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        if input_.dim() != 2:
            raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size {input_.size()}")
    elif target.dim() == 0:
        if input_.dim() != 1:
            raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size {input_.size()}")
    else:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax over ``n_classes`` classes sorted by falling frequency (class 0 the most frequent).

    ``cutoffs = [c1, ..., ck]`` split the classes: [0, c1) are scored by ``head`` directly, and cluster i
    (classes [c_i, c_{i+1}), with c_{k+1} = n_classes) by ``tail[i - 1]``, a projection
    ``Linear(in_features, in_features // div_value**i) -> Linear(..., c_{i+1} - c_i)`` without biases, times
    the head's probability of the cluster. ``forward`` evaluates only the clusters its targets fall in.

    Args:
        in_features: the size of each input row.
        n_classes: the number of classes.
        cutoffs: unique, increasing integers in [1, n_classes - 1].
        div_value: each cluster's hidden width is ``in_features // div_value**index`` (index from 1).
        head_bias: whether ``head`` has a bias.
        device: where the parameters live.
        dtype: the parameters' dtype (None: the default dtype).

    Raises:
        ValueError: ``cutoffs`` is empty, unsorted, repeats a value, holds a non-integer or leaves [1, n_classes - 1].
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int], div_value: float = 4.0,
                 head_bias: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        _check_cutoffs(cutoffs, n_classes)
        self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div_value, head_bias
        self.cutoffs = cutoffs + [n_classes]  # where the shortlist, then each cluster, ends
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for index, (start, stop) in enumerate(pairwise(self.cutoffs), start=1):
            hidden = int(in_features // div_value ** index)
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, stop - start, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Draw every parameter again as ``__init__`` drew it: the head, then each cluster's two layers."""
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        """Each example's log-probability of its target and the mean negative log-likelihood.

        Args:
            input_: (N, in_features), or (in_features,) for one example.
            target_: (N,) class indices, or a 0-d one for one example.

        Returns:
            ``_ASMoutput(output, loss)``: ``output`` (N,) (0-d for one example) and the 0-d ``loss``.

        Raises:
            RuntimeError: the shapes do not pair up as above, or a target is outside [0, n_classes - 1].
        """
        _check_shapes(input_, target_)
        batched = target_.dim() > 0
        input, target = (input_, target_) if batched else (input_.unsqueeze(0), target_.unsqueeze(0))
        batch_size = target.size(0)
        output = input.new_zeros(batch_size)  # log p(target | cluster) for tail rows, 0 for shortlist rows
        head_column = target.new_empty(batch_size)  # the head's column for each row: its class or its cluster
        rows_seen = 0
        for cluster, (low, high) in enumerate(pairwise([0, *self.cutoffs])):
            in_cluster = (target >= low) & (target < high)
            rows = in_cluster.nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            rows_seen += rows.numel()
            if cluster == 0:
                head_column = head_column.index_copy(0, rows, target[in_cluster])
                continue
            head_column = head_column.index_fill(0, rows, self.shortlist_size + cluster - 1)
            cluster_logprob = ops.log_softmax(self.tail[cluster - 1](input.index_select(0, rows)), dim=1)
            within = cluster_logprob.gather(1, (target[in_cluster] - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, within)
        if rows_seen != batch_size:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_logprob = ops.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, head_column.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        """(N, n_classes) log-probabilities from the input rows and ``self.head``'s output for them."""
        head_logprob = ops.log_softmax(head_output, dim=1)
        columns = [head_logprob[:, :self.shortlist_size]]
        for index, projection in enumerate(self.tail):
            cluster_logprob = head_logprob[:, self.shortlist_size + index].unsqueeze(1)
            columns.append(ops.log_softmax(projection(input), dim=1) + cluster_logprob)
        return ops.cat(columns, dim=1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Every class's log-probability.

        Args:
            input: (N, in_features).

        Returns:
            (N, n_classes) log-probabilities.
        """
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """Each row's most probable class: ``log_prob(input).argmax(dim=1)``, without evaluating the tail when
        the head's best column is a shortlist class for every row.

        Args:
            input: (N, in_features).

        Returns:
            (N,) class indices.
        """
        head_output = self.head(input)
        prediction = ops.argmax(head_output, dim=1)
        needs_tail = prediction >= self.shortlist_size
        if not needs_tail.any():
            return prediction
        if needs_tail.all():
            return ops.argmax(self._get_full_log_prob(input, head_output), dim=1)
        prediction[needs_tail] = ops.argmax(self._get_full_log_prob(input[needs_tail], head_output[needs_tail]), dim=1)
        return prediction
