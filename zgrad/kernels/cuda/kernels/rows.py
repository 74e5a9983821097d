"""Row-wise CUDA kernels: one block per row of a C-contiguous (R, N) array (rows stride past the
grid), the block's threads striding over the row and combining by warp shuffles (each warp's
values), then shared memory (the warps' results).
The kernels on a training step's path (sums, norms, softmax, the cross-entropy) take their arrays
flat with the row count and width: a flat array is the allocation's own, where a 2-D one needs a
new strided wrapper per launch.

Reductions (sum, product, nansum, max/min, argmax/argmin, vector norms), running sums and products, softmax
and log-softmax with their gradients, logsumexp, variance, and the class losses. Accumulators
stay in the output's dtype (so an int64 output sums bool and small-integer rows without
wrapping). Kernels only: the host side is :mod:`zgrad.kernels.cuda.reduce`. Block sizes are
powers of two up to :data:`MAX_BLOCK`.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import WARP, device, kernel, math, shuffle_xor
from zgrad.kernels.cuda.kernels.vectors import VECTOR, fits4, load4

__all__ = ["CACHED_ROW_PER_THREAD", "MAX_BLOCK", "NANSUM", "PROD", "SUM", "WARP_ROW_PER_LANE", "block_extreme", "block_sum", "chunk_of_rows", "extreme_of", "norm_term", "warp_max", "warp_rows", "warp_sum"]

MAX_BLOCK = 256

# What row_reduce computes: a sum, a product, or a sum that skips NaNs.
SUM, PROD, NANSUM = 0, 1, 2


@device
def _larger(a, b):
    return a if (a > b or a != a) else b  # NaN wins, as numpy's max


@device
def _smaller(a, b):
    return a if (a < b or a != a) else b


@device
def _combine(a, b, product):
    return a * b if product else a + b


@device
def _accumulate(acc, value, op, T):
    """acc combined with ``value`` by the row reduction ``op`` (a NaN skipped by NANSUM)."""
    if op == NANSUM and value != value:
        return acc
    return _combine(acc, T(value), op == PROD)


# How a block combines its threads' values besides SUM and PROD.
_MAX, _MIN = 3, 4


@device
def _merge(a, b, how):
    """a and b combined as ``how`` says: SUM, PROD, _MAX or _MIN (NaN winning the last two)."""
    if how == SUM:
        return a + b
    if how == PROD:
        return a * b
    return _larger(a, b) if how == _MAX else _smaller(a, b)


@device
def _warp_combine(value, how, width):
    """The values of each group of ``width`` lanes (a power of two, at most a warp) combined as
    ``how`` says (:func:`_merge`), in every lane of the group: a butterfly of shuffles, each lane
    merging its partner's value (a + b == b + a exactly, so lanes end with the same bits; a max or
    min may differ in the sign of a zero)."""
    offset = width // 2
    while offset > 0:
        value = _merge(value, shuffle_xor(value, offset), how)
        offset //= 2
    return value


@device
def _block_combine(buf, value, how):
    """The block's 32- or 64-bit values combined as ``how`` says (:func:`_merge`), in every thread:
    each warp's by shuffles, then the warps' results the same way (two barriers, where a
    shared-memory tree takes one per halving). Blocks of a power-of-two size; every thread calls
    it; ``buf``: a shared array of at least blockDim / WARP."""
    width = min(WARP, cuda.blockDim.x)
    value = _warp_combine(value, how, width)
    if cuda.blockDim.x <= WARP:
        return value
    t = cuda.threadIdx.x
    if t % WARP == 0:
        buf[t // WARP] = value
    cuda.syncthreads()
    warps = cuda.blockDim.x // WARP  # a power of two: every group of that many lanes gets them all
    result = _warp_combine(buf[t % warps], how, warps)
    cuda.syncthreads()  # every warp has read buf before the block's next use of it
    return result


@device
def block_sum(buf, value):
    """The sum of the block's values, in every thread (every thread calls it; ``buf``: a shared
    array of at least blockDim / WARP elements of the values' type)."""
    return _block_combine(buf, value, SUM)


@device
def _block_scan(buf, value, product):
    """The running sum (or ``product``) of the block's values up to this thread's, inclusive
    (Hillis-Steele); every thread's stays in buf until the caller synchronizes."""
    t = cuda.threadIdx.x
    buf[t] = value
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        earlier = buf[t - offset] if t >= offset else value
        cuda.syncthreads()
        if t >= offset:
            buf[t] = _combine(buf[t], earlier, product)
        cuda.syncthreads()
        offset *= 2
    return buf[t]


@device
def block_extreme(buf, value, largest):
    """The max (``largest``) or min of the block's 32- or 64-bit values, NaN winning, in every
    thread (:func:`_block_combine`)."""
    return _block_combine(buf, value, _MAX if largest else _MIN)


@device
def _block_extreme_by_tree(buf, value, largest):
    """:func:`block_extreme` for values of any type (bool, 8- and 16-bit integers: warp shuffles
    carry 32- and 64-bit values only), through a shared-memory tree (``buf``: blockDim)."""
    t = cuda.threadIdx.x
    buf[t] = value
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            buf[t] = extreme_of(buf[t], buf[t + s], largest)
        cuda.syncthreads()
        s //= 2
    result = buf[0]
    cuda.syncthreads()
    return result


@device
def _online_add(m, s, v, T):
    """A run's (max m, sum s of exp(x - m)) with the element ``v`` added: s rescaled when ``v`` is
    a new max. As in the two-pass form: NaN wins, -inf adds nothing, +inf makes the sum NaN (its
    exp(inf - inf))."""
    if v > m:
        return v, s * math.exp(m - v) + math.exp(v - v)
    if v != v:
        return v, v
    if v == -T(math.inf):
        return m, s
    return m, s + math.exp(v - m)


@device
def _online_merge(m, s, m2, s2, T):
    """The (max, sum of exp(x - max)) of two runs from theirs; NaN wins."""
    if m != m or m2 != m2:
        return T(math.nan), T(math.nan)
    top = _larger(m, m2)
    if top == -T(math.inf):  # no element above -inf in either run
        return top, T(0)
    return top, s * math.exp(m - top) + s2 * math.exp(m2 - top)


@device
def _warp_online_merge(m, s, width, T):
    """The (max, sum of exp(x - max)) pairs of each group of ``width`` lanes merged
    (:func:`_online_merge`), in every lane of the group: :func:`_warp_combine`'s butterfly for a
    pair. Both lanes of a pair merge the lower lane's pair first: the sum's two products may be
    contracted into one fused multiply-add, which rounds differently with its operands swapped,
    and the lanes must end with the same bits."""
    offset = width // 2
    while offset > 0:
        m2, s2 = shuffle_xor(m, offset), shuffle_xor(s, offset)
        if cuda.threadIdx.x & offset:  # the upper lane of the pair
            m, s = _online_merge(m2, s2, m, s, T)
        else:
            m, s = _online_merge(m, s, m2, s2, T)
        offset //= 2
    return m, s


@device
def _row_max_and_sum_exp(x, row, n, peaks, sums, T):
    """(max, sum of exp(v - max)) over the ``n`` elements v of flat ``x`` from ``row`` on, in one
    read of the row (online softmax: each thread's sum is rescaled whenever its max grows), in
    every thread: the threads' pairs merge as :func:`_block_combine` merges values, each warp's by
    shuffles, then the warps' through the shared arrays ``peaks`` and ``sums`` (blockDim / WARP)."""
    t = cuda.threadIdx.x
    m, s = -T(math.inf), T(0)
    for j in range(t, n, cuda.blockDim.x):
        m, s = _online_add(m, s, T(x[row + j]), T)
    m, s = _warp_online_merge(m, s, min(WARP, cuda.blockDim.x), T)
    if cuda.blockDim.x <= WARP:
        return m, s
    if t % WARP == 0:
        peaks[t // WARP] = m
        sums[t // WARP] = s
    cuda.syncthreads()
    warps = cuda.blockDim.x // WARP
    m, s = _warp_online_merge(peaks[t % warps], sums[t % warps], warps, T)
    cuda.syncthreads()  # every warp has read the shared arrays before the block's next use of them
    return m, s


@kernel
def row_reduce(x, rows, n, op, out):
    """out[r] = the sum (``op`` SUM), product (PROD) or sum of the non-NaN elements (NANSUM) of
    row r of x, accumulated in out's dtype (0, or 1 for a product, for an empty row). x: ``rows``
    rows of ``n`` elements, flat."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    product = op == PROD
    step = cuda.blockDim.x
    groups = n // VECTOR if fits4(x) and n % VECTOR == 0 else 0  # every row starts on a 4-element boundary
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        # four accumulators, four loads in flight per trip (one load per trip leaves the memory idle);
        # by groups of 4 adjacent elements where the rows allow (vectors.load4), two groups a trip
        acc0 = acc1 = acc2 = acc3 = T(1) if product else T(0)
        j = cuda.threadIdx.x
        if groups:
            while j < groups:
                a0, a1, a2, a3 = load4(x, row + VECTOR * j)
                if j + step < groups:
                    b0, b1, b2, b3 = load4(x, row + VECTOR * (j + step))
                    acc0 = _accumulate(acc0, b0, op, T)
                    acc1 = _accumulate(acc1, b1, op, T)
                    acc2 = _accumulate(acc2, b2, op, T)
                    acc3 = _accumulate(acc3, b3, op, T)
                acc0 = _accumulate(acc0, a0, op, T)
                acc1 = _accumulate(acc1, a1, op, T)
                acc2 = _accumulate(acc2, a2, op, T)
                acc3 = _accumulate(acc3, a3, op, T)
                j += 2 * step
            j = n
        while j + 3 * step < n:
            v0, v1, v2, v3 = x[row + j], x[row + j + step], x[row + j + 2 * step], x[row + j + 3 * step]
            acc0 = _accumulate(acc0, v0, op, T)
            acc1 = _accumulate(acc1, v1, op, T)
            acc2 = _accumulate(acc2, v2, op, T)
            acc3 = _accumulate(acc3, v3, op, T)
            j += 4 * step
        while j < n:
            acc0 = _accumulate(acc0, x[row + j], op, T)
            j += step
        acc = _combine(_combine(acc0, acc1, product), _combine(acc2, acc3, product), product)
        total = _block_combine(buf, acc, PROD if product else SUM)  # NANSUM's partial sums add
        if cuda.threadIdx.x == 0:
            out[r] = total


@device
def chunk_of_rows(p, rows, chunks):
    """(first, end) of the rows of chunk ``p`` when ``rows`` rows are split into ``chunks`` chunks."""
    per_chunk = (rows + chunks - 1) // chunks
    return p * per_chunk, min(rows, (p + 1) * per_chunk)


@kernel
def column_reduce(x, rows, columns, inner, op, out):
    """Row p of out = the sum (``op`` SUM), product (PROD) or NaN-skipping sum (NANSUM) over the
    rows of chunk p of x, accumulated in out's dtype: a reduction over axes of x that it reads in
    place, each thread a column (grid y walks the chunks; grid x and the threads, the columns).
    x is C-ordered (outer, ``rows``, ``inner``), ``columns`` = outer * inner: column j is
    x[j // inner, :, j % inner] (a reduction over leading axes has outer 1, ``inner`` =
    ``columns``). out holds one row of ``columns`` per chunk. Both are flat (the allocations' own
    arrays: no strided wrapper per launch)."""
    T = out.dtype.type
    product = op == PROD
    chunks = out.size // columns
    for p in range(cuda.blockIdx.y, chunks, cuda.gridDim.y):
        start, end = chunk_of_rows(p, rows, chunks)
        for j in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, columns,
                       cuda.gridDim.x * cuda.blockDim.x):
            first = (j // inner) * rows * inner + j % inner
            # four accumulators, four loads in flight per trip: one leaves each trip waiting for its
            # load (the partial results' pass, 256 rows a thread, took 81 us on an H200)
            acc0 = acc1 = acc2 = acc3 = T(1) if product else T(0)
            r = start
            while r + 3 < end:
                at = first + r * inner
                v0, v1, v2, v3 = x[at], x[at + inner], x[at + 2 * inner], x[at + 3 * inner]
                acc0 = _accumulate(acc0, v0, op, T)
                acc1 = _accumulate(acc1, v1, op, T)
                acc2 = _accumulate(acc2, v2, op, T)
                acc3 = _accumulate(acc3, v3, op, T)
                r += 4
            while r < end:
                acc0 = _accumulate(acc0, x[first + r * inner], op, T)
                r += 1
            out[p * columns + j] = _combine(_combine(acc0, acc1, product), _combine(acc2, acc3, product), product)


@device
def extreme_of(m, a, largest):
    """The larger (``largest``) or smaller of m and a, NaN winning."""
    return _larger(m, a) if largest else _smaller(m, a)


@device
def norm_term(a, order, T):
    """What |x| = ``a`` adds to an ``order``-norm's sum (finite order): a² for 2, a for 1, 1 for a
    non-zero with order 0, else a ** order."""
    if order == T(2):
        return a * a
    if order == T(1):
        return a
    if order == T(0):
        return T(1) if a != T(0) else T(0)
    return math.pow(a, order)


@kernel
def row_norm(x, rows, n, order, power, out):
    """out[r] = (the sum over j of |x[r, j]| ** ``order``) ** ``power`` in out's dtype: squares for
    order 2 and absolute values for order 1 without a power, the count of non-zeros for order 0;
    for order inf (-inf) the largest (smallest) |x[r, j]| of the non-empty row, NaN winning, and no
    power. ``power`` 1 / order gives each row's norm, 1 the partial sums of a longer reduction.
    ``order`` and ``power`` come in out's dtype (a float32 kernel computes in float32). x: ``rows``
    rows of ``n`` elements, flat."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    largest = order > T(0)
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        if math.isinf(order):
            m = T(math.fabs(x[row + min(cuda.threadIdx.x, n - 1)]))
            for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
                m = extreme_of(m, T(math.fabs(x[row + j])), largest)
            result = block_extreme(buf, m, largest)
        else:
            acc = T(0)
            for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
                acc += norm_term(T(math.fabs(x[row + j])), order, T)
            total = block_sum(buf, acc)
            result = total if power == T(1) else math.pow(total, power)
        if cuda.threadIdx.x == 0:
            out[r] = result


@kernel
def row_scan(x, product, reverse, exclusive, out):
    """out[r, j] = the running sum (or ``product``) of x[r, :j + 1] in out's dtype; with
    ``reverse``, of x[r, j:]; ``exclusive`` leaves x[r, j] itself out. The row goes in chunks of
    one block, each chunk scanned in shared memory and carried into the next."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    t, width, n = cuda.threadIdx.x, cuda.blockDim.x, x.shape[1]
    identity = T(1) if product else T(0)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        carry = identity
        for start in range(0, n, width):
            j = start + t
            k = n - 1 - j if reverse else j
            inclusive = _block_scan(buf, T(x[r, k]) if j < n else identity, product)
            before = buf[t - 1] if t > 0 else identity
            chunk_total = buf[width - 1]
            cuda.syncthreads()
            if j < n:
                out[r, k] = _combine(carry, before if exclusive else inclusive, product)
            carry = _combine(carry, chunk_total, product)


@kernel
def row_extreme(x, largest, out):
    """out[r] = max (``largest``) or min of the non-empty row x[r]; NaN wins."""
    buf = cuda.shared.array(MAX_BLOCK, x.dtype)
    n = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m = x[r, min(cuda.threadIdx.x, n - 1)]
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            m = _larger(m, x[r, j]) if largest else _smaller(m, x[r, j])
        result = _block_extreme_by_tree(buf, m, largest)
        if cuda.threadIdx.x == 0:
            out[r] = result


@device
def _better(v, i, w, k, largest):
    """Whether (v, i) beats (w, k): NaN first, then the larger (smaller) value, then the lower index."""
    if v != v or w != w:
        return (v != v and (w == w or i < k))
    if v == w:
        return i < k
    return v > w if largest else v < w


@device
def _block_arg_best(values, index, best, best_i, largest):
    """The block's best (value, index) pair by :func:`_better`, given each thread's, in thread 0
    (the shared arrays ``values`` and ``index`` hold blockDim pairs; a barrier on return)."""
    t = cuda.threadIdx.x
    values[t] = best
    index[t] = best_i
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s and _better(values[t + s], index[t + s], values[t], index[t], largest):
            values[t] = values[t + s]
            index[t] = index[t + s]
        cuda.syncthreads()
        s //= 2
    best, best_i = values[0], index[0]
    cuda.syncthreads()  # every thread has read the pair before the arrays' next use
    return best, best_i


@kernel
def row_arg_extreme(x, largest, out):
    """out[r] = the index of the max (``largest``) or min of x[r]: first on ties, a NaN's if any."""
    values = cuda.shared.array(MAX_BLOCK, x.dtype)
    index = cuda.shared.array(MAX_BLOCK, out.dtype)
    t = cuda.threadIdx.x
    n = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        best_i = min(t, n - 1)
        best = x[r, best_i]
        for j in range(t, n, cuda.blockDim.x):
            if _better(x[r, j], j, best, best_i, largest):
                best, best_i = x[r, j], j
        best, best_i = _block_arg_best(values, index, best, best_i, largest)
        if t == 0:
            out[r] = best_i


@kernel
def chunk_arg_extremes(x, chunk, largest, best_values, best_indices):
    """For each chunk p of ``chunk`` elements of the long 1-D row ``x`` (the last may be shorter):
    best_values[p], best_indices[p] = the max (``largest``) or min of the chunk and its index in
    the row, first on ties, a NaN's if any (a block per chunk; the first of two passes over a row
    one block would read alone)."""
    values = cuda.shared.array(MAX_BLOCK, x.dtype)
    index = cuda.shared.array(MAX_BLOCK, best_indices.dtype)
    t = cuda.threadIdx.x
    for p in range(cuda.blockIdx.x, best_values.size, cuda.gridDim.x):
        start = p * chunk
        end = min(start + chunk, x.size)
        best_i = min(start + t, end - 1)
        best = x[best_i]
        for j in range(start + t, end, cuda.blockDim.x):
            if _better(x[j], j, best, best_i, largest):
                best, best_i = x[j], j
        best, best_i = _block_arg_best(values, index, best, best_i, largest)
        if t == 0:
            best_values[p] = best
            best_indices[p] = best_i


@kernel
def arg_extreme_of_pairs(pair_values, pair_indices, largest, out):
    """out[0] = the index of the best of the (value, index) pairs (:func:`chunk_arg_extremes`'
    results), by the same order: NaN first, then the larger (smaller) value, then the lower index.
    One block."""
    values = cuda.shared.array(MAX_BLOCK, pair_values.dtype)
    index = cuda.shared.array(MAX_BLOCK, pair_indices.dtype)
    t = cuda.threadIdx.x
    first = min(t, pair_values.size - 1)
    best, best_i = pair_values[first], pair_indices[first]
    for j in range(t, pair_values.size, cuda.blockDim.x):
        if _better(pair_values[j], pair_indices[j], best, best_i, largest):
            best, best_i = pair_values[j], pair_indices[j]
    best, best_i = _block_arg_best(values, index, best, best_i, largest)
    if t == 0:
        out[0] = best_i


# A row of up to CACHED_ROW_PER_THREAD * the block's threads is read once into the threads' own
# memory; longer rows take two passes over the row (max and sum of exponentials at once, then the
# write).
CACHED_ROW_PER_THREAD = 8


@kernel
def softmax_cached(x, rows, n, log, out):
    """out[r] = softmax(x[r]) or, with ``log``, log_softmax(x[r]), max-shifted, for rows of at
    most CACHED_ROW_PER_THREAD * blockDim elements: one read of x (each thread keeps its elements)
    and one exp per element. x and out: ``rows`` rows of ``n`` elements, flat."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    held = cuda.local.array(CACHED_ROW_PER_THREAD, out.dtype)
    T = out.dtype.type
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    count = (n - t + step - 1) // step if t < n else 0
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n + t
        peak = -T(math.inf)
        for k in range(count):
            held[k] = x[row + k * step]
        for k in range(count):
            peak = _larger(peak, held[k])
        peak = block_extreme(buf, peak, True)
        acc = T(0)
        for k in range(count):
            held[k] = held[k] - peak
            acc += math.exp(held[k])
        total = block_sum(buf, acc)
        log_total = math.log(total)
        for k in range(count):
            out[row + k * step] = held[k] - log_total if log else math.exp(held[k]) / total


# A row of at most WARP_ROW_PER_LANE elements per lane of a warp (1024 on a GPU) is a warp's: the
# lanes hold it in registers, and its max and sum meet by shuffles, without a barrier or shared
# memory (a block of 256 threads on a row of 256 elements spent its time in barriers).
WARP_ROW_PER_LANE = 32


@device
def warp_rows(rows):
    """(lanes per row, this thread's lane, and the range (first, end, step) of the rows its warp
    takes) for a warp-per-row kernel over ``rows`` rows (a warp, or the block when it is smaller).
    The range runs past ``rows`` to a whole number of the block's rows, so that every warp of a
    block makes the same trips (the simulator's shuffles wait at the block's barrier); a row from
    ``rows`` on is spare, computed by no one."""
    lanes = min(WARP, cuda.blockDim.x)
    t = cuda.threadIdx.x
    per_block = cuda.blockDim.x // lanes
    end = (rows + per_block - 1) // per_block * per_block
    return lanes, t % lanes, cuda.blockIdx.x * per_block + t // lanes, end, cuda.gridDim.x * per_block


@device
def warp_sum(value, lanes):
    """The sum of the values of each group of ``lanes`` lanes, in every lane of the group."""
    return _warp_combine(value, SUM, lanes)


@device
def warp_max(value, lanes):
    """The largest of the values of each group of ``lanes`` lanes, NaN winning, in every lane."""
    return _warp_combine(value, _MAX, lanes)


@kernel
def softmax_warp_rows(x, rows, n, log, out):
    """:func:`softmax` for rows of at most WARP_ROW_PER_LANE elements per lane, a warp per row:
    one read of x and one exp per element. The block's warps step through the rows together (the
    last group's spare warps compute nothing but take part)."""
    held = cuda.local.array(WARP_ROW_PER_LANE, out.dtype)
    T = out.dtype.type
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        row = r * n + lane
        peak = -T(math.inf)
        for k in range(WARP_ROW_PER_LANE):
            v = T(x[row + k * lanes]) if live and lane + k * lanes < n else -T(math.inf)
            held[k] = v
            peak = _larger(peak, v)
        peak = _warp_combine(peak, _MAX, lanes)
        acc = T(0)
        for k in range(WARP_ROW_PER_LANE):
            if lane + k * lanes < n:
                shifted = held[k] - peak
                e = math.exp(shifted)
                acc += e
                held[k] = shifted if log else e
        total = warp_sum(acc, lanes)
        if live:
            log_total = math.log(total)
            for k in range(WARP_ROW_PER_LANE):
                if lane + k * lanes < n:
                    out[row + k * lanes] = held[k] - log_total if log else held[k] / total


@kernel
def softmax_backward_warp_rows(grad, y, rows, n, log, out):
    """:func:`softmax_backward` for rows of at most WARP_ROW_PER_LANE elements per lane, a warp per
    row: one read of grad and y, their row sum by shuffles."""
    held_g = cuda.local.array(WARP_ROW_PER_LANE, out.dtype)
    held_y = cuda.local.array(WARP_ROW_PER_LANE, out.dtype)
    T = out.dtype.type
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        row = r * n + lane
        acc = T(0)
        for k in range(WARP_ROW_PER_LANE):
            if live and lane + k * lanes < n:
                g, v = grad[row + k * lanes], y[row + k * lanes]
                held_g[k] = g
                held_y[k] = v
                acc += g if log else g * v
        total = warp_sum(acc, lanes)
        if live:
            for k in range(WARP_ROW_PER_LANE):
                if lane + k * lanes < n:
                    if log:
                        out[row + k * lanes] = held_g[k] - math.exp(held_y[k]) * total
                    else:
                        out[row + k * lanes] = held_y[k] * (held_g[k] - total)


@kernel
def softmax(x, rows, n, log, out):
    """out[r] = softmax(x[r]) or, with ``log``, log_softmax(x[r]), max-shifted, in two reads of
    x[r]: its max and sum of exponentials together, then the write. x and out: ``rows`` rows of
    ``n`` elements, flat."""
    peaks = cuda.shared.array(MAX_BLOCK, out.dtype)
    sums = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        peak, total = _row_max_and_sum_exp(x, row, n, peaks, sums, T)
        log_total = math.log(total)
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            shifted = x[row + j] - peak
            out[row + j] = shifted - log_total if log else math.exp(shifted) / total


@kernel
def softmax_backward(grad, y, rows, n, log, out):
    """Softmax: out = y * (g - sum(g * y)); log-softmax: out = g - exp(y) * sum(g), per row.
    grad, y and out: ``rows`` rows of ``n`` elements, flat."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        acc = T(0)
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            acc += grad[row + j] if log else grad[row + j] * y[row + j]
        total = block_sum(buf, acc)
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            if log:
                out[row + j] = grad[row + j] - math.exp(y[row + j]) * total
            else:
                out[row + j] = y[row + j] * (grad[row + j] - total)


@kernel
def logsumexp(x, rows, n, out):
    """out[r] = log(sum(exp(x[r]))), max-shifted, in one read of x[r]; rows with an infinite max
    give it. x: ``rows`` rows of ``n`` elements, flat."""
    peaks = cuda.shared.array(MAX_BLOCK, out.dtype)
    sums = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        peak, total = _row_max_and_sum_exp(x, r * n, n, peaks, sums, T)
        if cuda.threadIdx.x == 0:
            out[r] = peak if (peak == T(math.inf) or peak == -T(math.inf)) else math.log(total) + peak


@kernel
def variance(x, correction, mean_out, var_out):
    """Two-pass mean and variance of each row, divisor max(N - correction, 0)."""
    buf = cuda.shared.array(MAX_BLOCK, var_out.dtype)
    T = var_out.dtype.type
    n = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        acc = T(0)
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            acc += x[r, j]
        mean = block_sum(buf, acc) / T(n)
        acc = T(0)
        for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            d = x[r, j] - mean
            acc += d * d
        squares = block_sum(buf, acc)
        if cuda.threadIdx.x == 0:
            mean_out[r] = mean
            var_out[r] = squares / max(T(n) - correction, T(0))


@device
def _class_weight(weight, target, T):
    return weight[target] if weight.size > 0 else T(1)


@device
def _skipped(target, ignore_index, classes):
    """A row that counts nothing: its target is ``ignore_index``, or outside [0, classes) (the
    host reports that after the launch; until then nothing is read out of bounds)."""
    return target == ignore_index or target < 0 or target >= classes


@kernel
def class_loss(logits, rows, c, targets, weight, ignore_index, smoothing, probs_out, loss_out, weight_out):
    """probs_out = softmax(logits); per-row smoothed, weighted cross-entropy (PyTorch's form) into
    loss_out, w[target] into weight_out (0 and 0 on ignored rows). logits and probs_out: ``rows``
    rows of ``c`` classes, flat."""
    buf = cuda.shared.array(MAX_BLOCK, loss_out.dtype)
    sums = cuda.shared.array(MAX_BLOCK, loss_out.dtype)
    T = loss_out.dtype.type
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * c
        peak, total = _row_max_and_sum_exp(logits, row, c, buf, sums, T)
        shift = peak + math.log(total)  # log_softmax = x - shift
        smooth = T(0)
        for j in range(cuda.threadIdx.x, c, cuda.blockDim.x):
            probs_out[row + j] = math.exp(logits[row + j] - peak) / total
            smooth += _class_weight(weight, j, T) * (shift - logits[row + j])
        smooth = block_sum(buf, smooth)
        if cuda.threadIdx.x == 0:
            target = targets[r]
            if _skipped(target, ignore_index, c):
                loss_out[r] = T(0)
                weight_out[r] = T(0)
            else:
                w = _class_weight(weight, target, T)
                loss = (T(1) - smoothing) * w * (shift - logits[row + target])
                if smoothing > T(0):  # else a -inf logit's infinite term would make 0 * inf = NaN of it
                    loss += smoothing / T(c) * smooth
                loss_out[r] = loss
                weight_out[r] = w


@kernel
def class_loss_warp_rows(logits, rows, c, targets, weight, ignore_index, smoothing, probs_out, loss_out, weight_out):
    """:func:`class_loss` a warp per row, for rows of at most WARP_ROW_PER_LANE classes a lane: the
    row held in the lanes' registers (one read of the logits), its (max, sum of exp) pairs and the
    smoothing term merged by shuffles. The block's warps step through the rows together."""
    held = cuda.local.array(WARP_ROW_PER_LANE, loss_out.dtype)
    T = loss_out.dtype.type
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        row = r * c + lane
        m, s = -T(math.inf), T(0)
        for k in range(WARP_ROW_PER_LANE):
            if live and lane + k * lanes < c:
                v = T(logits[row + k * lanes])
                held[k] = v
                m, s = _online_add(m, s, v, T)
        peak, total = _warp_online_merge(m, s, lanes, T)
        shift = peak + math.log(total)  # log_softmax = x - shift
        smooth = T(0)
        if live:
            for k in range(WARP_ROW_PER_LANE):
                j = lane + k * lanes
                if j < c:
                    probs_out[row + k * lanes] = math.exp(held[k] - peak) / total
                    smooth += _class_weight(weight, j, T) * (shift - held[k])
        smooth = warp_sum(smooth, lanes)
        if live and lane == 0:
            target = targets[r]
            if _skipped(target, ignore_index, c):
                loss_out[r] = T(0)
                weight_out[r] = T(0)
            else:
                w_t = _class_weight(weight, target, T)
                loss = (T(1) - smoothing) * w_t * (shift - logits[r * c + target])
                if smoothing > T(0):  # else a -inf logit's infinite term would make 0 * inf = NaN of it
                    loss += smoothing / T(c) * smooth
                loss_out[r] = loss
                weight_out[r] = w_t


@kernel
def class_loss_backward(probs, rows, c, targets, weight, ignore_index, smoothing, row_grad, out):
    """out = g (1-eps) w_t (p - onehot(t)) + g eps/C (sum(w) p - w) per row; 0 on ignored rows.
    probs and out: ``rows`` rows of ``c`` classes, flat."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    acc = T(0)
    for j in range(cuda.threadIdx.x, c, cuda.blockDim.x):
        acc += _class_weight(weight, j, T)
    weight_sum = block_sum(buf, acc)
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * c
        target = targets[r]
        g = row_grad[0] if row_grad.size == 1 else row_grad[r]
        skipped = _skipped(target, ignore_index, c)
        hard = g * (T(1) - smoothing) * (T(0) if skipped else _class_weight(weight, target, T))
        soft = g * smoothing / T(c)
        for j in range(cuda.threadIdx.x, c, cuda.blockDim.x):
            if skipped:
                out[row + j] = T(0)
            else:
                value = hard * probs[row + j] + soft * weight_sum * probs[row + j] - soft * _class_weight(weight, j, T)
                out[row + j] = value - hard if j == target else value


@kernel
def nll(log_probs, targets, weight, ignore_index, loss_out, weight_out):
    """loss_out[i] = -w[t_i] * log_probs[i, t_i]; weight_out[i] = w[t_i] (0 and 0 when ignored)."""
    T = loss_out.dtype.type
    for i in range(cuda.grid(1), targets.size, cuda.gridsize(1)):
        target = targets[i]
        if _skipped(target, ignore_index, log_probs.shape[1]):
            loss_out[i] = T(0)
            weight_out[i] = T(0)
        else:
            w = _class_weight(weight, target, T)
            loss_out[i] = -w * log_probs[i, target]
            weight_out[i] = w


@kernel
def nll_backward(targets, weight, ignore_index, row_grad, out):
    """out = -g_i * w[t_i] at (i, t_i), 0 elsewhere and on ignored rows."""
    T = out.dtype.type
    c = out.shape[1]
    for k in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i, j = k // c, k % c
        target = targets[i]
        g = row_grad[0] if row_grad.size == 1 else row_grad[i]
        out[i, j] = -g * _class_weight(weight, target, T) if (j == target and target != ignore_index) else T(0)


@kernel
def cross_entropy_backward(probs, c, targets, ignore_index, grad, divisor, out):
    """out = grad[0] / divisor[0] * (probs - onehot(targets)), 0 on rows whose target is
    ``ignore_index`` (or out of range); NaN throughout for a divisor of 0. probs and out: rows of
    ``c`` classes, flat."""
    T = out.dtype.type
    scale = grad[0] / divisor[0] if divisor[0] != T(0) else T(math.nan)
    for k in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i, j = k // c, k % c
        target = targets[i]
        if _skipped(target, ignore_index, c):
            out[k] = T(0)
        else:
            out[k] = scale * (probs[k] - (T(1) if j == target else T(0)))


@kernel
def loss_ratio(totals, mean, loss_out, divisor_out):
    """From totals = [the counted rows' summed loss, their count]: loss_out[0] = the sum, over the
    count when ``mean`` (NaN for none); divisor_out[0] = the count (or 1). One thread."""
    T = loss_out.dtype.type
    if cuda.grid(1) == 0:
        divisor = totals[1] if mean else T(1)
        loss_out[0] = totals[0] / divisor if divisor != T(0) else T(math.nan)
        divisor_out[0] = divisor


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64, and
    of the sums and running sums of bool and integer rows into int64."""
    from numba import types

    cases = []
    i64 = types.int64
    for dt in (types.float32, types.float64):
        m, v = dt[:, ::1], dt[::1]
        idx = i64[::1]
        cases += [
            ("row_reduce", row_reduce.py_func, (v, i64, i64, i64, v)),
            ("column_reduce", column_reduce.py_func, (v, i64, i64, i64, i64, v)),
            ("row_scan", row_scan.py_func, (m, types.boolean, types.boolean, types.boolean, m)),
            ("row_extreme", row_extreme.py_func, (m, types.boolean, v)),
            ("row_norm", row_norm.py_func, (v, i64, i64, dt, dt, v)),
            ("row_arg_extreme", row_arg_extreme.py_func, (m, types.boolean, idx)),
            ("chunk_arg_extremes", chunk_arg_extremes.py_func, (v, types.int64, types.boolean, v, idx)),
            ("arg_extreme_of_pairs", arg_extreme_of_pairs.py_func, (v, idx, types.boolean, idx)),
            ("softmax", softmax.py_func, (v, i64, i64, types.boolean, v)),
            ("softmax_cached", softmax_cached.py_func, (v, i64, i64, types.boolean, v)),
            ("softmax_backward", softmax_backward.py_func, (v, v, i64, i64, types.boolean, v)),
            ("softmax_warp_rows", softmax_warp_rows.py_func, (v, i64, i64, types.boolean, v)),
            ("softmax_backward_warp_rows", softmax_backward_warp_rows.py_func, (v, v, i64, i64, types.boolean, v)),
            ("logsumexp", logsumexp.py_func, (v, i64, i64, v)),
            ("variance", variance.py_func, (m, dt, v, v)),
            ("class_loss", class_loss.py_func, (v, i64, i64, idx, v, i64, dt, v, v, v)),
            ("class_loss_warp_rows", class_loss_warp_rows.py_func, (v, i64, i64, idx, v, i64, dt, v, v, v)),
            ("class_loss_backward", class_loss_backward.py_func, (v, i64, i64, idx, v, i64, dt, v, v)),
            ("nll", nll.py_func, (m, idx, v, i64, v, v)),
            ("nll_backward", nll_backward.py_func, (idx, v, i64, v, m)),
            ("cross_entropy_backward", cross_entropy_backward.py_func, (v, i64, idx, i64, v, v, v)),
            ("loss_ratio", loss_ratio.py_func, (v, types.boolean, v, v)),
        ]
    flag = types.boolean
    for dt in (types.boolean, types.uint8, types.int8, types.int16, types.int32, types.int64):
        cases += [
            ("row_reduce", row_reduce.py_func, (dt[::1], i64, i64, i64, i64[::1])),
            ("column_reduce", column_reduce.py_func, (dt[::1], i64, i64, i64, i64, i64[::1])),
            ("row_scan", row_scan.py_func, (dt[:, ::1], flag, flag, flag, i64[:, ::1])),
        ]
    return cases
