"""The CUDA backend: the op vocabulary on device arrays (:mod:`zgrad.kernels.cuda.backend`, which
dispatch loads by name on the first CUDA use), the device array and runtime, the host code of each
op group, and its Numba CUDA kernels (:mod:`zgrad.kernels.cuda.kernels`, imported on first use)."""
