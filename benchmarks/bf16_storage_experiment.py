"""heat2d N^2 x STEPS steps with float32 arithmetic and the state stored as float32, float16 or bfloat16 (round to
nearest even, emulated on the bits): the error against the exact solution of each, to see what bfloat16 storage
would give. Same bytes as float16, so the same speed.

    python3 benchmarks/bf16_storage_experiment.py N STEPS
"""

import sys

import numpy as np


def to_bf16(a):
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((b + np.uint32(0x7FFF) + ((b >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(np.float32)


STORE = {"float32": lambda a: a.astype(np.float32), "float16": lambda a: a.astype(np.float16).astype(np.float32),
         "bfloat16": to_bf16}


def main(n: int, steps: int) -> None:
    h, alpha = 1.0 / (n + 1), 1.0
    dt = np.float32(0.9 * 2.0 / (alpha * 8 / h**2))
    x = h + h * np.arange(-1, n + 1)
    xx, yy = np.meshgrid(x, x, indexing="ij")
    mode = np.sin(np.pi * (xx + 0.25)) * np.sin(np.pi * (yy + 0.25))

    def exact(t):
        return np.exp(-2 * np.pi**2 * alpha * t) * mode

    c = np.float32(alpha * dt / h**2)
    for name, rnd in STORE.items():
        u, t = rnd(exact(0.0).astype(np.float32)), 0.0
        for s in range(steps):
            lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - np.float32(4) * u[1:-1, 1:-1]
            new = u.copy()
            new[1:-1, 1:-1] = u[1:-1, 1:-1] + c * lap
            t = (s + 1) * float(dt)
            e = rnd(exact(t).astype(np.float32))
            new[0, :], new[-1, :], new[:, 0], new[:, -1] = e[0, :], e[-1, :], e[:, 0], e[:, -1]
            u = rnd(new)
        err = np.abs(u[1:-1, 1:-1].astype(np.float64) - exact(t)[1:-1, 1:-1]).max()
        print(f"{name:9s} max error vs exact after {steps} steps: {err:.3e}  (max |u| {np.abs(exact(t)).max():.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
