// Unit tests for lib/dyn/base: the hand-written JSON writers match Json::dump() byte for byte.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "dyn/base/json.h"
#include "dyn/base/json_write.h"
#include "dyn/base/json_limits.h"

TEST_CASE("append_json_number(double) writes what Json::dump writes") {
  std::mt19937_64 rng(7);
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                0.5,
                                1e-5,
                                1e-4,
                                123456789012345.0,
                                1234567890123456.0,
                                1e15,
                                1e16,
                                1e17,
                                1e21,
                                1e300,
                                5e-324,
                                0.1 + 0.2,
                                138.38011373264,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity()};
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(unit(rng) * std::pow(10.0, static_cast<int>(rng() % 40) - 20));
    double bits;
    uint64_t b = rng();
    std::memcpy(&bits, &b, sizeof bits);
    values.push_back(bits);
    values.push_back(std::round(unit(rng) * 1e6) / 1000.0);
  }
  for (double v : values) {
    std::string s;
    dyn::append_json_number(s, v);
    REQUIRE_MESSAGE(s == dyn::Json(v).dump(), "value bits ", v);
  }
}

TEST_CASE("append_json_number(integers) and append_json_string write what Json::dump writes") {
  for (uint64_t v : {uint64_t{0}, uint64_t{7}, uint64_t{18446744073709551615ull}}) {
    std::string s;
    dyn::append_json_number(s, v);
    CHECK(s == dyn::Json(v).dump());
  }
  for (int64_t v : {int64_t{-1}, std::numeric_limits<int64_t>::min(), int64_t{42}}) {
    std::string s;
    dyn::append_json_number(s, v);
    CHECK(s == dyn::Json(v).dump());
  }
  std::string all;
  for (int c = 1; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  for (std::string v : {std::string(), std::string("plain"), std::string("q\"b\\s/"), all,
                        std::string("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80"), std::string("a\0b", 3)}) {
    std::string s;
    dyn::append_json_string(s, v);
    CHECK(s == dyn::Json(v).dump());
  }
}

TEST_CASE("json_too_deep counts nesting outside strings only") {
  CHECK_FALSE(dyn::json_too_deep(R"({"a":[1,{"b":[]}]})", 4));
  CHECK(dyn::json_too_deep(R"({"a":[1,{"b":[]}]})", 3));
  // Brackets inside strings (escaped quotes included) do not count.
  CHECK_FALSE(dyn::json_too_deep(R"({"a":"[[[[{{{{\"[[[["})", 1));
  std::string deep(100000, '[');
  CHECK(dyn::json_too_deep(deep));
  CHECK_FALSE(dyn::json_too_deep(std::string(dyn::kMaxJsonDepth, '[') + std::string(dyn::kMaxJsonDepth, ']')));
  CHECK(dyn::json_too_deep(std::string(dyn::kMaxJsonDepth + 1, '{')));
  CHECK_FALSE(dyn::json_too_deep("\xff\xfe not json at all"));
}

TEST_CASE("valid_utf8 accepts well-formed UTF-8 only (what Json::dump accepts)") {
  CHECK(dyn::valid_utf8("plain ascii"));
  CHECK(dyn::valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(dyn::valid_utf8("ab\xff\xfe"));
  CHECK_FALSE(dyn::valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(dyn::valid_utf8("\xed\xa0\x80"));      // surrogate
  CHECK_FALSE(dyn::valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(dyn::valid_utf8("\xe2\x82"));          // truncated
  // Agreement with nlohmann: whatever valid_utf8 accepts, dump() prints without throwing.
  for (const char* s : {"ok", "caf\xc3\xa9", "ab\xff", "\xed\xa0\x80", "\xe2\x82"}) {
    bool dump_ok = true;
    try {
      (void)dyn::Json(std::string(s)).dump();
    } catch (const std::exception&) {
      dump_ok = false;
    }
    CHECK(dump_ok == dyn::valid_utf8(s));
  }
}
