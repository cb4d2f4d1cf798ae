"""Benchmarks against peers and the hardware ceilings (`stencilforge bench`) and CUDA autotuning (`stencilforge tune`).

Deliberately empty: `bench.cache` (the tune-cache lookup the cuda backend's auto
consults) must import without pulling in the benchmark machinery.
"""
