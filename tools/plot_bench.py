#!/usr/bin/env python3
"""Turns benchmark CSV files (docs/results/) into PNG figures for docs/benchmarks.md.
The kind of each file is read from its header:
  bench_pack      (object,desc,block,...,pack_us,...)  pack and unpack time against the
                  object's size beside cudaMemcpy of the same bytes, one panel per block length
  bench_p2p       (shape,block,bytes,method,...)       ping-pong time per method against
                  message size beside contiguous data, one panel per shape and block length
  pack sequences  (variant,...,syncs_per_cycle,...)    median time per variant, one bar group
                  per file (LABEL=FILE.csv names the group)
Usage:
  tools/plot_bench.py OUT.png [LABEL=]FILE.csv [[LABEL=]FILE.csv ...] [--title TEXT]
All files of one figure must be of one kind. Needs matplotlib (/usr/bin/python3 on Debian:
apt-get install python3-matplotlib)."""
import csv
import math
import sys
from collections import defaultdict


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def kind_of(rows, path):
    header = set(rows[0]) if rows else set()
    if {"object", "pack_us", "memcpy_us"} <= header:
        return "pack"
    if {"shape", "method", "tempi_us", "contig_us"} <= header:
        return "p2p"
    if {"variant", "median_us", "syncs_per_cycle"} <= header:
        return "sequence"
    raise SystemExit(f"{path}: not a CSV of bench_pack, bench_p2p or bench_pack_sequence")


def line(points):
    """One y per x (rows that repeat a baseline measured per method keep the least)."""
    best = {}
    for x, y in points:
        best[x] = min(y, best.get(x, y))
    return zip(*sorted(best.items()))


def grid(plt, panels):
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def plot_pack(plt, inputs):
    """Time against bytes, per block length (the 2d objects, where block lengths vary)."""
    panels = defaultdict(lambda: defaultdict(list))  # block -> line -> [(bytes, us)]
    for label, rows in inputs:
        prefix = f"{label}: " if label else ""
        for r in rows:
            if r["object"] != "2d" or r["count"] != "1":
                continue
            b, key = int(r["bytes"]), int(r["block"])
            panels[key][prefix + "pack " + r["desc"]].append((b, float(r["pack_us"])))
            panels[key][prefix + "unpack " + r["desc"]].append((b, float(r["unpack_us"])))
            panels[key][prefix + "cudaMemcpy (contiguous)"].append((b, float(r["memcpy_us"])))
    fig, axes = grid(plt, sorted(panels))
    for ax, block in zip(axes, sorted(panels)):
        for name, points in sorted(panels[block].items()):
            xs, ys = line(points)
            ax.plot(xs, ys, marker=".", label=name, linestyle="--" if "cudaMemcpy" in name else "-")
        ax.set_title(f"{block}-byte blocks")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("object size (bytes)")
        ax.set_ylabel("time (µs)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    return fig


def plot_p2p(plt, inputs):
    """Ping-pong time against bytes, per (shape, block): each method, contiguous data."""
    panels = defaultdict(lambda: defaultdict(list))  # (shape, block) -> line -> points
    for label, rows in inputs:
        prefix = f"{label}: " if label else ""
        for r in rows:
            key, b = (r["shape"], int(r["block"])), int(r["bytes"])
            panels[key][prefix + "TEMPI " + r["method"]].append((b, float(r["tempi_us"])))
            panels[key][prefix + "contiguous"].append((b, float(r["contig_us"])))
            if float(r["mpi_us"]) > 0:
                panels[key][prefix + "MPI library alone"].append((b, float(r["mpi_us"])))
    keys = sorted(panels)
    fig, axes = grid(plt, keys)
    for ax, (shape, block) in zip(axes, keys):
        for name, points in sorted(panels[(shape, block)].items()):
            xs, ys = line(points)
            ax.plot(xs, ys, marker=".", label=name, linestyle="-" if "TEMPI" in name else "--")
        ax.set_title(f"{shape}, {block}-byte blocks")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message (bytes)")
        ax.set_ylabel("one-way time (µs)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    return fig


def plot_sequence(plt, inputs):
    """Median time per variant: one group of bars per file."""
    variants = []
    for _, rows in inputs:
        for r in rows:
            if r["variant"] not in variants:
                variants.append(r["variant"])
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(inputs)), 4))
    width = 0.8 / len(variants)
    for k, v in enumerate(variants):
        xs, ys = [], []
        for i, (_, rows) in enumerate(inputs):
            medians = [float(r["median_us"]) for r in rows if r["variant"] == v]
            if medians:
                xs.append(i + k * width)
                ys.append(medians[0])
        ax.bar(xs, ys, width, label=v)
    ax.set_xticks([i + width * (len(variants) - 1) / 2 for i in range(len(inputs))])
    ax.set_xticklabels([label for label, _ in inputs], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("median time per cycle (µs)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, title, inputs, rest = argv[1], "", [], argv[2:]
    while rest:
        a = rest.pop(0)
        if a == "--title" and rest:
            title = rest.pop(0)
            continue
        label, _, path = a.rpartition("=")
        inputs.append((label, read(path), path))
    kinds = {kind_of(rows, path) for _, rows, path in inputs}
    if len(kinds) != 1:
        raise SystemExit("all files of one figure must be of one kind, not " + ", ".join(sorted(kinds)))
    plot = {"pack": plot_pack, "p2p": plot_p2p, "sequence": plot_sequence}[kinds.pop()]
    fig = plot(plt, [(label, rows) for label, rows, _ in inputs])
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
