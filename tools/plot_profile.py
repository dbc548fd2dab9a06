#!/usr/bin/env python3
"""Plots a TEMPI system profile written by tempi-measure (docs/model.md).

    python3 tools/plot_profile.py PROFILE.json [--check MEASURE.txt] [--p2p BENCH_P2P.csv] [--out profile.png]

Panels: the packing kernels' time by object size (one line per block size, for each
direction), the copy engines, the MPI library on host and GPU buffers, and the model's
predicted against the measured one-way times: of tempi-measure's end-to-end check
(--check, its output) and of bench_p2p's grid run with this profile (--p2p, its CSV,
whose model_us column holds the predictions). Needs matplotlib.
"""
import argparse
import json
import sys


def curve(ax, c, label, **kw):
    ax.loglog(c["bytes"], c["seconds"], marker="o", markersize=3, label=label, **kw)


def read_checks(path):
    """Rows (bytes, block, method, predicted us, measured us) of tempi-measure's check table."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 6 and parts[0].isdigit() and parts[2] in ("device", "oneshot", "staged", "auto"):
                rows.append((int(parts[0]), int(parts[1]), parts[2], float(parts[3]), float(parts[4])))
    return rows


def read_p2p(path):
    """Rows (bytes, block, method, predicted us, measured us) of bench_p2p's CSV, forced methods only."""
    import csv

    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if "model_us" not in r:
                sys.exit(f"{path}: no model_us column (bench_p2p before 2026-11-25, or not its CSV)")
            if r["method"] != "auto" and float(r["model_us"]) > 0:
                rows.append((int(r["bytes"]), int(r["block"]), r["method"], float(r["model_us"]),
                             float(r["tempi_us"])))
    if not rows:
        sys.exit(f"{path}: no predictions (model_us is -1 everywhere: bench_p2p ran without a profile?)")
    return rows


def predicted_against_measured(ax, rows, title):
    """One point per forced measurement, the diagonal and the band of 25% around it."""
    rows = [c for c in rows if c[2] != "auto" and c[3] > 0]  # auto has no prediction of its own
    for method in sorted({c[2] for c in rows}):
        pts = [c for c in rows if c[2] == method and c[3] > 0]
        ax.loglog([c[4] for c in pts], [c[3] for c in pts], "o", markersize=4, label=method)
    lo = min(c[4] for c in rows)
    hi = max(c[4] for c in rows)
    ax.loglog([lo, hi], [lo, hi], "k-", lw=0.8, label="exact")
    ax.fill_between([lo, hi], [0.75 * lo, 0.75 * hi], [1.25 * lo, 1.25 * hi], color="gray", alpha=0.2,
                    label="within 25%")
    inside = sum(abs(c[3] / c[4] - 1) <= 0.25 for c in rows)
    ax.set_title(f"{title}: {inside} of {len(rows)} within 25%")
    ax.set_xlabel("measured us")
    ax.set_ylabel("predicted us")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--check", help="tempi-measure's output, for predicted against measured")
    ap.add_argument("--p2p", help="bench_p2p's CSV, run with this profile, for predicted against measured")
    ap.add_argument("--out", default="profile.png")
    args = ap.parse_args()
    with open(args.profile) as f:
        p = json.load(f)
    # 2 adds staged_chunk_s, which is not plotted; 3 the batched curves
    if p.get("tempi_profile") not in (1, 2, 3):
        sys.exit(f"{args.profile}: not a TEMPI profile of version 1 to 3")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_profile.py needs matplotlib (pip install matplotlib)")

    checks = read_checks(args.check) if args.check else []
    p2p = read_p2p(args.p2p) if args.p2p else []
    wide = bool(checks or p2p)
    fig, axes = plt.subplots(2, 4 if wide else 3, figsize=(20 if wide else 15, 8.5))
    for ax, key in zip(axes[0], ["pack_device", "pack_host", "unpack_host"]):
        for row in p[key]["rows"]:
            curve(ax, row, f'{row["block"]} B rows')
        ax.set_title(key)
    ax = axes[1][0]
    for row in p["unpack_device"]["rows"]:
        curve(ax, row, f'{row["block"]} B rows')
    ax.set_title("unpack_device")
    ax = axes[1][1]
    curve(ax, p["copy_to_host"], "copy to host")
    curve(ax, p["copy_to_device"], "copy to device")
    floor = p["launch_s"] + p["sync_s"]
    ax.axhline(floor, color="gray", linestyle=":", label=f"launch + sync {floor * 1e6:.1f} us")
    ax.set_title("copy engines")
    ax = axes[1][2]
    curve(ax, p["mpi_host"], "host buffers")
    if "mpi_host_batched" in p:
        curve(ax, p["mpi_host_batched"], "host buffers, per message of a batch")
    for w in p["mpi_device"]:
        curve(ax, w, f'GPU buffers ({w["peer"]})')
        if "batched" in w:
            curve(ax, w["batched"], f'GPU buffers ({w["peer"]}), per message of a batch')
    ax.set_title("MPI library (one way)")
    if wide:
        panels = [(checks, "tempi-measure's check"), (p2p, "bench_p2p grid")]
        for ax, (rows, title) in zip([axes[0][3], axes[1][3]], panels):
            if rows:
                predicted_against_measured(ax, rows, "the model: " + title)
            else:
                ax.axis("off")
    for ax in axes.flat:
        if ax.get_title().startswith("the model") or not ax.axison:
            continue
        ax.set_xlabel("bytes")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    m = p["machine"]
    fig.suptitle(f'{m["gpu"]}, {m["mpi_library"]}, driver {p.get("driver", "?")}, {p.get("date", "")}')
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
