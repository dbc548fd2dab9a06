#!/usr/bin/env python3
"""Halo exchange from Python through mpi4py, the way a Python user meets TEMPI
(docs/using.md, "Python").

One float64 array per rank, a cube of N^3 interior cells and a ghost layer one cell
wide, on a periodic 3-D process grid; each rank exchanges with its 26 neighbours (faces,
edges, corners), every region described by an MPI subarray type. Three routes move the
same bytes:
  isend-irecv         26 MPI_Irecv and 26 MPI_Isend of the typed regions, one Waitall
  neighbor-alltoallw  one MPI_Neighbor_alltoallw on a graph of the 26 neighbours
  host-copy           the whole array copied to host memory, exchanged there with
                      Isend/Irecv, copied back: what an application does when its MPI
                      library cannot read GPU memory and TEMPI is not there
Arrays come from CuPy where it imports and sees a GPU (each rank its own GPU where there
are several), else from NumPy, else from Python's array module (host memory: TEMPI
passes such calls to the MPI library untouched). Every cell is checked after the first
exchange of each route and again after its timed ones: each cell holds a function of
its global coordinates, ghosts included (periodic wrap). Times are the median, minimum
and maximum over the timed exchanges (each the slowest rank's) after the warm-up ones.
Exit status 0 when every cell of every route is right, 1 otherwise, 2 for a usage error.

Run with TEMPI preloaded (the launcher's way of setting a variable on the ranks):
  mpiexec -n 8 env LD_PRELOAD=/path/to/libtempi_preload.so python3 halo.py --n 64
It prints whether TEMPI is interposed in the process, and over which MPI library.
"""
import argparse
import ctypes
import os
import statistics
import sys

# 26 directions (dz, dy, dx), the same order on every rank: the i-th send to a neighbour
# matches that neighbour's i-th receive from this rank (tag i; the neighbour graph's order).
DIRECTIONS = [(dz, dy, dx) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
              if (dz, dy, dx) != (0, 0, 0)]
ROUTES = ["isend-irecv", "neighbor-alltoallw", "host-copy"]


def parse(argv):
    p = argparse.ArgumentParser(prog="halo.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--n", type=int, default=32, help="interior cells per dimension per rank (default 32)")
    p.add_argument("--dims", default="0,0,0",
                   help="process grid Z,Y,X (the order tempi_halo takes); 0 entries are chosen by MPI_Dims_create")
    p.add_argument("--iters", type=int, default=20, help="timed exchanges per route (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed exchanges before them (default 3)")
    p.add_argument("--arrays", choices=["auto", "cupy", "numpy", "array"], default="auto",
                   help="where the arrays come from (default auto: CuPy with a GPU, else NumPy, else array)")
    p.add_argument("--routes", default=",".join(ROUTES), help="comma-separated, of " + ", ".join(ROUTES))
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    a = p.parse_args(argv)
    try:
        a.dims = [int(v) for v in a.dims.split(",")]
    except ValueError:
        a.dims = []
    if len(a.dims) != 3 or min(a.dims) < 0:
        p.error("--dims needs three integers >= 0")
    a.routes = a.routes.split(",")
    if any(r not in ROUTES for r in a.routes):
        p.error("--routes takes " + ", ".join(ROUTES))
    if a.n < 1 or a.iters < 1 or a.warmup < 0:
        p.error("--n and --iters need at least 1, --warmup at least 0")
    return a


def local_rank():
    """The rank's index on its node, as the launcher says (tools/gpu_select.hpp reads the same)."""
    for name in ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


class Arrays:
    """One flat float64 array per rank and the few operations the routes need, for CuPy,
    NumPy or the array module. The GPU is chosen before MPI starts (mpi4py starts it at
    import), so that TEMPI starts on the rank's own GPU."""

    def __init__(self, kind):
        self.np = self.cp = None
        if kind in ("auto", "cupy"):
            try:
                import cupy
                count = cupy.cuda.runtime.getDeviceCount()
            except Exception:  # not installed, no driver, no GPU: all mean host arrays
                count = 0
            if count > 0:
                self.cp = cupy
                cupy.cuda.Device(local_rank() % count).use()
            elif kind == "cupy":
                sys.exit("halo.py: --arrays cupy, but CuPy does not import or sees no GPU")
        if kind in ("auto", "cupy", "numpy"):
            try:
                import numpy
                self.np = numpy
            except ImportError:
                if kind != "auto":
                    sys.exit("halo.py: --arrays %s needs NumPy" % kind)
        self.kind = "cupy" if self.cp else ("numpy" if self.np else "array")

    def describe(self):
        if self.cp:
            props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
            return "CuPy %s, GPU memory (%s)" % (self.cp.__version__, props["name"].decode())
        if self.np:
            return "NumPy %s, host memory" % self.np.__version__
        return "Python's array module, host memory"

    def from_values(self, values):
        """An array of these values (a host list or NumPy array), on the GPU for CuPy."""
        if self.cp:
            return self.cp.asarray(values)
        if self.np:
            return self.np.array(values, dtype=self.np.float64)
        import array
        return array.array("d", values)

    def to_host(self, a):
        if self.cp:
            return self.cp.asnumpy(a)
        return a.copy() if self.np else a.__copy__()

    def copy_into(self, a, host):
        if self.cp:
            a.set(host)
        else:
            a[:] = host

    def synchronize(self):
        if self.cp:
            self.cp.cuda.get_current_stream().synchronize()

    def wrong_cells(self, a, expected):
        host = self.to_host(a)
        if self.np:
            return int((host != expected).sum())
        return sum(1 for x, y in zip(host, expected) if x != y)


class Halo:
    """The grid, the neighbours and the subarray types of one rank."""

    def __init__(self, MPI, args):
        self.MPI, self.n, self.full = MPI, args.n, args.n + 2
        world = MPI.COMM_WORLD
        dims = MPI.Compute_dims(world.Get_size(), args.dims)
        self.cart = world.Create_cart(dims, periods=[True] * 3, reorder=False)
        self.dims, self.coords = dims, self.cart.Get_coords(self.cart.Get_rank())
        rank_at = lambda d: self.cart.Get_cart_rank([self.coords[k] + d[k] for k in range(3)])  # wraps: periodic
        self.destinations = [rank_at(d) for d in DIRECTIONS]
        self.sources = [rank_at([-v for v in d]) for d in DIRECTIONS]
        self.graph = self.cart.Create_dist_graph_adjacent(self.sources, self.destinations, reorder=False)
        # Sent in direction d: the interior layer next to d. Received from the neighbour at -d:
        # the ghost layer on the -d side, where that neighbour's layer belongs.
        send_at = {-1: (1, 1), 0: (1, self.n), 1: (self.n, 1)}
        recv_at = {-1: (self.n + 1, 1), 0: (1, self.n), 1: (0, 1)}
        self.send_types = [self.subarray([send_at[v] for v in d]) for d in DIRECTIONS]
        self.recv_types = [self.subarray([recv_at[v] for v in d]) for d in DIRECTIONS]

    def subarray(self, start_size):
        t = self.MPI.DOUBLE.Create_subarray([self.full] * 3, [s for _, s in start_size], [b for b, _ in start_size])
        t.Commit()
        return t

    def values(self, np, ghosts):
        """Every cell's value, ghosts as a function of their global coordinates (the answer)
        or -1 (before an exchange)."""
        n, f = self.n, self.full
        G = [self.dims[k] * n for k in range(3)]
        if np is not None:
            i = np.indices((f, f, f))
            g = [(self.coords[k] * n + i[k] - 1) % G[k] for k in range(3)]
            v = ((g[0] * G[1] + g[1]) * G[2] + g[2]).astype(np.float64).ravel()
            if ghosts is None:
                inner = ((i[0] >= 1) & (i[0] <= n) & (i[1] >= 1) & (i[1] <= n) & (i[2] >= 1) & (i[2] <= n)).ravel()
                v[~inner] = -1.0
            return v
        out = []
        for z in range(f):
            for y in range(f):
                for x in range(f):
                    loc = (z, y, x)
                    if ghosts is None and any(c < 1 or c > n for c in loc):
                        out.append(-1.0)
                        continue
                    g = [(self.coords[k] * n + loc[k] - 1) % G[k] for k in range(3)]
                    out.append(float((g[0] * G[1] + g[1]) * G[2] + g[2]))
        return out

    def exchange_isend(self, a):
        reqs = [self.cart.Irecv([a, 1, t], source=s, tag=i)
                for i, (s, t) in enumerate(zip(self.sources, self.recv_types))]
        reqs += [self.cart.Isend([a, 1, t], dest=d, tag=i)
                 for i, (d, t) in enumerate(zip(self.destinations, self.send_types))]
        self.MPI.Request.Waitall(reqs)

    def exchange_neighbor(self, a):
        ones, zeros = [1] * len(DIRECTIONS), [0] * len(DIRECTIONS)
        self.graph.Neighbor_alltoallw([a, (ones, zeros), self.send_types], [a, (ones, zeros), self.recv_types])


def run_route(halo, arrays, route, args, initial, expected):
    """One route: checked once, warmed up, timed, checked again. Returns (times, wrong)."""
    MPI = halo.MPI
    a = arrays.from_values(initial)

    def once():
        if route == "isend-irecv":
            halo.exchange_isend(a)
        elif route == "neighbor-alltoallw":
            halo.exchange_neighbor(a)
        else:
            host = arrays.to_host(a)
            halo.exchange_isend(host)
            arrays.copy_into(a, host)
        arrays.synchronize()

    once()
    wrong = arrays.wrong_cells(a, expected)
    for _ in range(args.warmup):
        once()
    times = []
    for _ in range(args.iters):
        halo.cart.Barrier()
        t0 = MPI.Wtime()
        once()
        times.append(halo.cart.allreduce(MPI.Wtime() - t0, op=MPI.MAX))
    wrong += arrays.wrong_cells(a, expected)
    return times, halo.cart.allreduce(wrong, op=MPI.SUM)


def library(MPI):
    """The MPI library's name and version: the first part of its version string, as TEMPI
    names it ("Open MPI v4.1.4", "MPICH Version: 4.0.2")."""
    return MPI.Get_library_version().split("\0")[0].splitlines()[0].split(",")[0].strip()


def tempi_status(MPI):
    """What TEMPI says of this process (tempi_link_report, every TEMPI artifact defines it),
    or that it is not here; the MPI library either way."""
    report = getattr(ctypes.CDLL(None), "tempi_link_report", None)
    if report is None:
        return "not in this process (MPI: %s)" % library(MPI)
    report.restype = ctypes.c_char_p
    return report().decode()


def main(argv):
    args = parse(argv)
    arrays = Arrays(args.arrays)  # before mpi4py starts MPI: the GPU is chosen first
    from mpi4py import MPI
    halo = Halo(MPI, args)
    root = MPI.COMM_WORLD.Get_rank() == 0
    np = arrays.np
    initial, expected = halo.values(np, None), halo.values(np, True)
    status = tempi_status(MPI)
    if root:
        print("halo.py: 26-neighbour halo exchange of one float64 array per rank, subarray types, periodic grid")
        print("  MPI library  %s" % library(MPI))
        print("  TEMPI        %s" % status)
        print("  arrays       %s" % arrays.describe())
        print("  ranks        %d, process grid %d x %d x %d (z, y, x)" % ((MPI.COMM_WORLD.Get_size(),) + tuple(halo.dims)))
        print("  per rank     interior %d^3, ghost layer 1; median of %d exchanges after %d warm-up"
              % (args.n, args.iters, args.warmup))
        print("%-20s %12s %12s %12s %8s" % ("route", "median_us", "min_us", "max_us", "wrong"))
    rows = []
    for route in args.routes:
        times, wrong = run_route(halo, arrays, route, args, initial, expected)
        row = (route, statistics.median(times) * 1e6, min(times) * 1e6, max(times) * 1e6, wrong)
        rows.append(row)
        if root:
            print("%-20s %12.1f %12.1f %12.1f %8d" % row)
    if root and args.csv:
        with open(args.csv, "w") as f:
            f.write("route,arrays,ranks,n,median_us,min_us,max_us,wrong\n")
            for r in rows:
                f.write("%s,%s,%d,%d,%.3f,%.3f,%.3f,%d\n" % (r[0], arrays.kind, MPI.COMM_WORLD.Get_size(), args.n,
                                                            r[1], r[2], r[3], r[4]))
    bad = sum(r[4] for r in rows)
    if root:
        print("every cell right" if bad == 0 else "FAIL: %d wrong cells" % bad)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
