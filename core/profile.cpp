#include "profile.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace tempi {

// ---------------------------------------------------------------- interpolation

double Curve::at(double b) const {
  if (bytes.empty()) return 0;
  const size_t n = bytes.size();
  if (b <= bytes[0]) return seconds[0];
  if (b >= bytes[n - 1]) return seconds[n - 1] * b / bytes[n - 1];  // at the last point's rate
  const size_t hi = size_t(std::upper_bound(bytes.begin(), bytes.end(), b) - bytes.begin());
  const size_t lo = hi - 1;
  const double x0 = bytes[lo], x1 = bytes[hi], y0 = seconds[lo], y1 = seconds[hi];
  if (y0 <= 0 || y1 <= 0) return y0 + (y1 - y0) * (b - x0) / (x1 - x0);
  const double a = std::log(b / x0) / std::log(x1 / x0);
  return y0 * std::pow(y1 / y0, a);
}

std::vector<size_t> slower_than_larger(const Curve &c, double tolerance) {
  std::vector<size_t> out;
  double fastest_above = std::numeric_limits<double>::infinity();
  for (size_t i = c.seconds.size(); i-- > 0;) {
    if (c.seconds[i] > fastest_above * (1 + tolerance)) out.push_back(i);
    fastest_above = std::min(fastest_above, c.seconds[i]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

// The access width the kernels pick for aligned rows of `block` bytes.
int natural_word(int64_t block) {
  int w = 16;
  while (w > 1 && block % w) w /= 2;
  return w;
}

double word_slowdown(const std::vector<std::pair<int, double>> &factors, int word) {
  for (const auto &[w, f] : factors)
    if (w == word) return f;
  return 1;
}

}  // namespace

double KernelTable::at(double bytes, int64_t block, int word) const {
  if (rows.empty()) return 0;
  // rows are sorted by block (parse_profile checks it)
  auto hi = std::lower_bound(rows.begin(), rows.end(), block, [](const KernelRow &r, int64_t b) { return r.block < b; });
  double t;
  if (hi == rows.begin()) {
    t = hi->time.at(bytes);
  } else if (hi == rows.end()) {
    t = rows.back().time.at(bytes);
  } else if (hi->block == block) {
    t = hi->time.at(bytes);
  } else {
    const auto lo = hi - 1;
    const double t0 = lo->time.at(bytes), t1 = hi->time.at(bytes);
    const double a = std::log(double(block) / double(lo->block)) / std::log(double(hi->block) / double(lo->block));
    t = (t0 > 0 && t1 > 0) ? t0 * std::pow(t1 / t0, a) : t0 + (t1 - t0) * a;
  }
  // The rows were measured at their natural word; narrower access is slower.
  const double f = word_slowdown(word_factor, word) / word_slowdown(word_factor, natural_word(block));
  return f > 1 ? t * f : t;
}

const char *to_string(PeerClass p) {
  switch (p) {
    case PeerClass::Unknown:
      return "unknown";
    case PeerClass::SameGpu:
      return "same_gpu";
    case PeerClass::SameNode:
      return "same_node";
    case PeerClass::OtherNode:
      return "other_node";
    case PeerClass::Self:
      return "self";
  }
  return "?";
}

std::optional<PeerClass> peer_class_from(const std::string &name) {
  for (PeerClass p : {PeerClass::Unknown, PeerClass::SameGpu, PeerClass::SameNode, PeerClass::OtherNode, PeerClass::Self})
    if (name == to_string(p)) return p;
  return std::nullopt;
}

PeerClass classify_peer(bool same_node, const std::string &my_gpu, const std::string &peer_gpu) {
  if (!same_node) return PeerClass::OtherNode;
  return !my_gpu.empty() && my_gpu == peer_gpu ? PeerClass::SameGpu : PeerClass::SameNode;
}

const Curve *Profile::device_wire(PeerClass peer, bool batched) const {
  const DeviceWire *own = nullptr, *measured = nullptr;
  for (const DeviceWire &w : mpi_device) {
    if (w.peer == peer && !own) own = &w;
    if (w.peer == measured_peer && !measured) measured = &w;
  }
  // The rank itself is never predicted with another placement's curve: a library's
  // loopback is another path (parse_profile requires the self curve where it matters).
  const DeviceWire *found = own ? own : peer == PeerClass::Self ? nullptr : measured;
  if (!found) return nullptr;
  return batched ? &found->batched : &found->time;
}

// ---------------------------------------------------------------- JSON

namespace {

// The little JSON a profile needs: objects, arrays, numbers, strings, booleans.
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;
  std::map<std::string, Json> members;

  const Json *get(const std::string &key) const {
    auto it = members.find(key);
    return it == members.end() ? nullptr : &it->second;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string &text) : s_(text) {}

  bool parse(Json &out, std::string &error) {
    if (!value(out, 0) || (skip(), pos_ != s_.size())) {
      if (error_.empty()) error_ = "unexpected text";
      error = error_ + " at byte " + std::to_string(pos_);
      // A cut inside a number or a word shows as some other fault: name the likely cause.
      const size_t last = s_.find_last_not_of(" \n\r\t");
      if (error_.find("truncated") == std::string::npos && (last == std::string::npos || s_[last] != '}'))
        error += " (the text ends before the profile does: truncated?)";
      return false;
    }
    return true;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool fail(const char *what) {
    error_ = what;
    return false;
  }
  bool literal(const char *word) {
    const size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return fail("unknown word");
    pos_ += n;
    return true;
  }

  bool value(Json &out, int depth) {
    if (depth > 16) return fail("nested too deeply");
    skip();
    if (pos_ >= s_.size()) return fail("the text ends early (truncated?)");
    const char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') return out.kind = Json::Kind::String, string(out.string);
    if (c == 't') return out.kind = Json::Kind::Bool, out.boolean = true, literal("true");
    if (c == 'f') return out.kind = Json::Kind::Bool, out.boolean = false, literal("false");
    if (c == 'n') return out.kind = Json::Kind::Null, literal("null");
    return number(out);
  }

  bool number(Json &out) {
    const char *begin = s_.c_str() + pos_;
    char *end = nullptr;
    out.number = std::strtod(begin, &end);
    if (end == begin) return fail("expected a value");
    pos_ += size_t(end - begin);
    out.kind = Json::Kind::Number;
    return true;
  }

  bool string(std::string &out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        c = s_[pos_++];
        if (c == 'n') c = '\n';
        else if (c == 't') c = '\t';
        else if (c != '"' && c != '\\' && c != '/') return fail("unsupported escape in a string");
      }
      out += c;
    }
    if (pos_ >= s_.size()) return fail("the text ends inside a string (truncated?)");
    ++pos_;
    return true;
  }

  bool array(Json &out, int depth) {
    out.kind = Json::Kind::Array;
    ++pos_;
    skip();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    for (;;) {
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skip();
      if (pos_ >= s_.size()) return fail("the text ends inside an array (truncated?)");
      const char c = s_[pos_++];
      if (c == ']') return true;
      if (c != ',') return fail("expected , or ] in an array");
    }
  }

  bool object(Json &out, int depth) {
    out.kind = Json::Kind::Object;
    ++pos_;
    skip();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    for (;;) {
      skip();
      if (pos_ >= s_.size()) return fail("the text ends inside an object (truncated?)");
      if (s_[pos_] != '"') return fail("expected a member name");
      std::string key;
      if (!string(key)) return false;
      skip();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected : after a member name");
      ++pos_;
      if (!value(out.members[key], depth + 1)) return false;
      skip();
      if (pos_ >= s_.size()) return fail("the text ends inside an object (truncated?)");
      const char c = s_[pos_++];
      if (c == '}') return true;
      if (c != ',') return fail("expected , or } in an object");
    }
  }

  const std::string &s_;
  size_t pos_ = 0;
  std::string error_;
};

// ---------------------------------------------------------------- reading a profile

// Each reader returns false with a message naming the member that is wrong.
class ProfileReader {
 public:
  std::string error;

  bool text(const Json &o, const char *key, std::string &out, bool required = true) {
    const Json *v = o.get(key);
    if (!v) return !required || bad(key, "is missing");
    if (v->kind != Json::Kind::String) return bad(key, "is not a string");
    out = v->string;
    if (required && out.empty()) return bad(key, "is empty");
    return true;
  }

  bool flag(const Json &o, const char *key, bool &out) {
    const Json *v = o.get(key);
    if (!v) return bad(key, "is missing");
    if (v->kind != Json::Kind::Bool) return bad(key, "is not true or false");
    out = v->boolean;
    return true;
  }

  bool seconds(const Json &o, const char *key, double &out) {
    const Json *v = o.get(key);
    if (!v) return bad(key, "is missing");
    if (!non_negative(*v)) return bad(key, "is not a number >= 0");
    out = v->number;
    return true;
  }

  bool curve(const Json &o, const char *key, Curve &out) {
    const Json *v = o.get(key);
    if (!v) return bad(key, "is missing");
    return curve_of(*v, key, out);
  }

  bool curve_of(const Json &v, const std::string &what, Curve &out) {
    const Json *b = v.get("bytes"), *s = v.get("seconds");
    if (v.kind != Json::Kind::Object || !b || !s || b->kind != Json::Kind::Array || s->kind != Json::Kind::Array)
      return bad(what, "needs arrays \"bytes\" and \"seconds\"");
    if (b->items.empty() || b->items.size() != s->items.size())
      return bad(what, "needs as many seconds as bytes, at least one");
    for (size_t i = 0; i < b->items.size(); ++i) {
      if (!non_negative(b->items[i]) || b->items[i].number <= 0) return bad(what, "has bytes that are not > 0");
      if (!non_negative(s->items[i])) return bad(what, "has seconds that are not numbers >= 0");
      if (i > 0 && b->items[i].number <= b->items[i - 1].number) return bad(what, "has bytes out of order");
      out.bytes.push_back(b->items[i].number);
      out.seconds.push_back(s->items[i].number);
    }
    return true;
  }

  bool kernels(const Json &o, const char *key, KernelTable &out) {
    const Json *v = o.get(key);
    if (!v) return bad(key, "is missing");
    const Json *rows = v->get("rows");
    if (!rows || rows->kind != Json::Kind::Array || rows->items.empty()) return bad(key, "needs a non-empty \"rows\"");
    for (const Json &r : rows->items) {
      KernelRow row;
      const Json *block = r.get("block"), *word = r.get("word");
      const std::string what = std::string(key) + " row";
      if (!block || !non_negative(*block) || block->number < 1) return bad(what, "needs a \"block\" >= 1");
      if (!word || !non_negative(*word) || !valid_word(word->number)) return bad(what, "needs a \"word\" of 1-16");
      row.block = int64_t(block->number);
      row.word = int(word->number);
      if (!curve_of(r, what, row.time)) return false;
      if (!out.rows.empty() && row.block <= out.rows.back().block) return bad(key, "has rows out of block order");
      out.rows.push_back(std::move(row));
    }
    if (const Json *f = v->get("word_factor")) {
      if (f->kind != Json::Kind::Array) return bad(key, "has a \"word_factor\" that is not an array");
      for (const Json &p : f->items) {
        if (p.kind != Json::Kind::Array || p.items.size() != 2 || !non_negative(p.items[0]) ||
            !valid_word(p.items[0].number) || !non_negative(p.items[1]) || p.items[1].number <= 0)
          return bad(key, "has a \"word_factor\" entry that is not [word, factor > 0]");
        out.word_factor.emplace_back(int(p.items[0].number), p.items[1].number);
      }
    }
    return true;
  }

  bool peer(const Json &o, const char *key, PeerClass &out) {
    std::string name;
    if (!text(o, key, name)) return false;
    const auto p = peer_class_from(name);
    if (!p) return bad(key, "is not unknown, same_gpu, same_node, other_node or self");
    out = *p;
    return true;
  }

  bool bad(const std::string &what, const std::string &why) {
    error = "\"" + what + "\" " + why;
    return false;
  }

 private:
  static bool non_negative(const Json &v) {
    return v.kind == Json::Kind::Number && std::isfinite(v.number) && v.number >= 0;
  }
  static bool valid_word(double w) { return w == 1 || w == 2 || w == 4 || w == 8 || w == 16; }
};

// ---------------------------------------------------------------- writing

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\t') {
      out += "\\t";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;  // other control characters carry nothing
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string curve_members(const Curve &c) {
  std::string b = "\"bytes\": [", s = "\"seconds\": [";
  for (size_t i = 0; i < c.bytes.size(); ++i) {
    b += (i ? ", " : "") + number(c.bytes[i]);
    s += (i ? ", " : "") + number(c.seconds[i]);
  }
  return b + "], " + s + "]";
}

std::string kernel_table(const KernelTable &t) {
  std::string out = "{\n    \"rows\": [";
  for (size_t i = 0; i < t.rows.size(); ++i)
    out += std::string(i ? "," : "") + "\n      {\"block\": " + std::to_string(t.rows[i].block) +
           ", \"word\": " + std::to_string(t.rows[i].word) + ", " + curve_members(t.rows[i].time) + "}";
  out += "],\n    \"word_factor\": [";
  for (size_t i = 0; i < t.word_factor.size(); ++i)
    out += std::string(i ? ", " : "") + "[" + std::to_string(t.word_factor[i].first) + ", " +
           number(t.word_factor[i].second) + "]";
  return out + "]}";
}

}  // namespace

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median of one field over the runs; `get` returns that field of a run.
template <typename Get>
double median_over(const std::vector<Profile> &runs, Get get) {
  std::vector<double> v;
  for (const Profile &r : runs) v.push_back(get(r));
  return median_of(v);
}

// `out` (a copy of the first run's curve) takes, size by size, the median of the runs'
// curves that `get` picks; false when a run has other sizes.
template <typename Get>
bool median_curve(Curve &out, const std::vector<Profile> &runs, Get get) {
  for (const Profile &r : runs)
    if (get(r).bytes != out.bytes) return false;
  for (size_t i = 0; i < out.seconds.size(); ++i)
    out.seconds[i] = median_over(runs, [&](const Profile &r) { return get(r).seconds[i]; });
  return true;
}

bool median_table(KernelTable &out, const std::vector<Profile> &runs, KernelTable Profile::*table) {
  for (const Profile &r : runs) {
    const KernelTable &t = r.*table;
    if (t.rows.size() != out.rows.size() || t.word_factor.size() != out.word_factor.size()) return false;
    for (size_t k = 0; k < t.rows.size(); ++k)
      if (t.rows[k].block != out.rows[k].block || t.rows[k].word != out.rows[k].word) return false;
    for (size_t k = 0; k < t.word_factor.size(); ++k)
      if (t.word_factor[k].first != out.word_factor[k].first) return false;
  }
  for (size_t k = 0; k < out.rows.size(); ++k)
    if (!median_curve(out.rows[k].time, runs, [&](const Profile &r) -> const Curve & { return (r.*table).rows[k].time; }))
      return false;
  for (size_t k = 0; k < out.word_factor.size(); ++k)
    out.word_factor[k].second = median_over(runs, [&](const Profile &r) { return (r.*table).word_factor[k].second; });
  return true;
}

}  // namespace

std::optional<Profile> median_profile(const std::vector<Profile> &runs, std::string &error) {
  if (runs.empty()) {
    error = "no run to combine";
    return std::nullopt;
  }
  Profile m = runs.front();
  m.launch = median_over(runs, [](const Profile &r) { return r.launch; });
  m.sync = median_over(runs, [](const Profile &r) { return r.sync; });
  m.staged_chunk = median_over(runs, [](const Profile &r) { return r.staged_chunk; });
  for (auto table : {&Profile::pack_device, &Profile::unpack_device, &Profile::pack_host, &Profile::unpack_host})
    if (!median_table(m.*table, runs, table)) {
      error = "the runs measured different kernel tables";
      return std::nullopt;
    }
  for (auto curve : {&Profile::copy_to_host, &Profile::copy_to_device, &Profile::mpi_host, &Profile::mpi_host_batched})
    if (!median_curve(m.*curve, runs, [&](const Profile &r) -> const Curve & { return r.*curve; })) {
      error = "the runs measured different sizes";
      return std::nullopt;
    }
  for (const Profile &r : runs)
    if (r.mpi_device.size() != m.mpi_device.size()) {
      error = "the runs measured different GPU-buffer peers";
      return std::nullopt;
    }
  for (size_t k = 0; k < m.mpi_device.size(); ++k) {
    for (const Profile &r : runs)
      if (r.mpi_device[k].peer != m.mpi_device[k].peer) {
        error = "the runs measured different GPU-buffer peers";
        return std::nullopt;
      }
    if (!median_curve(m.mpi_device[k].time, runs, [&](const Profile &r) -> const Curve & { return r.mpi_device[k].time; }) ||
        !median_curve(m.mpi_device[k].batched, runs,
                      [&](const Profile &r) -> const Curve & { return r.mpi_device[k].batched; })) {
      error = "the runs measured different sizes";
      return std::nullopt;
    }
  }
  return m;
}

std::string write_profile(const Profile &p) {
  std::ostringstream o;
  o << "{\n  \"tempi_profile\": " << p.version << ",\n"
    << "  \"machine\": {\"gpu\": " << quoted(p.machine.gpu) << ", \"mpi_library\": " << quoted(p.machine.mpi_library)
    << "},\n"
    << "  \"driver\": " << quoted(p.driver) << ",\n"
    << "  \"date\": " << quoted(p.date) << ",\n"
    << "  \"cuda_aware\": " << (p.cuda_aware ? "true" : "false") << ",\n"
    << "  \"measured_peer\": " << quoted(to_string(p.measured_peer)) << ",\n"
    << "  \"launch_s\": " << number(p.launch) << ",\n"
    << "  \"sync_s\": " << number(p.sync) << ",\n"
    << "  \"staged_chunk_s\": " << number(p.staged_chunk) << ",\n"
    << "  \"pack_device\": " << kernel_table(p.pack_device) << ",\n"
    << "  \"unpack_device\": " << kernel_table(p.unpack_device) << ",\n"
    << "  \"pack_host\": " << kernel_table(p.pack_host) << ",\n"
    << "  \"unpack_host\": " << kernel_table(p.unpack_host) << ",\n"
    << "  \"copy_to_host\": {" << curve_members(p.copy_to_host) << "},\n"
    << "  \"copy_to_device\": {" << curve_members(p.copy_to_device) << "},\n"
    << "  \"mpi_host\": {" << curve_members(p.mpi_host) << "},\n"
    << "  \"mpi_host_batched\": {" << curve_members(p.mpi_host_batched) << "},\n"
    << "  \"mpi_device\": [";
  for (size_t i = 0; i < p.mpi_device.size(); ++i)
    o << (i ? "," : "") << "\n    {\"peer\": " << quoted(to_string(p.mpi_device[i].peer)) << ", "
      << curve_members(p.mpi_device[i].time) << ",\n     \"batched\": {" << curve_members(p.mpi_device[i].batched)
      << "}}";
  o << "]\n}\n";
  return o.str();
}

std::optional<Profile> parse_profile(const std::string &text, std::string &error) {
  Json root;
  JsonParser parser(text);
  if (!parser.parse(root, error)) return std::nullopt;
  if (root.kind != Json::Kind::Object) return error = "not a JSON object", std::nullopt;
  const Json *version = root.get("tempi_profile");
  if (!version || version->kind != Json::Kind::Number) return error = "not a TEMPI profile (no \"tempi_profile\")", std::nullopt;
  if (version->number != kProfileVersion) {
    error = "profile version " + number(version->number) + ", this TEMPI reads version " +
            std::to_string(kProfileVersion) + " (run tempi-measure again)";
    return std::nullopt;
  }
  Profile p;
  ProfileReader r;
  const Json *machine = root.get("machine");
  bool ok = machine && machine->kind == Json::Kind::Object ? true : r.bad("machine", "is missing");
  ok = ok && r.text(*machine, "gpu", p.machine.gpu) && r.text(*machine, "mpi_library", p.machine.mpi_library) &&
       r.text(root, "driver", p.driver, false) && r.text(root, "date", p.date, false) &&
       r.flag(root, "cuda_aware", p.cuda_aware) && r.peer(root, "measured_peer", p.measured_peer) &&
       r.seconds(root, "launch_s", p.launch) && r.seconds(root, "sync_s", p.sync) &&
       r.seconds(root, "staged_chunk_s", p.staged_chunk) &&
       r.kernels(root, "pack_device", p.pack_device) && r.kernels(root, "unpack_device", p.unpack_device) &&
       r.kernels(root, "pack_host", p.pack_host) && r.kernels(root, "unpack_host", p.unpack_host) &&
       r.curve(root, "copy_to_host", p.copy_to_host) && r.curve(root, "copy_to_device", p.copy_to_device) &&
       r.curve(root, "mpi_host", p.mpi_host) && r.curve(root, "mpi_host_batched", p.mpi_host_batched);
  if (ok) {
    const Json *dev = root.get("mpi_device");
    if (!dev || dev->kind != Json::Kind::Array) ok = r.bad("mpi_device", "is not an array");
    for (size_t i = 0; ok && i < dev->items.size(); ++i) {
      DeviceWire w;
      ok = r.peer(dev->items[i], "peer", w.peer) && r.curve_of(dev->items[i], "mpi_device", w.time) &&
           r.curve(dev->items[i], "batched", w.batched);
      for (const DeviceWire &seen : p.mpi_device)
        if (ok && seen.peer == w.peer) ok = r.bad("mpi_device", "names the peer " + std::string(to_string(w.peer)) + " twice");
      p.mpi_device.push_back(std::move(w));
    }
  }
  if (ok && p.measured_peer == PeerClass::Self) ok = r.bad("measured_peer", "is self: two ranks are measured");
  if (ok && p.cuda_aware) {
    // Every peer falls back to the measured placement's curve, except the rank itself.
    auto has = [&](PeerClass c) {
      for (const DeviceWire &w : p.mpi_device)
        if (w.peer == c) return true;
      return false;
    };
    if (p.mpi_device.empty())
      ok = r.bad("mpi_device", "is empty although the library was CUDA-aware");
    else if (!has(p.measured_peer))
      ok = r.bad("mpi_device", "has no curve for the measured peer " + std::string(to_string(p.measured_peer)));
    else if (!has(PeerClass::Self))
      ok = r.bad("mpi_device", "has no curve for self although the library was CUDA-aware");
  }
  if (!ok) return error = r.error, std::nullopt;
  return p;
}

// ---------------------------------------------------------------- finding the profile

namespace {

std::string file_name_part(const std::string &s) {
  std::string out;
  for (char c : s) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    if (keep)
      out += c;
    else if (!out.empty() && out.back() != '_')
      out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "unknown" : out;
}

}  // namespace

std::string profile_cache_path(const MachineIdentity &m, const std::function<const char *(const char *)> &env) {
  std::string dir;
  if (const char *x = env("XDG_CACHE_HOME"); x && *x)
    dir = x;
  else if (const char *h = env("HOME"); h && *h)
    dir = std::string(h) + "/.cache";
  else
    return "";
  return dir + "/tempi/profile-" + file_name_part(m.gpu) + "-" + file_name_part(m.mpi_library) + ".json";
}

ProfileChoice find_profile(const std::string &named, const MachineIdentity &here,
                           const std::function<const char *(const char *)> &env) {
  ProfileChoice c;
  if (named == "none") return c.reason = "TEMPI_PROFILE=none", c;
  c.path = named.empty() ? profile_cache_path(here, env) : named;
  if (c.path.empty()) return c.reason = "no profile named and no home directory for the cache", c;
  std::ifstream f(c.path, std::ios::binary);
  if (!f) {
    c.reason = named.empty() ? "no profile for this machine at " + c.path + " (run tempi-measure once)"
                             : "cannot read " + c.path;
    return c;
  }
  std::stringstream text;
  text << f.rdbuf();
  std::string error;
  std::optional<Profile> p = parse_profile(text.str(), error);
  if (!p) return c.reason = c.path + ": " + error, c;
  if (p->machine.gpu != here.gpu || p->machine.mpi_library != here.mpi_library) {
    c.reason = c.path + " was measured on another machine (GPU \"" + p->machine.gpu + "\", MPI \"" +
               p->machine.mpi_library + "\"; here GPU \"" + here.gpu + "\", MPI \"" + here.mpi_library + "\")";
    return c;
  }
  c.profile = std::move(p);
  return c;
}

namespace {

// Installed profiles are never freed: the model reads the current one without a lock,
// and a thread may still hold the one before. Its decision cache keys on the address.
std::mutex g_install_mutex;
std::vector<std::unique_ptr<ProfileChoice>> g_choices;
const ProfileChoice *g_current = nullptr;  // the choice in force (profile_summary)
bool g_program_installed = false;          // a program installed one: start-up lookups keep it
std::atomic<const Profile *> g_profile{nullptr};

const Profile *put(ProfileChoice choice) {
  g_choices.push_back(std::make_unique<ProfileChoice>(std::move(choice)));
  g_current = g_choices.back().get();
  const Profile *p = g_current->profile ? &*g_current->profile : nullptr;
  g_profile.store(p, std::memory_order_release);
  return p;
}

}  // namespace

const Profile *install_profile(ProfileChoice choice) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  g_program_installed = true;
  return put(std::move(choice));
}

const Profile *install_startup_profile(ProfileChoice choice) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_program_installed) return g_profile.load(std::memory_order_relaxed);
  return put(std::move(choice));
}

const Profile *active_profile() { return g_profile.load(std::memory_order_acquire); }

std::string profile_summary() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_current) return "none yet (TEMPI has not started)";
  const ProfileChoice &c = *g_current;
  if (!c.profile) return "none: " + c.reason + "; built-in rules";
  const Profile &p = *c.profile;
  return c.path + " (measured " + (p.date.empty() ? "at an unknown date" : p.date) + " on " + p.machine.gpu + ", " +
         p.machine.mpi_library + ")";
}

}  // namespace tempi
