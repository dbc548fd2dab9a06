#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "config.hpp"

using namespace tempi;

namespace {
Config parse(std::map<std::string, std::string> env) {
  return parse_config([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST_CASE("defaults when nothing is set", "[config]") {
  const Config c = parse({});
  CHECK_FALSE(c.disabled);
  CHECK(c.log_level == LogLevel::Warn);
  CHECK_FALSE(c.cuda_aware.has_value());
  CHECK(c.method == Method::Auto);
  CHECK(c.pipeline_chunk == 4 << 20);
  CHECK(c.pipeline_threshold == 8 << 20);
  CHECK_FALSE(c.eager_sends);
  CHECK(c.defer_pack == 0);
  CHECK(c.wait_by_polling);
}

TEST_CASE("values are parsed; invalid ones keep the default", "[config]") {
  const Config c = parse({{"TEMPI_DISABLE", "1"}, {"TEMPI_LOG_LEVEL", "debug"}, {"TEMPI_CUDA_AWARE", "no"},
                          {"TEMPI_METHOD", "staged"}, {"TEMPI_PIPELINE_CHUNK", "-5"}});
  CHECK(c.disabled);
  CHECK(c.log_level == LogLevel::Debug);
  CHECK(c.cuda_aware == false);
  CHECK(c.method == Method::Staged);
  CHECK(c.pipeline_chunk == 4 << 20);
  CHECK_FALSE(parse({{"TEMPI_DISABLE", "0"}}).disabled);
  CHECK(parse({{"TEMPI_EAGER_SENDS", "1"}}).eager_sends);
  CHECK_FALSE(parse({{"TEMPI_EAGER_SENDS", "yes please"}}).eager_sends);
  CHECK(parse({{"TEMPI_DEFER_PACK", "1"}}).defer_pack == 1);
  CHECK(parse({{"TEMPI_DEFER_PACK", "2"}}).defer_pack == 2);
  CHECK(parse({{"TEMPI_DEFER_PACK", "3"}}).defer_pack == 3);
  CHECK(parse({{"TEMPI_DEFER_PACK", "4"}}).defer_pack == 0);
  CHECK(parse({{"TEMPI_PROFILE", "/p.json"}}).profile == "/p.json");
  CHECK(parse({}).profile.empty());
  CHECK_FALSE(parse({{"TEMPI_WAIT", "sync"}}).wait_by_polling);
  CHECK(parse({{"TEMPI_WAIT", "poll"}}).wait_by_polling);
  CHECK(parse({{"TEMPI_WAIT", "spin"}}).wait_by_polling);
}

TEST_CASE("every knob is documented in docs/environment.md", "[config]") {
  std::ifstream f(TEMPI_DOCS_DIR "/environment.md");
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  for (const Knob &k : knobs()) {
    INFO(k.name);
    CHECK(ss.str().find(std::string("`") + k.name + "`") != std::string::npos);
  }
}
