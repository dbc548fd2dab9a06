#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <cmath>

#include "profile.hpp"
#include "synthetic_profile.hpp"

using namespace tempi;
using tempi::testing::synthetic_profile;

namespace {

std::optional<Profile> parse(const std::string &text, std::string &error) { return parse_profile(text, error); }

// The written profile with the first occurrence of `from` replaced by `to`.
std::string edited(const std::string &from, const std::string &to) {
  std::string text = write_profile(synthetic_profile());
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::function<const char *(const char *)> env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// A file in a fresh temporary directory (`subdir` of it when given), removed at the end of the scope.
struct TempFile {
  std::string dir, sub, path;
  explicit TempFile(const std::string &text, const std::string &subdir = "", const std::string &name = "profile.json") {
    char tmpl[] = "/tmp/tempi_profile_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    sub = subdir.empty() ? dir : dir + "/" + subdir;
    if (!subdir.empty()) REQUIRE(mkdir(sub.c_str(), 0700) == 0);
    path = sub + "/" + name;
    std::ofstream(path) << text;
  }
  ~TempFile() {
    std::remove(path.c_str());
    if (sub != dir) rmdir(sub.c_str());
    rmdir(dir.c_str());
  }
};

}  // namespace

TEST_CASE("a written profile reads back the same", "[profile]") {
  Profile p = synthetic_profile();
  p.staged_chunk = 7.5e-6;
  const std::string text = write_profile(p);
  std::string error;
  const std::optional<Profile> back = parse(text, error);
  REQUIRE(back);
  CHECK(error.empty());
  CHECK(back->machine.gpu == p.machine.gpu);
  CHECK(back->machine.mpi_library == p.machine.mpi_library);
  CHECK(back->cuda_aware);
  CHECK(back->measured_peer == PeerClass::SameNode);
  CHECK(back->launch == Approx(p.launch));
  CHECK(back->staged_chunk == Approx(p.staged_chunk));
  REQUIRE(back->pack_host.rows.size() == 3);
  CHECK(back->pack_host.rows[1].block == 64);
  CHECK(back->pack_host.rows[1].time.seconds.back() == Approx(p.pack_host.rows[1].time.seconds.back()).epsilon(1e-5));
  REQUIRE(back->mpi_device.size() == 2);  // the measured placement and the rank itself
  CHECK(back->mpi_device[1].peer == PeerClass::Self);
  CHECK(back->device_wire(PeerClass::Self) == &back->mpi_device[1].time);
  CHECK(write_profile(*back) == text);
}

TEST_CASE("repeated measurements combine point by point by their median", "[profile]") {
  using tempi::testing::SyntheticRates;
  // Three runs: the second disturbed as a whole (every time twice as long), the third a
  // little slower than the first; the median is the third run's at every point.
  SyntheticRates quiet, slow, disturbed;
  slow.launch = 3.3e-6;
  slow.mpi_host = {2.2e-6, 18e9};
  slow.mpi_device = {16e-6, 90e9};
  slow.pack_device = {11e-6, 0.9e12};
  disturbed.launch = 6e-6;
  disturbed.mpi_host = {4e-6, 10e9};
  disturbed.mpi_device = {30e-6, 50e9};
  disturbed.pack_device = {20e-6, 0.5e12};
  std::vector<Profile> runs = {synthetic_profile(quiet), synthetic_profile(disturbed), synthetic_profile(slow)};
  runs[0].date = "first";
  runs[1].date = "second";
  const Profile expected = synthetic_profile(slow);
  std::string error;
  const std::optional<Profile> m = median_profile(runs, error);
  REQUIRE(m);
  CHECK(error.empty());
  CHECK(m->date == "first");  // what is not measured comes from the first run
  CHECK(m->launch == Approx(slow.launch));
  CHECK(m->mpi_host.seconds == expected.mpi_host.seconds);
  CHECK(m->mpi_device[0].time.seconds == expected.mpi_device[0].time.seconds);
  CHECK(m->mpi_device[0].batched.seconds == expected.mpi_device[0].batched.seconds);
  for (size_t k = 0; k < m->pack_device.rows.size(); ++k)
    CHECK(m->pack_device.rows[k].time.seconds == expected.pack_device.rows[k].time.seconds);
  // Two runs: each point the mean of the two middle values.
  const std::optional<Profile> two = median_profile({runs[0], runs[2]}, error);
  REQUIRE(two);
  CHECK(two->mpi_host.seconds.back() ==
        Approx((runs[0].mpi_host.seconds.back() + runs[2].mpi_host.seconds.back()) / 2));
  // The median of one run is that run.
  const std::optional<Profile> one = median_profile({runs[1]}, error);
  REQUIRE(one);
  CHECK(write_profile(*one) == write_profile(runs[1]));
}

TEST_CASE("repeated measurements of different grids do not combine", "[profile]") {
  std::vector<Profile> runs = {synthetic_profile(), synthetic_profile()};
  std::string error;
  SECTION("no run") {
    CHECK_FALSE(median_profile({}, error));
    CHECK(error == "no run to combine");
  }
  SECTION("another size") {
    runs[1].mpi_host.bytes.back() *= 2;
    CHECK_FALSE(median_profile(runs, error));
    CHECK(error == "the runs measured different sizes");
  }
  SECTION("another block size") {
    runs[1].unpack_host.rows[1].block = 128;
    CHECK_FALSE(median_profile(runs, error));
    CHECK(error == "the runs measured different kernel tables");
  }
  SECTION("a kernel row with fewer sizes") {
    runs[1].pack_device.rows[0].time.bytes.pop_back();
    runs[1].pack_device.rows[0].time.seconds.pop_back();
    CHECK_FALSE(median_profile(runs, error));
    CHECK(error == "the runs measured different kernel tables");
  }
  SECTION("another peer") {
    runs[1].mpi_device[0].peer = PeerClass::SameGpu;
    CHECK_FALSE(median_profile(runs, error));
    CHECK(error == "the runs measured different GPU-buffer peers");
  }
  SECTION("a library that was CUDA-aware in one run only") {
    runs[1].mpi_device.clear();
    CHECK_FALSE(median_profile(runs, error));
    CHECK(error == "the runs measured different GPU-buffer peers");
  }
}

TEST_CASE("names with quotes and control characters survive the round trip", "[profile]") {
  Profile p = synthetic_profile();
  p.machine.gpu = "GPU \"quoted\" \\ back\tslash";
  std::string error;
  const auto back = parse(write_profile(p), error);
  REQUIRE(back);
  CHECK(back->machine.gpu == p.machine.gpu);
}

TEST_CASE("bad profiles are refused with a message that says why", "[profile]") {
  std::string error;
  const std::string good = write_profile(synthetic_profile());
  SECTION("truncated anywhere") {
    for (size_t cut : {size_t(0), size_t(1), good.size() / 3, good.size() / 2, good.size() - 3}) {
      error.clear();
      CHECK_FALSE(parse(good.substr(0, cut), error));
      CHECK_FALSE(error.empty());
    }
    CHECK_FALSE(parse(good.substr(0, good.size() / 2), error));
    INFO(error);
    CHECK(error.find("truncated") != std::string::npos);
  }
  SECTION("another version") {
    CHECK_FALSE(parse(edited("\"tempi_profile\": 3", "\"tempi_profile\": 4"), error));
    CHECK(error.find("version 4") != std::string::npos);
    // version 2 had no batched curves, version 1 no staged_chunk_s: such a profile is
    // measured again, not guessed at
    for (const char *older : {"\"tempi_profile\": 2", "\"tempi_profile\": 1"}) {
      CHECK_FALSE(parse(edited("\"tempi_profile\": 3", older), error));
      CHECK(error.find(std::string("version ") + older[std::strlen(older) - 1]) != std::string::npos);
      CHECK(error.find("run tempi-measure again") != std::string::npos);
    }
  }
  SECTION("not a profile") {
    CHECK_FALSE(parse("{\"hello\": 1}", error));
    CHECK(error.find("not a TEMPI profile") != std::string::npos);
    CHECK_FALSE(parse("[1, 2]", error));
  }
  SECTION("a negative time") {
    CHECK_FALSE(parse(edited("\"launch_s\": 3e-06", "\"launch_s\": -3e-06"), error));
    CHECK(error.find("launch_s") != std::string::npos);
    CHECK_FALSE(parse(edited("\"seconds\": [", "\"seconds\": [-1, "), error));
  }
  SECTION("a missing number") {
    CHECK_FALSE(parse(edited("\"sync_s\": 5e-06,", ""), error));
    CHECK(error.find("sync_s") != std::string::npos);
    CHECK(error.find("missing") != std::string::npos);
    CHECK_FALSE(parse(edited("\"staged_chunk_s\": 0,", ""), error));
    CHECK(error.find("staged_chunk_s") != std::string::npos);
    CHECK_FALSE(parse(edited("\"bytes\": [1024, ", "\"bytes\": ["), error));
    CHECK(error.find("as many seconds as bytes") != std::string::npos);
  }
  SECTION("numbers that are not numbers") {
    CHECK_FALSE(parse(edited("\"sync_s\": 5e-06", "\"sync_s\": \"fast\""), error));
    CHECK_FALSE(parse(edited("\"sync_s\": 5e-06", "\"sync_s\": nan"), error));
    CHECK_FALSE(parse(edited("\"block\": 8", "\"block\": 0"), error));
    CHECK_FALSE(parse(edited("\"word\": 8", "\"word\": 3"), error));
  }
  SECTION("sizes out of order") {
    CHECK_FALSE(parse(edited("\"bytes\": [1024, 4096", "\"bytes\": [4096, 1024"), error));
    CHECK(error.find("out of order") != std::string::npos);
  }
  SECTION("a batched curve missing") {
    CHECK_FALSE(parse(edited("\"mpi_host_batched\"", "\"mpi_host_batch\""), error));
    CHECK(error.find("mpi_host_batched") != std::string::npos);
    CHECK_FALSE(parse(edited("\"batched\": {", "\"batch\": {"), error));
    CHECK(error.find("batched") != std::string::npos);
    CHECK(error.find("missing") != std::string::npos);
  }
  SECTION("a CUDA-aware library without device measurements") {
    Profile p = synthetic_profile();
    p.mpi_device.clear();
    CHECK_FALSE(parse(write_profile(p), error));
    CHECK(error.find("mpi_device") != std::string::npos);
  }
  SECTION("device curves that do not name their peers once each") {
    Profile p = synthetic_profile();
    p.mpi_device.push_back(p.mpi_device.front());
    CHECK_FALSE(parse(write_profile(p), error));
    CHECK(error.find("twice") != std::string::npos);
  }
  SECTION("a CUDA-aware library without the measured placement's curve, or without the rank's own") {
    Profile p = synthetic_profile();
    p.mpi_device.front().peer = PeerClass::OtherNode;  // measured same_node
    CHECK_FALSE(parse(write_profile(p), error));
    CHECK(error.find("measured peer same_node") != std::string::npos);
    p = synthetic_profile();
    p.mpi_device.pop_back();
    CHECK_FALSE(parse(write_profile(p), error));
    CHECK(error.find("self") != std::string::npos);
    // a library that is not CUDA-aware has no device curves at all
    p = synthetic_profile();
    p.cuda_aware = false;
    p.mpi_device.clear();
    CHECK(parse(write_profile(p), error));
  }
  SECTION("measured against itself") {
    Profile p = synthetic_profile();
    p.measured_peer = PeerClass::Self;
    CHECK_FALSE(parse(write_profile(p), error));
    CHECK(error.find("measured_peer") != std::string::npos);
  }
}

TEST_CASE("a peer runs on another node, on this GPU, or elsewhere on this node", "[profile][peer]") {
  CHECK(classify_peer(false, "0000:41:00.0", "0000:41:00.0") == PeerClass::OtherNode);  // ids are per node
  CHECK(classify_peer(true, "0000:41:00.0", "0000:41:00.0") == PeerClass::SameGpu);
  CHECK(classify_peer(true, "0000:41:00.0", "0000:42:00.0") == PeerClass::SameNode);
  // a process without a GPU shares none, not even with another one without
  CHECK(classify_peer(true, "", "") == PeerClass::SameNode);
  CHECK(classify_peer(true, "0000:41:00.0", "") == PeerClass::SameNode);
  CHECK(classify_peer(true, "", "0000:41:00.0") == PeerClass::SameNode);
}

TEST_CASE("each placement has its own device-buffer curve, others the measured one", "[profile][peer]") {
  Profile p = synthetic_profile();  // measured on one node (SameNode)
  using tempi::testing::curve_of;
  p.mpi_device.push_back({PeerClass::SameGpu, curve_of({1e-6, 900e9}), curve_of({2e-6, 900e9})});
  p.mpi_device.push_back({PeerClass::OtherNode, curve_of({30e-6, 10e9}), curve_of({40e-6, 10e9})});
  std::string error;
  const std::optional<Profile> back = parse_profile(write_profile(p), error);
  REQUIRE(back);
  REQUIRE(back->mpi_device.size() == 4);
  for (PeerClass peer : {PeerClass::SameGpu, PeerClass::SameNode, PeerClass::OtherNode}) {
    const Curve *w = back->device_wire(peer);
    REQUIRE(w);
    CHECK(w->at(1 << 20) == Approx(p.device_wire(peer)->at(1 << 20)));
  }
  CHECK(back->device_wire(PeerClass::SameGpu)->at(1 << 20) < back->device_wire(PeerClass::SameNode)->at(1 << 20));
  CHECK(back->device_wire(PeerClass::OtherNode)->at(1 << 20) > back->device_wire(PeerClass::SameNode)->at(1 << 20));
  // an unknown peer: the placement the profile was measured in (its first curve)
  CHECK(back->device_wire(PeerClass::Unknown) == &back->mpi_device.front().time);
  // each placement's batched curve comes with it
  CHECK(back->device_wire(PeerClass::SameGpu, true)->at(1024) == Approx(2e-6 + 1024 / 900e9));
  CHECK(back->device_wire(PeerClass::Unknown, true) == &back->mpi_device.front().batched);
  Profile one = synthetic_profile();
  CHECK(one.device_wire(PeerClass::OtherNode) == &one.mpi_device.front().time);
}

TEST_CASE("curves interpolate between measured sizes and extrapolate at the last rate", "[profile]") {
  Curve c;
  c.bytes = {1000, 10000, 100000};
  c.seconds = {1e-6, 2e-6, 20e-6};
  CHECK(c.at(10) == Approx(1e-6));  // below the first point: the latency
  CHECK(c.at(1000) == Approx(1e-6));
  CHECK(c.at(10000) == Approx(2e-6));
  const double mid = c.at(31623);
  CHECK(mid > 2e-6);
  CHECK(mid < 20e-6);
  CHECK(mid == Approx(std::sqrt(2e-6 * 20e-6)).epsilon(0.01));  // log-log: geometric mean at the middle
  CHECK(c.at(1e6) == Approx(200e-6));  // 10x the bytes at the last rate
  for (double b = 500; b < 2e6; b *= 1.37) CHECK(c.at(b) <= c.at(b * 1.37));  // monotone here
}

TEST_CASE("sizes measured slower than a larger size are named as possibly disturbed", "[profile]") {
  Curve c;
  c.bytes = {1024, 4096, 16384, 65536, 262144, 1048576};
  // a disturbance fading over the first sizes: unpacks of 64-byte rows on an H100 under
  // MPS, 2026-11-25 (tempi-measure's row, in us)
  c.seconds = {45.8e-6, 26.1e-6, 20.5e-6, 17.1e-6, 15.7e-6, 14.9e-6};
  // 45.8, 26.1 and 20.5 are more than 25% above 14.9; 17.1 and 15.7 are within it
  CHECK(slower_than_larger(c, 0.25) == std::vector<size_t>{0, 1, 2});
  CHECK(slower_than_larger(c, 0) == std::vector<size_t>{0, 1, 2, 3, 4});

  Curve faster_path;  // a larger size slower than one before it but not than the largest
  faster_path.bytes = {64, 1024, 16384, 65536, 1048576};
  faster_path.seconds = {8e-6, 20e-6, 11.5e-6, 9.1e-6, 30e-6};
  CHECK(slower_than_larger(faster_path, 0.25) == std::vector<size_t>{1, 2});  // 20 and 11.5 against 9.1

  Curve rising;
  rising.bytes = {64, 1024, 16384};
  rising.seconds = {1e-6, 2e-6, 3e-6};
  CHECK(slower_than_larger(rising, 0).empty());  // a sound curve names nothing

  Curve boundary;  // exactly 25% slower is within the tolerance (values exact in binary)
  boundary.bytes = {64, 1024};
  boundary.seconds = {1.25, 1.0};
  CHECK(slower_than_larger(boundary, 0.25).empty());
  CHECK(slower_than_larger(boundary, 0.2) == std::vector<size_t>{0});

  CHECK(slower_than_larger(Curve{}, 0.25).empty());
}

TEST_CASE("kernel tables interpolate by block size and charge narrow words", "[profile]") {
  const KernelTable t = tempi::testing::kernels_of({0, 1e9});
  const double mb = 1 << 20;
  CHECK(t.at(mb, 8, 8) == Approx(4 * mb / 1e9).epsilon(1e-3));
  CHECK(t.at(mb, 512, 16) == Approx(mb / 1e9).epsilon(1e-3));
  const double between = t.at(mb, 128, 16);
  CHECK(between < t.at(mb, 64, 16));
  CHECK(between > t.at(mb, 512, 16));
  CHECK(t.at(mb, 4096, 16) == Approx(t.at(mb, 512, 16)));  // beyond the rows: the widest
  CHECK(t.at(mb, 4, 4) >= t.at(mb, 8, 8));  // below them: the narrowest, and a narrower word
  // the same rows read 1 byte at a time: the word factor's ratio (8 against 1 for 16-byte words)
  CHECK(t.at(mb, 512, 1) == Approx(8 * t.at(mb, 512, 16)));
  CHECK(t.at(mb, 64, 16) == Approx(t.at(mb, 64, 16)));
}

TEST_CASE("the cache file is per user, keyed by GPU model and MPI library", "[profile]") {
  const MachineIdentity m{"NVIDIA H200", "MPICH Version: 4.0.2"};
  CHECK(profile_cache_path(m, env_of({{"HOME", "/home/u"}})) ==
        "/home/u/.cache/tempi/profile-NVIDIA_H200-MPICH_Version_4.0.2.json");
  CHECK(profile_cache_path(m, env_of({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/c"}})) ==
        "/c/tempi/profile-NVIDIA_H200-MPICH_Version_4.0.2.json");
  CHECK(profile_cache_path(m, env_of({})).empty());
  // another library is another file
  CHECK(profile_cache_path({"NVIDIA H200", "Open MPI v4.1.5"}, env_of({{"HOME", "/h"}})) !=
        profile_cache_path(m, env_of({{"HOME", "/h"}})));
}

TEST_CASE("the start-up lookup finds a matching profile, or says why it uses none", "[profile]") {
  const Profile p = synthetic_profile();
  const MachineIdentity here = p.machine;
  SECTION("TEMPI_PROFILE names a good file") {
    TempFile f(write_profile(p));
    const ProfileChoice c = find_profile(f.path, here, env_of({}));
    REQUIRE(c.profile);
    CHECK(c.path == f.path);
  }
  SECTION("the cache file") {
    TempFile f(write_profile(p), "tempi", "profile-Synthetic_GPU-Synthetic_MPI_1.0.json");
    const ProfileChoice c = find_profile("", here, env_of({{"XDG_CACHE_HOME", f.dir}}));
    CHECK(c.profile);
    CHECK(c.path == f.path);
  }
  SECTION("absent") {
    const ProfileChoice c = find_profile("", here, env_of({{"XDG_CACHE_HOME", "/nonexistent"}}));
    CHECK_FALSE(c.profile);
    CHECK(c.reason.find("run tempi-measure") != std::string::npos);
    CHECK_FALSE(find_profile("/nonexistent/p.json", here, env_of({})).profile);
  }
  SECTION("none") {
    const ProfileChoice c = find_profile("none", here, env_of({}));
    CHECK_FALSE(c.profile);
    CHECK(c.reason == "TEMPI_PROFILE=none");
  }
  SECTION("another machine") {
    TempFile f(write_profile(p));
    for (const MachineIdentity &other : {MachineIdentity{"NVIDIA A100", here.mpi_library},
                                         MachineIdentity{here.gpu, "Open MPI v4.1.5"}}) {
      const ProfileChoice c = find_profile(f.path, other, env_of({}));
      CHECK_FALSE(c.profile);
      CHECK(c.reason.find("another machine") != std::string::npos);
    }
  }
  SECTION("a malformed file names the file and the fault") {
    TempFile f("{\"tempi_profile\": 2, \"machine\": ");
    const ProfileChoice c = find_profile(f.path, here, env_of({}));
    CHECK_FALSE(c.profile);
    CHECK(c.reason.find(f.path) != std::string::npos);
    CHECK(c.reason.find("truncated") != std::string::npos);
  }
}

// The only test of this program that installs a profile: the process's profile is global.
// tempi-measure installs the profile it wrote and checks the model with messages through
// TEMPI, which starts lazily at its first intercepted call and then runs its own start-up
// lookup (TEMPI_PROFILE=none there). A start-up lookup that replaced the program's, or a
// program install that did not replace the start-up one, left the model on the built-in
// rules and tempi-measure bound a reference to a null profile (UBSan, issue 13).
TEST_CASE("a profile the program installs stands, whenever TEMPI's start-up lookup comes", "[profile]") {
  auto choice = [](const char *date, const char *path) {
    ProfileChoice c;
    c.profile = synthetic_profile();
    c.profile->date = date;
    c.path = path;
    return c;
  };
  ProfileChoice none;
  none.reason = "TEMPI_PROFILE=none";
  CHECK(profile_summary().find("none yet") != std::string::npos);

  // TEMPI starts first (tempi-measure: tempi::active() before it measures).
  CHECK(install_startup_profile(none) == nullptr);
  CHECK(active_profile() == nullptr);
  CHECK(profile_summary() == "none: TEMPI_PROFILE=none; built-in rules");

  // The program's install replaces the start-up choice.
  const Profile *mine = install_profile(choice("2026-02-02T00:00:00Z", "/written.json"));
  REQUIRE(mine != nullptr);
  CHECK(active_profile() == mine);
  CHECK(mine->date == "2026-02-02T00:00:00Z");
  CHECK(profile_summary().find("/written.json") != std::string::npos);

  // TEMPI starting after it (or a second start-up lookup) leaves it in force.
  CHECK(install_startup_profile(none) == mine);
  CHECK(install_startup_profile(choice("2026-03-03T00:00:00Z", "/cache.json")) == mine);
  CHECK(active_profile() == mine);
  CHECK(profile_summary().find("/written.json") != std::string::npos);

  // A later program install replaces it; the one before stays readable (never freed:
  // a thread may still hold it, and the decision cache keys on its address).
  const Profile *next = install_profile(choice("2026-04-04T00:00:00Z", "/next.json"));
  REQUIRE(next != nullptr);
  CHECK(next != mine);
  CHECK(active_profile() == next);
  CHECK(mine->date == "2026-02-02T00:00:00Z");
  CHECK(install_profile(none) == nullptr);  // a program may also go back to the built-in rules
  CHECK(active_profile() == nullptr);
  CHECK(install_startup_profile(choice("2026-05-05T00:00:00Z", "/cache.json")) == nullptr);
}
