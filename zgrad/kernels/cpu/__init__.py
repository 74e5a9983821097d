"""The CPU backend: the op vocabulary on numpy arrays (:mod:`zgrad.kernels.cpu.backend`, which
dispatch loads by name), its host code, and its Numba kernels (:mod:`zgrad.kernels.cpu.kernels`,
imported on first use)."""
