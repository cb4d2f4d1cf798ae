"""One module per CUDA schedule; each turns a plan (the analysed access pattern) into a `Kernel`."""
