"""Writes the scan benchmark's data with python-blosc2 4.14.1 (same pins as the fixtures):

    walk.b2nd   10,000,000 float64, a random walk; chunks of 1,000,000 (1-D b2nd)
    ticks.b2d   CTable of 10,000,000 rows: t int64 (increasing, ms), price float64
                (random walk), qty int32 (uniform 1..999); SUMMARY indexes built on close

Usage: python benches/scan_data.py OUT_DIR   (skips files that exist)
"""
import os
import sys
from dataclasses import dataclass

import blosc2
import numpy as np

N = 10_000_000


def main(out):
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(3)
    walk = os.path.join(out, "walk.b2nd")
    if not os.path.exists(walk):
        v = np.cumsum(r.normal(0, 1, N))
        blosc2.asarray(v, urlpath=walk, mode="w", chunks=(1_000_000,))
    ticks = os.path.join(out, "ticks.b2d")
    if not os.path.exists(os.path.join(ticks, "_meta.b2f")):
        @dataclass
        class Tick:
            t: int = blosc2.field(blosc2.int64())
            price: float = blosc2.field(blosc2.float64())
            qty: int = blosc2.field(blosc2.int32())

        arr = np.empty(N, dtype=[("t", "<i8"), ("price", "<f8"), ("qty", "<i4")])
        arr["t"] = np.arange(N) * 1000 + 1_700_000_000_000
        arr["price"] = 100 + np.cumsum(r.normal(0, 0.01, N))
        arr["qty"] = r.integers(1, 1000, N)
        t = blosc2.CTable(Tick, urlpath=ticks, mode="w", expected_size=N)
        t.extend(arr)
        t.close()


if __name__ == "__main__":
    main(sys.argv[1])
