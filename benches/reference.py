#!/usr/bin/env python3
"""Bench data and the C-Blosc2 reference for benches/decode.rs.

Writes OUTDIR/<case>.chunk (4 MiB of realistic data compressed by python-blosc2 4.14.1 /
C-Blosc2 3.3.5) and OUTDIR/reference.json with each chunk's sizes and C-Blosc2's
decompression throughput (GB/s of decompressed bytes, median of repeated runs) with 1
thread and with all threads.

With --serve it skips that timing, prints "ready" once the files are written, and then
times C-Blosc2 on request, so the bench can interleave C and Rust
runs of the same chunk (this machine's speed drifts over minutes): each stdin line
"CASE NTHREADS REPS" is answered with one line, the fastest of REPS decompressions into a
reused buffer, in seconds (as the Rust side decodes into a reused buffer). A line
"CASE NTHREADS REPS cold" times each run right after touching every cache line of 384 MiB
elsewhere (B2_EVICT_MIB changes it), with no warm-up run: the chunk and the output buffer
then come from memory (96 MiB, three times the L3 this VM reports, was not enough).

Usage: reference.py OUTDIR [--serve]
"""
import json
import os
import sys
import time

# numpy backs arrays of 4 MiB or more with transparent huge pages (madvise), which the Rust
# side's buffers, like the Arrow buffers a scan decodes into, do not get. Both sides use
# 4 KiB pages unless this is set to 1, so that page walks (many, with caches cold) cost
# both alike.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

import numpy as np  # noqa: E402 (after the setting above, which numpy reads on import)
import blosc2

C = blosc2.Codec
F = blosc2.Filter


def datasets():
    rng = np.random.default_rng(1)
    n = 512 * 1024
    return {
        "smooth-f8": (np.cumsum(rng.normal(0, 1, n)).astype("<f8").tobytes(), 8),
        "counter-i8": ((np.arange(n, dtype="<i8") * 3 + 10**9).tobytes(), 8),
        "noise-f4": (rng.normal(0, 1, 2 * n).astype("<f4").tobytes(), 4),
        # Fixed-width strings (numpy "<U3", typesize 12): codes drawn from 2000 words.
        "words-u3": (np.array(words(rng, 2000))[rng.integers(0, 2000, 8 * n // 12)].astype("<U3").tobytes(), 12),
        # Longer ones ("<U8", typesize 32: its byte planes lie 4 KiB apart in a block).
        "words-u8": (np.array(words(rng, 2000, 3, 8))[rng.integers(0, 2000, 8 * n // 32)].astype("<U8").tobytes(), 32),
    }


def array_case(out, ref, case, values, codec, meta, **geometry):
    """A case decoded through a b2nd array's super-chunk (plugin codecs): `values` written
    with `codec` and `meta` in one chunk of `geometry`, the array and its chunk 0 saved
    for both sides, and the array's block shape recorded for ours (which ZFP needs)."""
    arr = blosc2.asarray(values, urlpath=os.path.join(out, case + ".b2nd"), mode="w", **geometry,
                         cparams=dict(codec=codec, codec_meta=meta, clevel=5, filters=[F.NOFILTER]))
    chunk = arr.schunk.get_chunk(0)
    with open(os.path.join(out, case + ".chunk"), "wb") as f:
        f.write(chunk)
    ref["cases"][case] = {"nbytes": values.nbytes, "cbytes": len(chunk), "blockshape": list(arr.blocks)}


def label_image(side=2048, regions=48):
    """A segmentation mask: each pixel the label (1 to `regions`) of its nearest of
    `regions` random centres, with a band of noise labels (a sixteenth of the rows)."""
    rng = np.random.default_rng(7)
    centres = rng.integers(0, side, (regions, 2))
    y, x = np.mgrid[0:side, 0:side]
    best = np.full((side, side), np.iinfo(np.int64).max)
    labels = np.zeros((side, side), dtype=np.uint8)
    for k, (cy, cx) in enumerate(centres):
        d = (y - cy) ** 2 + (x - cx) ** 2
        closer = d < best
        best[closer] = d[closer]
        labels[closer] = k + 1
    labels[side // 2: side // 2 + side // 16] = rng.integers(1, regions + 1, (side // 16, side))
    return labels


def words(rng, k, shortest=1, longest=3):
    """`k` random lowercase words of `shortest` to `longest` letters."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(shortest, longest + 1)))) for _ in range(k)]


def median_gbps(chunk, nbytes, nthreads, reps=15):
    blosc2.set_nthreads(nthreads)
    blosc2.decompress(chunk)
    best = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(4):
            blosc2.decompress(chunk)
        best.append((time.perf_counter() - t) / 4)
    best.sort()
    return nbytes / best[len(best) // 2] / 1e9


def page_aligned(n):
    """n zeroed bytes starting at a page boundary. Chunks stored raw decode by memcpy, whose
    speed on this AMD machine depends on the source and destination's relative alignment
    (up to 10x); the Rust side's buffers are both at the same offset in their pages."""
    b = np.zeros(n + 4096, dtype="u1")
    o = (-b.ctypes.data) % 4096
    return b[o:o + n]


# Bytes touched before each cold run (B2_EVICT_MIB, as for the Rust side): with 96 MiB,
# three times the L3 this VM reports, stored-raw chunks still read 0.5-1.3x C cold.
EVICT_BYTES = int(os.environ.get("B2_EVICT_MIB", "384")) << 20


def serve(out):
    chunks = {}
    evict = None
    for line in sys.stdin:
        case, nthreads, reps, *mode = line.split()
        cold = mode == ["cold"]
        if case not in chunks:
            with open(os.path.join(out, case + ".chunk"), "rb") as f:
                raw = f.read()
            chunk = page_aligned(len(raw))
            chunk[:] = np.frombuffer(raw, dtype="u1")
            chunks[case] = (chunk, page_aligned(blosc2.get_cbuffer_sizes(raw)[0]))
            array = os.path.join(out, case + ".b2nd")
            if os.path.exists(array):
                # A ZFP chunk: decoded by its array's super-chunk (which holds the block shape).
                # (The array stays referenced: its super-chunk alone crashes C once the
                # array is collected.)
                chunks[case] = (blosc2.open(array), chunks[case][1])
        chunk, dst = chunks[case]
        blosc2.set_nthreads(int(nthreads))
        if isinstance(chunk, blosc2.NDArray):
            chunk.schunk.dparams = blosc2.DParams(nthreads=int(nthreads))
            decode = lambda: chunk.schunk.decompress_chunk(0, dst)  # noqa: E731
        else:
            decode = lambda: blosc2.decompress(chunk, dst=dst)  # noqa: E731
        if cold:
            # Each run after a byte of every cache line of EVICT_BYTES elsewhere is read and
            # written (not a fill: memset writes that much with non-temporal stores, which
            # leave the caches as they were): the chunk and the output then come from
            # memory, as the bench's cold column times the Rust side. No warm-up run.
            if evict is None:
                evict = np.zeros(EVICT_BYTES, dtype="u1")
        else:
            decode()
        times = []
        for _ in range(int(reps)):
            if cold:
                evict[::64] += 1
            t = time.perf_counter()
            decode()
            times.append(time.perf_counter() - t)
        print(min(times), flush=True)


def main():
    out = sys.argv[1]
    serving = "--serve" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    ref = {"cpu_threads": os.cpu_count(), "blosc2": blosc2.__version__, "c_blosc2": blosc2.blosclib_version, "cases": {}}
    # (codec, use_dict): "zstddict" is Zstd with a chunk dictionary.
    codecs = {
        "blosclz": (C.BLOSCLZ, False),
        "lz4": (C.LZ4, False),
        "lz4hc": (C.LZ4HC, False),
        "zlib": (C.ZLIB, False),
        "zstd": (C.ZSTD, False),
        "zstddict": (C.ZSTD, True),
    }
    filters = {"shuffle": [F.SHUFFLE], "bitshuffle": [F.BITSHUFFLE], "nofilter": [F.NOFILTER]}
    # DELTA (XOR against block 0) then SHUFFLE, on the data it is made for: counters.
    extra = {"counter-i8": {"delta-shuffle": [F.DELTA, F.SHUFFLE]}}
    # Small blocks (a user's `blocksize`, or b2nd arrays with small blocks): 4 and 16 KiB
    # instead of the 512 KiB python-blosc2 picks here, shuffled, under LZ4 and BloscLZ.
    small = {f"shuffle-b{k}k": k * 1024 for k in (4, 16)}
    for dname, (data, ts) in datasets().items():
        for cname, (codec, use_dict) in codecs.items():
            blocks = {fname: (flt, 0) for fname, flt in {**filters, **extra.get(dname, {})}.items()}
            if ts == 8 and cname in ("lz4", "blosclz"):
                blocks.update({fname: ([F.SHUFFLE], bs) for fname, bs in small.items()})
            # BYTEDELTA after SHUFFLE (python-blosc2's suggestion for floats) on the
            # numeric sets, under the codecs that split blocks into planes (BloscLZ, Zstd)
            # and one that does not (LZ4).
            if dname in ("smooth-f8", "counter-i8", "noise-f4") and cname in ("blosclz", "lz4", "zstd"):
                blocks["shuffle-bytedelta"] = ([F.SHUFFLE, F.BYTEDELTA], 0)
            for fname, (flt, blocksize) in blocks.items():
                case = f"{dname}-{cname}-{fname}"
                chunk = blosc2.compress2(
                    data, codec=codec, clevel=5, typesize=ts, filters=flt, use_dict=use_dict,
                    blocksize=blocksize,
                )
                with open(os.path.join(out, case + ".chunk"), "wb") as f:
                    f.write(chunk)
                ref["cases"][case] = {"nbytes": len(data), "cbytes": len(chunk)}
                if not serving:
                    ref["cases"][case]["c_1t_gbps"] = round(median_gbps(chunk, len(data), 1), 3)
                    ref["cases"][case]["c_all_gbps"] = round(median_gbps(chunk, len(data), os.cpu_count()), 3)
    # ZFP (lossy; b2nd arrays only, its streams being fields of the array's block shape):
    # the numeric sets as 2-D arrays of one chunk, in python-blosc2's default blocks. C
    # decodes the chunk through the array's super-chunk, which holds that shape.
    zfp = {"zfp_acc": (C.ZFP_ACC, -3 % 256), "zfp_prec": (C.ZFP_PREC, 16), "zfp_rate": (C.ZFP_RATE, 25)}
    for dname, (data, ts) in datasets().items():
        if dname not in ("smooth-f8", "noise-f4"):
            continue
        values = np.frombuffer(data, dtype=f"<f{ts}").reshape(512, -1)
        for cname, (codec, meta) in zfp.items():
            case = f"{dname}-{cname}"
            array_case(out, ref, case, values, codec, meta, chunks=values.shape)
        # 4-D cells (256 coefficients each): the same values as a 4-D array in blocks of
        # 4 x 4 x 16 x 32, accuracy mode.
        array_case(out, ref, f"{dname}-4d-zfp_acc", values.reshape(8, 8, 64, -1), C.ZFP_ACC,
                   zfp["zfp_acc"][1], chunks=(8, 8, 64, values.size // 4096), blocks=(4, 4, 16, 32))
    # NDLZ (b2nd arrays of 2-D 1-byte items, cells of 4 or 8): a label image (the masks it
    # suits), 2048 x 2048 bytes in one chunk, in python-blosc2's default blocks.
    labels = label_image()
    for side in (4, 8):
        array_case(out, ref, f"labels-u1-ndlz{side}", labels, C.NDLZ, side, chunks=labels.shape)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    if serving:
        print("ready", flush=True)
        serve(out)


if __name__ == "__main__":
    main()
