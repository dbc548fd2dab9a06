// Shared-memory blocks (core/shared_blob.hpp): what is written is read back byte for byte,
// a block is created once, a reader that expects another size or a missing block gets an
// error instead of bytes, and a removed block is gone.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <random>
#include <vector>

#include "shared_blob.hpp"

using namespace tempi;

TEST_CASE("a block reads back as written, and is created once", "[shared_blob]") {
  std::mt19937_64 rng(20261124);
  const uint64_t nonce = rng();
  for (const size_t bytes : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(300000)}) {
    const std::string name = shared_blob_name(int32_t(getpid()), nonce, bytes);
    std::vector<unsigned char> data(bytes), back(bytes, 0);
    for (unsigned char &c : data) c = static_cast<unsigned char>(rng());
    INFO(bytes << " bytes as " << name);
    REQUIRE(write_shared_blob(name, data.data(), bytes) == 0);
    CHECK(write_shared_blob(name, data.data(), bytes) == EEXIST);
    CHECK(read_shared_blob(name, back.data(), bytes) == 0);
    CHECK(back == data);
    std::vector<unsigned char> bigger(bytes + 1);
    CHECK(read_shared_blob(name, bigger.data(), bytes + 1) == EBADMSG);
    remove_shared_blob(name);
    CHECK(read_shared_blob(name, back.data(), bytes) == ENOENT);
  }
}

TEST_CASE("names tell processes, nonces and serials apart", "[shared_blob]") {
  const std::string a = shared_blob_name(12, 0xabcdefull, 1);
  CHECK(a == "/tempi-plan-12-0000000000abcdef-1");
  CHECK(shared_blob_name(13, 0xabcdefull, 1) != a);
  CHECK(shared_blob_name(12, 0xabcdeeull, 1) != a);
  CHECK(shared_blob_name(12, 0xabcdefull, 2) != a);
}
