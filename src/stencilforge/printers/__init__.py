"""Printers turn the IR into something a backend runs: numpy evaluation (the oracle), numba source, CUDA C."""
