"""Benchmarks against peers and the hardware ceilings (`stencilforge bench`) and CUDA autotuning (`stencilforge tune`)."""
