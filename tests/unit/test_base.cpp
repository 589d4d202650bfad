// Unit tests for lib/dyn/base: the hand-written JSON writers match Json::dump() byte for byte;
// the virtual-clock EventQueue orders events and moves its clock as documented.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dyn/base/reserved_array.h"
#include "dyn/base/event_queue.h"
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

TEST_CASE("append_json_numbers writes what Json::dump writes for an array's members") {
  // Every digit count and the 8- and 16-digit piece edges, then enough hashes to fill the
  // writer's buffer several times.
  std::vector<uint64_t> v;
  for (uint64_t p = 1;; p *= 10) {
    v.insert(v.end(), {p - 1, p, p + 1});
    if (p == 10000000000000000000ull) break;
  }
  v.insert(v.end(), {99999999ull, 100000000ull, 9999999999999999ull, 10000000000000000ull, UINT64_MAX, 0});
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v.push_back(x >> (i % 64));
  }
  std::string s = "[";
  dyn::append_json_numbers(s, v);
  s += ']';
  CHECK(s == dyn::Json(v).dump());
  std::string none;
  dyn::append_json_numbers(none, {});
  CHECK(none.empty());
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

TEST_CASE("EventQueue pops by time, then kind, then insertion, and moves the clock forward only") {
  dyn::FakeClock clock(5);
  dyn::EventQueue<int> q(clock);
  CHECK(q.empty());
  CHECK(std::isinf(q.next_ms()));
  q.push(10, 1, 100);
  q.push(10, 0, 101);  // same instant, lower kind: first
  q.push(3, 2, 102);   // due before the clock's reading: runs "now" without moving it back
  q.push(10, 1, 103);  // same instant and kind as 100: after it
  q.push(20, 0, 104);
  CHECK(q.next_ms() == 3);
  std::vector<int> order;
  std::vector<double> clocks;
  q.run_until(10, [&](const auto& e) {
    order.push_back(e.arg);
    clocks.push_back(clock.now_ms());
    if (e.arg == 101) q.push(10, 2, 105);  // pushed inside the span: runs in it, after kind 1
  });
  CHECK(order == std::vector<int>{102, 101, 100, 103, 105});
  CHECK(clocks == std::vector<double>{5, 10, 10, 10, 10});
  CHECK(q.size() == 1);
  q.run_until(15, [&](const auto&) { FAIL("nothing is due by 15"); });
  CHECK(clock.now_ms() == 15);
  auto e = q.pop();
  CHECK(e.arg == 104);
  CHECK(e.t_ms == 20);
  CHECK(clock.now_ms() == 20);
  CHECK(q.empty());
}

TEST_CASE("ReservedArray: appends up to its capacity without moving, and moves as a whole") {
  dyn::ReservedArray<uint64_t> a(100000);
  CHECK(a.capacity() == 100000);
  const uint64_t* first = &a[0];
  for (uint64_t i = 0; i < 100000; ++i) a.push_back(i * 3);
  CHECK(a.size() == 100000);
  CHECK(&a[0] == first);  // growth never copies
  CHECK(a[99999] == 299997);
  dyn::ReservedArray<uint64_t> b(std::move(a));
  CHECK(b.size() == 100000);
  CHECK(b[12345] == 37035);
  CHECK(a.size() == 0);
  dyn::ReservedArray<uint64_t> none(0);
  CHECK(none.capacity() == 0);
}
