#include <catch2/catch.hpp>

#include "method.hpp"

using namespace tempi;

namespace {
Config small_pipeline() {
  Config c;
  c.pipeline_chunk = 1000;
  c.pipeline_threshold = 5000;
  return c;
}
}  // namespace

TEST_CASE("a requested method is used when the MPI library allows it", "[method]") {
  const Config c = small_pipeline();
  for (bool aware : {false, true}) {
    CHECK(choose_transfer(Method::OneShot, aware, 100, false, c).method == Method::OneShot);
    CHECK(choose_transfer(Method::Staged, aware, 100, false, c).method == Method::Staged);
  }
  CHECK(choose_transfer(Method::Device, true, 100, false, c).method == Method::Device);
}

TEST_CASE("the device method needs a CUDA-aware MPI", "[method]") {
  const Config c = small_pipeline();
  CHECK(choose_transfer(Method::Device, false, 100, false, c).method == Method::Staged);
  for (int64_t bytes : {int64_t(1), int64_t(1) << 20, int64_t(1) << 30})
    for (bool contiguous : {false, true})
      CHECK(choose_transfer(Method::Auto, false, bytes, contiguous, c).method != Method::Device);
}

TEST_CASE("auto: one-shot for small messages, device or staged for large ones", "[method]") {
  const Config c = small_pipeline();
  CHECK(choose_transfer(Method::Auto, true, 1024, false, c).method == Method::OneShot);
  CHECK(choose_transfer(Method::Auto, true, 64 << 10, false, c).method == Method::Device);
  CHECK(choose_transfer(Method::Auto, true, 64 << 20, false, c).method == Method::Device);
  // many messages in flight: one fused kernel into host memory beats the library's copies
  CHECK(choose_transfer(Method::Auto, true, 64 << 10, false, c, true).method == Method::OneShot);
  CHECK(choose_transfer(Method::Auto, true, 512 << 10, false, c, true).method == Method::OneShot);
  CHECK(choose_transfer(Method::Auto, true, 64 << 20, false, c, true).method == Method::Device);
  CHECK(choose_transfer(Method::Auto, true, 512 << 10, true, c, true).method == Method::Device);
  CHECK(choose_transfer(Method::Auto, false, 1024, false, c).method == Method::OneShot);
  CHECK(choose_transfer(Method::Auto, false, 1 << 20, false, c).method == Method::OneShot);
  CHECK(choose_transfer(Method::Auto, false, 64 << 20, false, c).method == Method::Staged);
  // contiguous data: passed as it is to a CUDA-aware library, one DMA copy otherwise
  CHECK(choose_transfer(Method::Auto, true, 1024, true, c).method == Method::Device);
  CHECK(choose_transfer(Method::Auto, false, 1024, true, c).method == Method::Staged);
}

TEST_CASE("staged messages at the threshold and above are pipelined", "[method]") {
  const Config c = small_pipeline();
  CHECK(choose_transfer(Method::Staged, false, 4999, false, c).chunk >= 4999);
  CHECK(choose_transfer(Method::Staged, false, 5000, false, c).chunk == 1000);
  CHECK(choose_transfer(Method::Staged, false, 123456, false, c).chunk == 1000);
  // the other methods move each message in one piece
  CHECK(choose_transfer(Method::OneShot, false, 123456, false, c).chunk >= 123456);
  CHECK(choose_transfer(Method::Device, true, 123456, false, c).chunk >= 123456);
}

TEST_CASE("methods have names", "[method]") {
  CHECK(std::string(to_string(Method::Device)) == "device");
  CHECK(std::string(to_string(Method::OneShot)) == "oneshot");
  CHECK(std::string(to_string(Method::Staged)) == "staged");
}
