"""Plot of the open-launch runs (TEMPI_DEFER_PACK modes 1-3 against the tree before them):
bench_pack_sequence's cycle time over its fused hand kernel's, n = 128, 3 variables, MPICH,
one H100, 2026-11-24, each run a dot and each group's median a bar, from the CSVs in
docs/results/open-launch-h100-2026-11-24/. Writes
docs/sequence-open-h100-2026-11-24.png, which docs/benchmarks.md shows. Needs matplotlib;
run from the repository root: python3 tools/gpu/plot_open_launch.py
"""
import csv, os, statistics
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
d = 'docs/results/open-launch-h100-2026-11-24'
def ratios(name):
    rows = list(csv.DictReader(open(os.path.join(d, name))))
    md = [r for r in rows if r['variant'] == 'mpi-datatypes']; fk = [r for r in rows if r['variant'] == 'fused-kernel']
    return [float(a['median_us']) / float(b['median_us']) for a, b in zip(md, fk)]
groups = [
    ('2 ranks, 1 GPU, MPS\nbefore, mode 2', ratios('mps-old-mode2.csv') + ratios('earlier-mps-old-mode2.csv') + ratios('idle10-mps-old-mode2.csv')),
    ('2 ranks, 1 GPU, MPS\nmode 1', ratios('mps-new-mode1.csv')),
    ('2 ranks, 1 GPU, MPS\nmode 2', ratios('mps-new-mode2.csv')),
    ('2 ranks, 1 GPU, MPS\nmode 3, 20 us idle', ratios('mps-new-mode3.csv') + ratios('earlier-mps-new-mode3.csv')),
    ('2 ranks, 1 GPU, MPS\nmode 3, 10 us idle', ratios('idle10-mps-new-mode3.csv')),
    ('1 rank\nbefore, mode 2', ratios('one-old-mode2.csv')),
    ('1 rank\nmode 3', ratios('one-new-mode3.csv') + ratios('idle10-one-new-mode3.csv')),
]
fig, ax = plt.subplots(figsize=(10, 4.2))
for i, (label, rs) in enumerate(groups):
    ax.scatter([i] * len(rs), rs, color='C0' if 'mode 3' in label else 'C7', zorder=3)
    ax.plot([i - 0.25, i + 0.25], [statistics.median(rs)] * 2, color="k")
ax.axhline(1.5, color='C3', ls='--', label='target, 2 ranks under MPS (1.5x)')
ax.set_xticks(range(len(groups)))
ax.set_xticklabels([g[0] for g in groups], fontsize=7)
ax.set_ylabel('cycle time / fused hand kernel')
ax.set_ylim(0, 3)
ax.set_title('bench_pack_sequence, n=128, 3 variables, MPICH, one H100, 2026-11-24 (dots: runs; bar: median)', fontsize=8)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig('docs/sequence-open-h100-2026-11-24.png', dpi=110)
