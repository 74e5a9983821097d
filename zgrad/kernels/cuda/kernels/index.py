"""CUDA kernels of selection by index: take / gather / scatter along one dimension of 3-D
(outer, dim, inner) views, flat gathers and scatter-adds by element position, and the embedding
lookups. One thread per element, grid-stride; additions into shared rows use atomics (float32,
float64 and int64 atomics exist from sm_60), so repeated indices add up as on the CPU. A plain
scatter with repeated indices keeps an arbitrary one of the values, as PyTorch's CUDA scatter.

Bags follow :mod:`zgrad.kernels.cpu.kernels.embedding` (``bounds``, ``mode`` 0 sum / 1 mean / 2 max,
``padding_idx`` -1 for none). Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import kernel

__all__ = [
    "take", "gather", "scatter", "scatter_add", "index_add", "take_flat", "add_at_flat", "put_flat",
    "count_indices", "first_outside", "embedding_backward", "embedding_renorm", "embedding_bag", "embedding_bag_backward",
    "embedding_bag_psw_backward",
]

MODE_MEAN, MODE_MAX = 1, 2


@kernel
def take(x, index, rows, inner, out):
    """out[o, j, i] = x[o, index[j], i], x and out flat in C order as (outer, rows, inner) and
    (outer, index.size, inner); 0 for an index outside x's rows (an embedding's indices are
    checked after the launch: :func:`first_outside`)."""
    k = index.size
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o, r = e // (k * inner), e % (k * inner)
        j, i = r // inner, r % inner
        row = index[j]
        out[e] = x[(o * rows + row) * inner + i] if 0 <= row < rows else out.dtype.type(0)


@kernel
def first_outside(values, low, high, skip, has_skip, out):
    """out[0] = min(out[0], the first position i whose values[i] is outside [low, high) and, with
    ``has_skip``, not ``skip``) (out[0] starts at values.size: none)."""
    for i in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        v = values[i]
        if (v < low or v >= high) and not (has_skip and v == skip):
            cuda.atomic.min(out, 0, i)


@kernel
def gather(x, index, out):
    """out[o, j, i] = x[o, index[o, j, i], i]."""
    k, inner = out.shape[1], out.shape[2]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o, r = e // (k * inner), e % (k * inner)
        j, i = r // inner, r % inner
        out[o, j, i] = x[o, index[o, j, i], i]


@kernel
def scatter(index, src, out):
    """out[o, index[o, j, i], i] = src[o, j, i]."""
    k, inner = index.shape[1], index.shape[2]
    for e in range(cuda.grid(1), index.size, cuda.gridsize(1)):
        o, r = e // (k * inner), e % (k * inner)
        j, i = r // inner, r % inner
        out[o, index[o, j, i], i] = src[o, j, i]


@kernel
def scatter_add(index, src, out):
    """out[o, index[o, j, i], i] += src[o, j, i] (atomic)."""
    k, inner = index.shape[1], index.shape[2]
    for e in range(cuda.grid(1), index.size, cuda.gridsize(1)):
        o, r = e // (k * inner), e % (k * inner)
        j, i = r // inner, r % inner
        cuda.atomic.add(out, (o, index[o, j, i], i), src[o, j, i])


@kernel
def index_add(index, src, out):
    """out[o, index[j], i] += src[o, j, i] (atomic)."""
    k, inner = src.shape[1], src.shape[2]
    for e in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        o, r = e // (k * inner), e % (k * inner)
        j, i = r // inner, r % inner
        cuda.atomic.add(out, (o, index[j], i), src[o, j, i])


@kernel
def take_flat(x, positions, out):
    """out[e] = x[positions[e]] for flat arrays."""
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[e] = x[positions[e]]


@kernel
def add_at_flat(positions, values, out):
    """out[positions[e]] += values[e] (atomic) for flat arrays."""
    for e in range(cuda.grid(1), positions.size, cuda.gridsize(1)):
        cuda.atomic.add(out, positions[e], values[e])


@kernel
def put_flat(positions, values, out):
    """out[positions[e]] = values[e] for flat arrays."""
    for e in range(cuda.grid(1), positions.size, cuda.gridsize(1)):
        out[positions[e]] = values[e]


@kernel
def count_indices(indices, counts):
    """counts[indices[k]] += 1 (atomic) for the indices inside counts; ``counts`` starts zeroed."""
    for k in range(cuda.grid(1), indices.size, cuda.gridsize(1)):
        index = indices[k]
        if 0 <= index < counts.size:
            cuda.atomic.add(counts, index, 1)


@kernel
def embedding_backward(grad, indices, width, padding_idx, counts, scale_by_freq, out):
    """out[indices[k], j] += grad[k, j] (/ counts[index] with ``scale_by_freq``), padding skipped;
    grad (indices.size, width) and out (rows, width) flat in C order."""
    T = out.dtype.type
    rows = out.size // width
    for e in range(cuda.grid(1), indices.size * width, cuda.gridsize(1)):
        k, j = e // width, e % width
        index = indices[k]
        if index != padding_idx and 0 <= index < rows:
            value = grad[e] / T(counts[index]) if scale_by_freq else grad[e]
            cuda.atomic.add(out, index * width + j, value)


@kernel
def embedding_renorm(weight, rows, max_norm, norm_type, is_inf):
    """Rescale each row in ``rows`` (distinct indices) whose norm exceeds ``max_norm`` to
    max_norm / (norm + 1e-7) of itself; one thread per row."""
    T = weight.dtype.type
    for k in range(cuda.grid(1), rows.size, cuda.gridsize(1)):
        r = rows[k]
        norm = T(0)
        for j in range(weight.shape[1]):
            v = abs(weight[r, j])
            if is_inf:
                norm = max(norm, v)
            else:
                norm += v ** norm_type
        if not is_inf:
            norm = norm ** (T(1) / norm_type)
        if norm > max_norm:
            scale = max_norm / (norm + T(1e-7))
            for j in range(weight.shape[1]):
                weight[r, j] *= scale


@kernel
def embedding_bag(weight, indices, bounds, per_sample_weights, mode, padding_idx, out, bag_size, max_indices):
    """out[b, j] = sum / mean / max over the rows of bag b (see the module docstring); one thread
    per (bag, column)."""
    T = out.dtype.type
    width = out.shape[1]
    weighted = per_sample_weights.size > 0
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        b, j = e // width, e % width
        acc = T(0)
        arg = -1
        count = 0
        for k in range(bounds[b], bounds[b + 1]):
            index = indices[k]
            if index == padding_idx:
                continue
            value = weight[index, j]
            if mode == MODE_MAX:
                if count == 0 or value > acc:
                    acc = value
                    arg = index
            else:
                acc += value * per_sample_weights[k] if weighted else value
            count += 1
        if mode == MODE_MEAN and count > 0:
            acc /= T(count)
        out[b, j] = acc
        if mode == MODE_MAX:
            max_indices[b, j] = arg
        if j == 0:
            bag_size[b] = count


@kernel
def embedding_bag_backward(grad, indices, bounds, per_sample_weights, mode, padding_idx, counts, scale_by_freq,
                           bag_size, max_indices, out):
    """The weight gradient of :func:`embedding_bag` added (atomically) into zeroed ``out``."""
    T = out.dtype.type
    width = grad.shape[1]
    weighted = per_sample_weights.size > 0
    for e in range(cuda.grid(1), grad.size, cuda.gridsize(1)):
        b, j = e // width, e % width
        g = grad[b, j]
        if mode == MODE_MAX:
            if max_indices[b, j] >= 0:
                cuda.atomic.add(out, (max_indices[b, j], j), g)
            continue
        for k in range(bounds[b], bounds[b + 1]):
            index = indices[k]
            if index == padding_idx:
                continue
            scale = per_sample_weights[k] if weighted else T(1)
            if scale_by_freq:
                scale /= T(counts[index])
            value = g / T(bag_size[b]) * scale if mode == MODE_MEAN else g * scale
            cuda.atomic.add(out, (index, j), value)


@kernel
def embedding_bag_psw_backward(grad, weight, indices, bounds, padding_idx, bag_of, out):
    """out[k] = dot(grad[bag of k], weight[indices[k]]), 0 for padding entries; one thread per k."""
    T = out.dtype.type
    for k in range(cuda.grid(1), indices.size, cuda.gridsize(1)):
        index = indices[k]
        total = T(0)
        if index != padding_idx:
            b = bag_of[k]
            for j in range(weight.shape[1]):
                total += grad[b, j] * weight[index, j]
        out[k] = total


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    i64, b = types.int64, types.boolean
    idx, idx3, idx2 = i64[::1], i64[:, :, :], i64[:, ::1]
    cases = []
    for dt in (types.float32, types.float64):
        v, m, t3 = dt[::1], dt[:, ::1], dt[:, :, :]
        cases += [
            ("take", take.py_func, (v, idx, i64, i64, v)),
            ("gather", gather.py_func, (t3, idx3, t3)),
            ("scatter", scatter.py_func, (idx3, t3, t3)),
            ("scatter_add", scatter_add.py_func, (idx3, t3, t3)),
            ("index_add", index_add.py_func, (idx, t3, t3)),
            ("take_flat", take_flat.py_func, (v, idx, v)),
            ("add_at_flat", add_at_flat.py_func, (idx, v, v)),
            ("put_flat", put_flat.py_func, (idx, v, v)),
            ("embedding_backward", embedding_backward.py_func, (v, idx, i64, i64, idx, b, v)),
            ("embedding_renorm", embedding_renorm.py_func, (m, idx, dt, dt, b)),
            ("embedding_bag", embedding_bag.py_func, (m, idx, idx, v, i64, i64, m, idx, idx2)),
            ("embedding_bag_backward", embedding_bag_backward.py_func,
             (m, idx, idx, v, i64, i64, idx, b, idx, idx2, m)),
            ("embedding_bag_psw_backward", embedding_bag_psw_backward.py_func, (m, m, idx, idx, i64, idx, v)),
        ]
    cases.append(("count_indices", count_indices.py_func, (idx, idx)))
    cases.append(("first_outside", first_outside.py_func, (idx, i64, i64, i64, b, idx)))
    return cases
