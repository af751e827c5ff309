"""Writes the scan benchmark's data with python-blosc2 4.14.1 (same pins as the fixtures),
each data set twice: with the defaults (ZSTD, shuffle) and with LZ4 (shuffle):

    walk-{zstd,lz4}.b2nd   10,000,000 float64, a random walk; chunks of 1,000,000 (1-D b2nd)
    ticks-{zstd,lz4}.b2d   CTable of 10,000,000 rows: id int64 (sorted 0..N), t timestamp[ms]
                           (increasing), price float64 (random walk), qty int32 (uniform
                           1..999); SUMMARY indexes built on close; default chunking
    grid-{zstd,lz4}.b2nd   8192 x 8192 float32 (67 M elements), a smooth field plus noise;
                           default chunking (chunks and blocks span whole rows)
    tiles-{zstd,lz4}.b2nd  the same values in 1024 x 1024 chunks (default blocks), which
                           split rows
    names-{zstd,lz4}.b2d   CTable of 10,000,000 rows: id int64, name string (<U12: numpy's
                           fixed-width UTF-32) drawn from 2,000 names of 3-12 letters, one
                           in ten with a non-ASCII letter; default chunking
    cats-{zstd,lz4}.b2d    the same 10,000,000 rows with the name twice, as a dictionary
                           column (int32 codes + a BatchArray of the 2,000 names) `name` and
                           as a vlstring column (BatchArray of msgpack strings) `text`
    orders-{zstd,lz4}.b2d  CTable of 10,000,000 rows: id int64 (0, 7, 14, … in random
                           order) with a FULL index, price float64, qty int32, code int64
                           (another such permutation) with a BUCKET index (the default
                           kind); default chunking
    skus-{zstd,lz4}.b2d    CTable of 10,000,000 rows in no order: sku (string, <U10,
                           'S' + 9 digits, distinct) with a FULL index, ref (utf8, the
                           same text) with a FULL index (ranks), at (timestamp ms, distinct
                           seconds) with a BUCKET index, qty int32
    parts-{zstd,lz4}/      the walk again as 200 files part-000.b2nd … part-199.b2nd of
                           50,000 values each (chunks of 10,000): a table of many small
                           files

Usage: python benches/scan_data.py OUT_DIR   (skips files that exist)
"""
import os
import sys
from dataclasses import dataclass

import blosc2
import numpy as np

N = 10_000_000
SIDE = 8192
PARTS = 200
HIVE = 16
CODECS = {"zstd": blosc2.Codec.ZSTD, "lz4": blosc2.Codec.LZ4}


@dataclass
class Order:
    id: int = blosc2.field(blosc2.int64())
    price: float = blosc2.field(blosc2.float64())
    qty: int = blosc2.field(blosc2.int32())
    code: int = blosc2.field(blosc2.int64())


@dataclass
class Sku:
    sku: str = blosc2.field(blosc2.string(max_length=10))
    ref: str = blosc2.field(blosc2.utf8())
    at: int = blosc2.field(blosc2.timestamp(unit="ms"))
    qty: int = blosc2.field(blosc2.int32())


@dataclass
class Name:
    id: int = blosc2.field(blosc2.int64())
    name: str = blosc2.field(blosc2.string(max_length=12))


def names(r, k):
    """`k` distinct names of 3-12 lowercase letters, one in ten with a letter from é ü ø ß ł."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out = set()
    while len(out) < k:
        w = "".join(r.choice(letters, int(r.integers(3, 13))))
        if r.integers(0, 10) == 0:
            i = int(r.integers(0, len(w)))
            w = w[:i] + str(r.choice(list("éüøßł"))) + w[i + 1:]
        out.add(w)
    return np.array(sorted(out), dtype="<U12")


def make_people():
    rn = np.random.default_rng(5)
    people = np.empty(N, dtype=[("id", "<i8"), ("name", "<U12")])
    people["id"] = np.arange(N)
    people["name"] = names(rn, 2000)[rn.integers(0, 2000, N)]
    return people


@dataclass
class Cat:
    id: int = blosc2.field(blosc2.int64())
    name: str = blosc2.field(blosc2.dictionary(nullable=False))
    text: str = blosc2.field(blosc2.vlstring())


@dataclass
class Tick:
    id: int = blosc2.field(blosc2.int64())
    t: int = blosc2.field(blosc2.timestamp(unit="ms"))
    price: float = blosc2.field(blosc2.float64())
    qty: int = blosc2.field(blosc2.int32())


def main(out):
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(3)
    walk = np.cumsum(r.normal(0, 1, N))
    ticks = np.empty(N, dtype=[("id", "<i8"), ("t", "<i8"), ("price", "<f8"), ("qty", "<i4")])
    ticks["id"] = np.arange(N)
    ticks["t"] = np.arange(N) * 1000 + 1_700_000_000_000
    ticks["price"] = 100 + np.cumsum(r.normal(0, 0.01, N))
    ticks["qty"] = r.integers(1, 1000, N)
    y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32) / SIDE
    grid = (np.sin(6 * x) * np.cos(4 * y) + r.normal(0, 0.01, (SIDE, SIDE))).astype(np.float32)
    del x, y
    people = None
    for name, codec in CODECS.items():
        cparams = {"codec": codec}
        p = os.path.join(out, f"walk-{name}.b2nd")
        if not os.path.exists(p):
            blosc2.asarray(walk, urlpath=p, mode="w", chunks=(1_000_000,), cparams=cparams)
        p = os.path.join(out, f"parts-{name}")
        if not os.path.exists(os.path.join(p, f"part-{PARTS - 1:03d}.b2nd")):
            os.makedirs(p, exist_ok=True)
            n = N // PARTS
            for k in range(PARTS):
                f = os.path.join(p, f"part-{k:03d}.b2nd")
                part = walk[k * n:(k + 1) * n]
                blosc2.asarray(part, urlpath=f, mode="w", chunks=(10_000,), cparams=cparams)
        p = os.path.join(out, f"hive-{name}")
        last = os.path.join(p, f"year={2000 + (HIVE - 1) // 8}", f"station=s{(HIVE - 1) % 8}", "part-0.b2nd")
        if not os.path.exists(last):
            # The walk in HIVE members of a directory partitioned by year and station.
            n = N // HIVE
            for k in range(HIVE):
                d = os.path.join(p, f"year={2000 + k // 8}", f"station=s{k % 8}")
                os.makedirs(d, exist_ok=True)
                part = walk[k * n:(k + 1) * n]
                blosc2.asarray(part, urlpath=os.path.join(d, "part-0.b2nd"), mode="w",
                               chunks=(1_000_000,), cparams=cparams)
        p = os.path.join(out, f"ticks-{name}.b2d")
        if not os.path.exists(os.path.join(p, "_meta.b2f")):
            t = blosc2.CTable(Tick, urlpath=p, mode="w", expected_size=N, cparams=cparams)
            t.extend(ticks)
            t.close()
        p = os.path.join(out, f"orders-{name}.b2d")
        if not os.path.exists(os.path.join(p, "_indexes", "code")):
            o = np.random.default_rng(7)
            t = blosc2.CTable(Order, urlpath=p, mode="w", expected_size=N, cparams=cparams)
            t.extend({"id": o.permutation(N).astype("<i8") * 7, "price": o.normal(100, 20, N),
                      "qty": o.integers(1, 1000, N).astype("<i4"),
                      "code": o.permutation(N).astype("<i8") * 7})
            t.create_index("id", kind=blosc2.IndexKind.FULL)
            t.create_index("code")
            t.close()
        p = os.path.join(out, f"skus-{name}.b2d")
        if not os.path.exists(os.path.join(p, "_indexes", "at")):
            o = np.random.default_rng(11)
            skus = np.char.add("S", np.char.zfill((o.permutation(N) * 7).astype("<U9"), 9))
            t = blosc2.CTable(Sku, urlpath=p, mode="w", expected_size=N, cparams=cparams)
            step = 1_000_000
            at = o.permutation(N).astype("<i8") * 1000 + 1_700_000_000_000
            qty = o.integers(1, 1000, N).astype("<i4")
            for a in range(0, N, step):
                t.extend({"sku": skus[a:a + step], "ref": skus[a:a + step].tolist(),
                          "at": at[a:a + step], "qty": qty[a:a + step]})
            t.create_index("sku", kind=blosc2.IndexKind.FULL)
            t.create_index("ref", kind=blosc2.IndexKind.FULL)
            t.create_index("at")
            t.close()
        p = os.path.join(out, f"grid-{name}.b2nd")
        if not os.path.exists(p):
            blosc2.asarray(grid, urlpath=p, mode="w", cparams=cparams)
        p = os.path.join(out, f"tiles-{name}.b2nd")
        if not os.path.exists(p):
            blosc2.asarray(grid, urlpath=p, mode="w", chunks=(1024, 1024), cparams=cparams)
        p = os.path.join(out, f"names-{name}.b2d")
        if not os.path.exists(os.path.join(p, "_meta.b2f")):
            if people is None:
                people = make_people()
            t = blosc2.CTable(Name, urlpath=p, mode="w", expected_size=N, cparams=cparams)
            t.extend(people)
            t.close()
        p = os.path.join(out, f"cats-{name}.b2d")
        if not os.path.exists(os.path.join(p, "_meta.b2f")):
            if people is None:
                people = make_people()
            t = blosc2.CTable(Cat, urlpath=p, mode="w", expected_size=N, cparams=cparams)
            step = 1_000_000
            for a in range(0, N, step):
                names = people["name"][a:a + step].tolist()
                t.extend({"id": people["id"][a:a + step], "name": names, "text": names})
            t.close()


if __name__ == "__main__":
    main(sys.argv[1])
