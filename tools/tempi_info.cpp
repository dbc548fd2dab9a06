// tempi-info: what this TEMPI is and what it finds, like ompi_info or ucx_info
// (docs/using.md, "tempi-info"); with --check PROGRAM, whether a program holds TEMPI's
// wrappers whole, in part or not at all, and in which order relative to other PMPI tools,
// without running it (the same verdict as TEMPI's start-up check, pmpi/api/link_check.hpp);
// with --python, the one-line check of a running mpi4py process.
#include <elf.h>
#include <mpi.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "backend.hpp"
#include "config.hpp"
#include "base/gpu_sharing.hpp"
#include "profile.hpp"
#include "base/runtime.hpp"
#include "tempi_mpix.h"

namespace {

// Exit statuses of --check (docs/using.md, "tempi-info"); 2 is a usage error, as in every tool.
enum Status { kWhole = 0, kAbsent = 1, kUsageError = 2, kUnreadable = 3, kPartial = 4 };

const char kUsage[] =
    "usage: tempi-info [--check PROGRAM | --python | --version]\n"
    "\n"
    "Without arguments (run it as a program, or under mpiexec -n 1): TEMPI's version, how it\n"
    "was built (CUDA, GPU architectures, MPI), what it detects at run time (GPUs, whether the\n"
    "MPI library is CUDA-aware and how that was decided), every TEMPI_* environment variable\n"
    "with its value and where the value came from, and the performance profile in use.\n"
    "\n"
    "--check PROGRAM: whether PROGRAM (found as the shell finds it: through PATH where the\n"
    "name has no '/'), with the libraries it loads (LD_PRELOAD included, as set now), has\n"
    "every call TEMPI wraps reaching TEMPI, without running it. Exit status: 0 linked whole\n"
    "(TEMPI comes first for every call it wraps); 1 TEMPI is absent; 3 PROGRAM cannot be\n"
    "found or read; 4 linked in part or bypassed: some calls reach other code first, or\n"
    "TEMPI skips a PMPI tool, or Fortran calls miss TEMPI's --wrap archive.\n"
    "--python: a one-line Python check of whether TEMPI is interposed in a running mpi4py\n"
    "process (the preload took) and over which MPI library.\n"
    "--version: TEMPI's version and the MPI it was built against.\n"
    "\n"
    "  -h, --help  this text\n"
    "Any other argument: a message and exit status 2.\n";

// ---- the report without arguments ------------------------------------------------------

void print_build() {
  std::printf("TEMPI %s\n", TEMPI_VERSION);
  std::printf("build:\n");
  std::printf("  CUDA backend:        %s\n", TEMPI_BUILD_CUDA);
  std::printf("  GPU architectures:   %s\n", TEMPI_BUILD_GPU_ARCH);
  std::printf("  MPI (built against): %s\n", TEMPI_BUILD_MPI);
  std::printf("  MPIX_ stream calls:  %s\n",
              TEMPI_MPIX_FROM_LIBRARY ? "the MPI library's own (tempi_mpix.h leaves them to it; TEMPIX_ names are TEMPI's)"
                                      : "TEMPI's (tempi_mpix.h maps them to the TEMPIX_ calls)");
}

// Which visible GPU can read which (CUDA peer access): the pairs zero-copy collectives can
// use between ranks of one node (docs/using.md, "Zero-copy collectives").
void print_peer_access(tempi::Backend &b) {
  const int n = b.device_count();
  if (n < 2) return;
  std::vector<std::string> ids;
  for (int d = 0; d < n; ++d) {
    const tempi::OnDevice on(d);
    ids.push_back(b.device_id());
  }
  std::string pairs;
  for (int d = 0; d < n; ++d) {
    const tempi::OnDevice on(d);
    for (int e = 0; e < n; ++e)
      if (e != d && b.ipc_peer_access(ids[size_t(e)]))
        pairs += (pairs.empty() ? "" : ", ") + std::to_string(d) + " reads " + std::to_string(e);
  }
  std::printf("  GPU peer access:     %s\n",
              pairs.empty() ? "none (zero-copy cannot be used between GPUs)" : pairs.c_str());
}

// Per GPU: MPS, and the other processes of this user running TEMPI on it now (TEMPI's
// registry, pmpi/base/gpu_sharing.hpp). Sharing without MPS makes every synchronization wait
// for a time slice (docs/using.md, "Ranks that share a GPU").
void print_sharing(tempi::Backend &b) {
  for (int d = 0; d < b.device_count(); ++d) {
    std::string id;
    bool mps = false;
    {
      const tempi::OnDevice on(d);
      id = b.device_id();
      mps = b.mps_enabled();
    }
    const int others = tempi::other_processes_on(id);
    const std::string label = "GPU " + std::to_string(d) + " sharing:";
    std::printf("  %-20s %s, MPS %s, %d other process%s of this user on it%s\n", label.c_str(), id.c_str(),
                mps ? "on" : "off", others, others == 1 ? "" : "es",
                others > 0 && !mps ? " (start MPS: nvidia-cuda-mps-control -d; every synchronization now waits for "
                                     "a time slice)"
                                   : "");
  }
}

// The CPUs this process may run on: open launches (TEMPI_DEFER_PACK=3) need two, since
// the thread that closes them must run beside the application's (docs/using.md).
void print_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int n = CPU_COUNT(&set);
  std::printf("  CPUs:                %d this process may run on%s\n", n,
              n < 2 ? " (bound to one: TEMPI_DEFER_PACK=3 runs as 2; bind each rank to two or more)" : "");
}

void print_runtime() {
  tempi::Backend &b = tempi::gpu_backend();
  std::printf("run time:\n");
  std::printf("  MPI library:         %s\n", tempi::mpi_library_name().c_str());
  print_cpus();
  if (b.has_gpu()) {
    std::printf("  GPUs:                %d (this process: %s)\n", b.device_count(), b.device_name().c_str());
    print_peer_access(b);
    print_sharing(b);
  } else
    std::printf("  GPUs:                none (TEMPI forwards every call unchanged)\n");
  if (!tempi::active()) {
    std::printf("  TEMPI:               not active (TEMPI_DISABLE is set)\n");
    return;
  }
  std::printf("  CUDA-aware MPI:      %s (%s)\n", tempi::mpi_is_cuda_aware() ? "yes" : "no",
              tempi::cuda_aware_source());
  std::printf("  profile:             %s\n", tempi::profile_summary().c_str());
}

// Whether TEMPI takes `value` for knob `name`: parse_config warns on stderr about a value
// it ignores, so a parse of that one knob with stderr sent to a file says. tempi-info must
// not list an ignored value as in force.
bool knob_accepted(const char *name, const char *value) {
  std::fflush(stderr);
  FILE *sink = std::tmpfile();
  const int saved = dup(2);
  if (!sink || saved < 0 || dup2(fileno(sink), 2) < 0) {
    if (sink) std::fclose(sink);
    if (saved >= 0) close(saved);
    return true;
  }
  tempi::parse_config([&](const char *n) { return std::strcmp(n, name) ? nullptr : value; });
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  struct stat st {};
  const bool quiet = fstat(fileno(sink), &st) == 0 && st.st_size == 0;
  std::fclose(sink);
  return quiet;
}

void print_environment() {
  std::printf("environment (docs/environment.md):\n");
  for (const tempi::Knob &k : tempi::knobs()) {
    const char *v = std::getenv(k.name);
    if (v && !knob_accepted(k.name, v))
      std::printf("  %-26s %-12s (default: %s=%s is invalid and ignored)\n", k.name, k.default_value, k.name, v);
    else
      std::printf("  %-26s %-12s %s\n", k.name, v ? v : k.default_value, v ? "(from the environment)" : "(default)");
  }
}

// ---- --check PROGRAM --------------------------------------------------------------------

// The symbols an ELF file defines (its static and dynamic symbol tables) that matter here,
// and its program interpreter.
struct ElfFile {
  std::string error;  // empty: read
  std::set<std::string> defined;
  std::string interp;
  bool tempi_code = false;  // any of TEMPI's own symbols (namespace tempi)
};

bool interesting(const char *name) {
  return !std::strncmp(name, "MPI_", 4) || !std::strncmp(name, "PMPI_", 5) || !std::strncmp(name, "__wrap_MPI_", 11) ||
         !std::strncmp(name, "tempi_", 6) || !std::strncmp(name, "mpi_", 4);
}

ElfFile read_elf(const std::string &path) {
  ElfFile f;
  // One read of the whole file: MPICH's library is 40 MB, a debug test program 25 MB, and
  // a character at a time took seconds (a minute in a sanitized -O0 build).
  std::error_code ec;
  const bool regular = std::filesystem::is_regular_file(path, ec);  // a directory opens, but has no size
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = regular && in ? std::streamoff(in.tellg()) : -1;
  std::string data(size > 0 ? size_t(size) : 0, '\0');
  if (size < 0 || !in.seekg(0) || !in.read(&data[0], std::streamsize(data.size()))) {
    f.error = "cannot read " + path;
    return f;
  }
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(data.data());
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > data.size() ||
      eh->e_phoff + uint64_t(eh->e_phnum) * sizeof(Elf64_Phdr) > data.size()) {
    f.error = path + " is not a 64-bit ELF file";
    return f;
  }
  const auto *ph = reinterpret_cast<const Elf64_Phdr *>(data.data() + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_INTERP && ph[i].p_offset + ph[i].p_filesz <= data.size())
      f.interp = std::string(data.data() + ph[i].p_offset, strnlen(data.data() + ph[i].p_offset, ph[i].p_filesz));
  const auto *sh = reinterpret_cast<const Elf64_Shdr *>(data.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr &strtab = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > data.size() || strtab.sh_offset + strtab.sh_size > data.size()) continue;
    const auto *sym = reinterpret_cast<const Elf64_Sym *>(data.data() + sh[i].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
      const int bind = ELF64_ST_BIND(sym[k].st_info);
      if (sym[k].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) || sym[k].st_name >= strtab.sh_size)
        continue;
      const char *name = data.data() + strtab.sh_offset + sym[k].st_name;
      if (interesting(name)) f.defined.insert(name);
      if (!std::strncmp(name, "_ZN5tempi", 9)) f.tempi_code = true;
    }
  }
  return f;
}

// The shared objects PROGRAM loads, in the dynamic linker's search order (LD_PRELOAD
// first), as the dynamic linker lists them without running the program.
std::vector<std::string> loaded_objects(const ElfFile &program, const std::string &path, std::string &note) {
  std::vector<std::string> objects;
  if (program.interp.empty()) {
    note = "a static executable: only the program itself is searched";
    return objects;
  }
  const std::string command = "'" + program.interp + "' --list '" + path + "' 2>&1";
  FILE *p = popen(command.c_str(), "r");
  if (!p) return objects;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    const size_t arrow = s.find("=> ");
    std::string object = arrow != std::string::npos ? s.substr(arrow + 3) : s.substr(s.find_first_not_of(" \t"));
    object = object.substr(0, object.find_first_of(" \n("));
    if (object == "not") note += "missing: " + s.substr(s.find_first_not_of(" \t"));
    if (!object.empty() && object[0] == '/') objects.push_back(object);
  }
  pclose(p);
  return objects;
}

std::vector<std::string> wrapped_calls() {
  return {
#define TEMPI_WRAPPED(fn) #fn,
#include "base/wrapped.def"
#if MPI_VERSION >= 4
#include "base/wrapped_mpi4.def"
#endif
#undef TEMPI_WRAPPED
  };
}

struct Object {
  std::string path;
  ElfFile elf;
  std::string role;  // what it is, in words
  bool tempi = false;
};

std::string describe_role(const ElfFile &e, bool is_program) {
  if (e.defined.count("tempi_archive_linked")) return "TEMPI (static archive)";
  if (e.defined.count("tempi_preload_linked")) return "TEMPI (preload library)";
  if (e.defined.count("tempi_wrap_archive_linked")) return "";  // said apart: its calls are __wrap_MPI_X
  // TEMPI's code in the program without its anchor: members of the archive pulled in one by
  // one, after the MPI library had already defined the calls those members would define.
  if (is_program && e.tempi_code) return "TEMPI (static archive, linked in part)";
  const bool defines_calls = e.defined.count("MPI_Send") || e.defined.count("MPI_Isend") || e.defined.count("MPI_Wait");
  if (e.defined.count("PMPI_Send")) return "the MPI library";
  if (defines_calls) return is_program ? "the program (defines MPI calls itself: a static PMPI tool)" : "a PMPI tool";
  return "";
}

// PROGRAM as the shell finds it: a name with a '/' is a path, any other is looked up in
// PATH (an empty entry is the current directory). Empty when there is none.
std::string resolve(const std::string &name) {
  if (name.find('/') != std::string::npos) return name;
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = colon > at ? dirs.substr(at, colon - at) : ".";
    const std::string candidate = dir + "/" + name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) return candidate;
    at = colon + 1;
  }
  return "";
}

// What keeps a program that holds TEMPI from having every call go through it, beyond calls
// that reach other code first: a PMPI tool that static TEMPI forwards past (it calls
// PMPI_X), and Fortran bindings that the --wrap archive cannot reach.
std::vector<std::string> skipped(const std::vector<Object> &order, bool wrap_archive) {
  std::vector<std::string> found;
  const bool static_tempi = order[0].tempi;
  for (size_t i = 1; i < order.size(); ++i) {
    const Object &o = order[i];
    if (static_tempi && o.role == "a PMPI tool")
      found.push_back("the PMPI tool " + o.path + " sees no call: TEMPI's static archive forwards to PMPI_X past it");
    if (wrap_archive && o.elf.defined.count("mpi_isend_") && !order[0].elf.defined.count("mpi_isend_"))
      found.push_back("Fortran calls from " + o.path + " reach the MPI library, not TEMPI's --wrap archive");
  }
  return found;
}

void print_objects(const std::string &path, const std::string &note, const std::vector<Object> &order,
                   bool wrap_archive) {
  std::printf("%s\n", path.c_str());
  if (const char *pre = std::getenv("LD_PRELOAD")) std::printf("  LD_PRELOAD=%s\n", pre);
  if (!note.empty()) std::printf("  (%s)\n", note.c_str());
  std::printf("  objects that define MPI calls, in the order the dynamic linker searches them:\n");
  for (const Object &o : order)
    if (!o.role.empty()) std::printf("    %-38s %s\n", o.role.c_str(), o.path.c_str());
  if (wrap_archive)
    std::printf("  TEMPI (--wrap archive) is in the program, above what defines MPI_X: the program's own calls\n"
                "  reach it; calls from shared libraries (Fortran bindings, other tools) do not\n");
}

int check(const std::string &name) {
  const std::string path = resolve(name);
  if (path.empty()) {
    std::fprintf(stderr, "tempi-info: %s: not found in PATH (name a file here as ./%s)\n", name.c_str(), name.c_str());
    return kUnreadable;
  }
  const ElfFile program = read_elf(path);
  if (!program.error.empty()) {
    std::fprintf(stderr, "tempi-info: %s\n", program.error.c_str());
    return kUnreadable;
  }
  std::string note;
  std::vector<Object> order{{path, program, describe_role(program, true), false}};
  for (const std::string &lib : loaded_objects(program, path, note)) {
    Object o{lib, read_elf(lib), "", false};
    o.role = describe_role(o.elf, false);
    order.push_back(o);
  }
  for (Object &o : order) o.tempi = o.role.rfind("TEMPI", 0) == 0;
  const bool wrap_archive = program.defined.count("tempi_wrap_archive_linked") != 0;
  print_objects(path, note, order, wrap_archive);

  // For each call TEMPI wraps: the first object that defines it is where calls go.
  std::vector<std::string> ahead;
  bool anywhere = wrap_archive;
  for (const Object &o : order) anywhere |= o.tempi;
  // MPICH's mpi_f08 completion calls skip MPI_Wait (TEMPI's wrap_fortran_mpich.cpp).
  std::vector<std::string> calls = wrapped_calls();
  calls.push_back("mpi_wait_f08_");
  for (const std::string &call : calls) {
    if (wrap_archive && (program.defined.count("__wrap_" + call) || program.defined.count(call))) continue;
    for (const Object &o : order) {
      if (!o.elf.defined.count(call)) continue;
      if (!o.tempi) ahead.push_back(call + " (" + o.path + ")");
      break;
    }
  }
  if (!anywhere) {
    std::printf("TEMPI is not in this program: its MPI calls go straight to the MPI library or another tool.\n");
    return kAbsent;
  }
  const std::vector<std::string> missed = skipped(order, wrap_archive);
  if (!ahead.empty()) {
    std::printf("TEMPI is linked in part or bypassed: %zu of the calls it wraps reach other code first:\n",
                ahead.size());
    for (size_t i = 0; i < ahead.size() && i < 8; ++i) std::printf("    %s\n", ahead[i].c_str());
    if (ahead.size() > 8) std::printf("    ... and %zu more\n", ahead.size() - 8);
    std::printf("These reach TEMPI only if that code forwards to the next definition (dlsym(RTLD_NEXT));\n"
                "a tool that calls PMPI_X, or the MPI library, leaves TEMPI out. Put TEMPI first\n"
                "(docs/using.md, \"Is TEMPI linked?\").\n");
  }
  for (const std::string &m : missed) std::printf("TEMPI is bypassed: %s (docs/using.md, \"Is TEMPI linked?\").\n", m.c_str());
  if (!ahead.empty() || !missed.empty()) return kPartial;
  std::printf("TEMPI comes first for every call it wraps.\n");
  return kWhole;
}

// The one-line check for a Python user (docs/using.md, "Python"): tempi_link_report() is
// defined by every TEMPI artifact (pmpi/api/link_check.hpp); mpi4py has started MPI by then.
const char kPythonCheck[] =
    "python3 -c \"import ctypes; from mpi4py import MPI; g = ctypes.CDLL(None); "
    "f = getattr(g, 'tempi_link_report', None); f and setattr(f, 'restype', ctypes.c_char_p); "
    "print(f().decode() if f else 'TEMPI is not in this process; MPI: ' + "
    "MPI.Get_library_version().split(',')[0])\"";

void print_python() {
  std::printf("Whether TEMPI is interposed in an mpi4py process (the preload took) and over which MPI:\n"
              "run this where the application runs, with the same launcher and LD_PRELOAD, e.g.\n"
              "  mpiexec -n 1 env LD_PRELOAD=/path/to/libtempi_preload.so \\\n    %s\n"
              "It prints \"TEMPI <version> preload library over <MPI>: every call it wraps reaches it\",\n"
              "what keeps calls from TEMPI, or \"TEMPI is not in this process\" (docs/using.md, \"Python\").\n",
              kPythonCheck);
}

}  // namespace

int main(int argc, char **argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (argc == 2 && (first == "-h" || first == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc == 2 && first == "--version") {
    std::printf("tempi-info (TEMPI %s), built against %s\n", TEMPI_VERSION, TEMPI_BUILD_MPI);
    return 0;
  }
  if (argc == 2 && first == "--python") {
    print_python();
    return 0;
  }
  if (first == "--check" && argc == 3) return check(argv[2]);
  if (argc > 1) {
    const std::string problem = first == "--check" ? "--check needs one PROGRAM" : "unknown option or argument: " + first;
    std::fprintf(stderr, "tempi-info: %s\n%s", problem.c_str(), kUsage);
    return kUsageError;
  }
  MPI_Init(&argc, &argv);
  print_build();
  print_runtime();
  print_environment();
  MPI_Finalize();
  return 0;
}
