#!/usr/bin/env python3
"""Plots tempi_halo CSV files (--csv) as median time per exchange against n, one line
per variant and file, on a log scale. Usage:
  tools/plot_halo.py OUT.png LABEL=FILE.csv [LABEL=FILE.csv ...] [--title TEXT] [--variants A,B,...]
Rows of another rank count than the most common one in a file are left out; with
--variants, rows of other variants too. Each variant keeps one colour across files, each
file its own line style."""
import csv
import sys
from collections import Counter, defaultdict


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, title, inputs, keep = argv[1], "", [], None
    rest = argv[2:]
    while rest:
        a = rest.pop(0)
        if a == "--title" and rest:
            title = rest.pop(0)
        elif a == "--variants" and rest:
            keep = rest.pop(0).split(",")
        else:
            label, _, path = a.partition("=")
            inputs.append((label, path))
    fig, ax = plt.subplots(figsize=(8, 5))
    colours, styles = {}, ["-", "--", ":", "-."]
    for index, (label, path) in enumerate(inputs):
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if r["median_us"]]
        ranks = Counter(r["ranks"] for r in rows).most_common(1)[0][0]
        series = defaultdict(dict)
        for r in rows:
            if r["ranks"] == ranks and (keep is None or r["variant"] in keep):
                series[r["variant"]][int(r["n"])] = float(r["median_us"])
        for variant, points in sorted(series.items()):
            ns = sorted(points)
            colour = colours.setdefault(variant, f"C{len(colours) % 10}")
            ax.plot(ns, [points[n] for n in ns], marker="o", color=colour, linestyle=styles[index % len(styles)],
                    label=f"{label}: {variant}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (interior cells per dimension per rank)")
    ax.set_ylabel("median time per exchange (µs)")
    ax.set_title(title or "26-neighbour halo exchange")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
