// Unit tests for lib/dyn/io: gzip readers (cases 23, 24), malformed rows, segment writer.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <simdjson.h>
#include <zlib.h>

#include "dyn/base/error.h"
#include "dyn/io/jsonl.h"
#include "dyn/io/line_reader.h"
#include "dyn/io/segment_writer.h"

using namespace dyn::io;

namespace {
std::string repo(const std::string& rel) { return std::string(DYN_SOURCE_DIR) + "/" + rel; }
std::vector<std::string> read_all(const std::vector<std::string>& paths) {
  LineReader r(paths);
  Line l;
  std::vector<std::string> out;
  while (r.next(l)) out.emplace_back(l.text);
  return out;
}
std::string tmpdir() {
  char tmpl[] = "/tmp/dyn-io-test.XXXXXX";
  return mkdtemp(tmpl);
}
}  // namespace

TEST_CASE("case 24: multi-member gzip yields all 5 rows") {
  auto rows = read_all({repo("tests/fixtures/cases/24-gzip-multi-member/trace.jsonl.gz")});
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].find("req-1") != std::string::npos);
  CHECK(rows[4].find("req-5") != std::string::npos);
}

TEST_CASE("case 23: truncated gzip yields the 3 complete rows; complete file yields 5") {
  LineReader r({repo("tests/fixtures/cases/23-gzip-truncated-tail/trace.jsonl.gz")});
  Line l;
  std::vector<std::string> rows;
  while (r.next(l)) rows.emplace_back(l.text);
  CHECK(rows.size() == 3);
  CHECK(r.truncated_files() == 1);
  for (auto& row : rows) CHECK(dyn::Json::accept(row));
  LineReader c({repo("tests/fixtures/cases/23-gzip-truncated-tail/complete.jsonl.gz")});
  int n = 0;
  while (c.next(l)) ++n;
  CHECK(n == 5);
  CHECK(c.truncated_files() == 0);
  LineReader strict({repo("tests/fixtures/cases/23-gzip-truncated-tail/trace.jsonl.gz")}, LineReaderOptions{true});
  CHECK_THROWS_AS(
      [&] {
        while (strict.next(l)) {
        }
      }(),
      dyn::Fatal);
}

TEST_CASE("gzip: members with zero padding between them all read; a CRC-32 mismatch is reported, strict throws") {
  std::string d = tmpdir();
  auto member = [](const std::string& text) {  // one complete gzip member
    std::string f = tmpdir() + "/m.gz";
    gzFile g = gzopen(f.c_str(), "wb");
    gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
    gzclose(g);
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string a = member("{\"a\":1}\n{\"a\":2}\n"), b = member("{\"b\":3}\n");
  { std::ofstream(d + "/padded.gz", std::ios::binary) << a << std::string(7, '\0') << b; }
  CHECK(read_all({d + "/padded.gz"}) == std::vector<std::string>{"{\"a\":1}", "{\"a\":2}", "{\"b\":3}"});
  std::string bad = a;
  bad[bad.size() - 8] ^= 0x5a;  // the trailer's CRC-32 (then ISIZE, 4 bytes each)
  { std::ofstream(d + "/badcrc.gz", std::ios::binary) << bad << b; }
  LineReader r({d + "/badcrc.gz"});
  Line l;
  while (r.next(l)) {
  }
  CHECK(r.truncated_files() == 1);
  LineReader strict({d + "/badcrc.gz"}, LineReaderOptions{true});
  CHECK_THROWS_AS(
      [&] {
        while (strict.next(l)) {
        }
      }(),
      dyn::Fatal);
}

TEST_CASE("CRLF, no final newline, several files in order, line numbers per file") {
  std::string d = tmpdir();
  { std::ofstream(d + "/a") << "x\r\ny\r\nz"; }
  { std::ofstream(d + "/b") << "w\n"; }
  LineReader r({d + "/a", d + "/b"});
  Line l;
  std::vector<std::string> got;
  std::vector<uint64_t> nums;
  while (r.next(l)) got.emplace_back(l.text), nums.push_back(l.number);
  CHECK(got == std::vector<std::string>{"x", "y", "z", "w"});
  CHECK(nums == std::vector<uint64_t>{1, 2, 3, 1});
  CHECK_THROWS_AS(LineReader({d + "/missing"}).next(l), dyn::Fatal);
}

TEST_CASE("JSONL: malformed and NUL-padded lines are skipped and counted; u64 exact; envelopes left to records") {
  std::string d = tmpdir();
  {
    std::ofstream f(d + "/t.jsonl", std::ios::binary);
    f << "{\"a\":18446744073709551615}\n";
    f << "{bad json\n";
    f << std::string(8, '\0') << "\n";
    f << "\n";
    f << "{\"timestamp\":5,\"event\":{\"event_type\":\"request_end\",\"x\":1}}\n";
  }
  JsonlReader r({d + "/t.jsonl"});
  dyn::Json row;
  std::string where;
  REQUIRE(r.next(row, &where));
  CHECK(row["a"].get<uint64_t>() == 18446744073709551615ULL);
  CHECK(row.dump() == "{\"a\":18446744073709551615}");
  CHECK(where == d + "/t.jsonl:1");
  REQUIRE(r.next(row, &where));
  CHECK(row["event"]["event_type"] == "request_end");  // io reads lines; records::RowReader unwraps
  CHECK(where == d + "/t.jsonl:5");
  CHECK_FALSE(r.next(row));
  CHECK(r.malformed() == 2);
  CHECK(r.rows() == 2);
}

TEST_CASE("JSONL fast path (simdjson): same rows, skips and counts as the Json path") {
  std::string d = tmpdir();
  {
    std::ofstream f(d + "/t.jsonl", std::ios::binary);
    f << "{\"a\":18446744073709551615,\"b\":[-3,2.5,\"s\",true,null],\"c\":{\"z\":1,\"y\":0}}\n";
    f << "{bad json\n";
    f << std::string(8, '\0') << "\n";
    f << "[1,2]\n";
    f << "  \n";
    f << "{\"timestamp\":5,\"event\":{\"event_type\":\"request_end\",\"x\":1}}\n";
    f << "{\"timestamp\":5,\"event\":{\"x\":1},\"event_type\":\"e\"}\n";
  }
  JsonlReader fast({d + "/t.jsonl"}), slow({d + "/t.jsonl"});
  simdjson::dom::object obj;
  dyn::Json row;
  std::string wf, ws;
  int n = 0;
  while (fast.next_dom(obj, &wf)) {
    REQUIRE(slow.next(row, &ws));
    CHECK(wf == ws);
    dyn::Json conv = dyn::io::to_json(obj);
    CHECK(conv.dump() == row.dump());  // key order, u64 exactness, signed/unsigned, floats
    CHECK(conv == row);
    ++n;
  }
  CHECK_FALSE(slow.next(row));
  CHECK(n == 3);
  CHECK(fast.rows() == 3);
  CHECK(fast.malformed() == slow.malformed());
  CHECK(fast.malformed() == 3);
}

TEST_CASE("segment writer: one gzip member per flush, readable after each flush, rolls by lines") {
  std::string d = tmpdir();
  SegmentWriterOptions o;
  o.prefix = d + "/trace";
  o.flush_interval_ms = 0;
  o.roll_lines = 3;
  {
    SegmentWriter w(o);
    w.write_line("{\"n\":1}");
    w.write_line("{\"n\":2}");
    w.flush();
    CHECK(read_all({d + "/trace.000000.jsonl.gz"}).size() == 2);
    w.write_line("{\"n\":3}");  // reaches 3 lines: flushed and rolled
    w.write_line("{\"n\":4}");
  }
  CHECK(read_all({d + "/trace.000000.jsonl.gz"}).size() == 3);
  CHECK(read_all({d + "/trace.000001.jsonl.gz"}) == std::vector<std::string>{"{\"n\":4}"});
  // A new writer continues after the existing segments.
  {
    SegmentWriter w(o);
    w.write_line("{\"n\":5}");
  }
  CHECK(read_all({d + "/trace.000002.jsonl.gz"}).size() == 1);
  // Plain JSONL format writes the prefix itself.
  o.gzip = false;
  o.prefix = d + "/plain.jsonl";
  {
    SegmentWriter w(o);
    w.write_line("{}");
  }
  CHECK(read_all({d + "/plain.jsonl"}).size() == 1);
}

TEST_CASE(
    "segment writer: a row an interval after the row before it is written at once; closer rows wait for the flusher") {
  std::string d = tmpdir();
  SegmentWriterOptions o;
  o.prefix = d + "/timed";
  o.flush_interval_ms = 2000;  // long, so a loaded machine's late wake-ups stay well inside it
  SegmentWriter w(o);
  const std::string seg = d + "/timed.000000.jsonl.gz";
  auto rows_within = [&](size_t n, double seconds) {  // polls until the segment has n rows
    for (int i = 0; i < seconds * 100; ++i) {
      if (read_all({seg}).size() >= n) return true;
      usleep(10'000);
    }
    return false;
  };
  w.write_line("{\"n\":1}");  // the first row: written at once
  CHECK(read_all({seg}).size() == 1);
  usleep(500'000);
  w.write_line("{\"n\":2}");  // within an interval of row 1: it waits for the flusher
  const auto row2 = std::chrono::steady_clock::now();
  CHECK(read_all({seg}).size() == 1);
  CHECK(rows_within(2, 8));  // flushed an interval after row 1, about 1.5 s after row 2
  // An interval after row 2 but well within one of that flush: written at once all the same.
  std::this_thread::sleep_until(row2 + std::chrono::milliseconds(2100));
  w.write_line("{\"n\":3}");
  CHECK(read_all({seg}).size() == 3);
}

TEST_CASE("a line over max_line_bytes is skipped in constant memory, counted, and later lines flow") {
  std::string path = "/tmp/dyn_test_io_long_lines_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream f(path);
    f << "{\"a\":1}\n"
      << std::string(5000, 'x') << "\n{\"a\":2}\n"
      << std::string(3000, '[') << "]\n{\"a\":3}\n"
      << std::string(6000, 'y');  // an over-long last line without a newline
  }
  JsonlOptions o;
  o.lines.max_line_bytes = 1000;
  JsonlReader r({path}, o);
  dyn::Json row;
  std::vector<int> got;
  std::vector<std::string> where;
  std::string w;
  while (r.next(row, &w)) {
    got.push_back(row["a"].get<int>());
    where.push_back(w);
  }
  CHECK(got == std::vector<int>{1, 2, 3});
  CHECK(where.back() == path + ":5");   // line numbers still count the skipped lines
  CHECK(r.reader().long_lines() == 3);  // 5000 x, 3000 '[' (over the limit too), 6000 y
  CHECK(r.malformed() == 3);
  std::remove(path.c_str());
}

TEST_CASE("JSONL: rows nested deeper than kMaxJsonDepth are rejected without recursion") {
  std::string path = "/tmp/dyn_test_io_deep_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream f(path);
    f << "{\"a\":" << std::string(200000, '[') << "\n{\"a\":2}\n";
  }
  JsonlReader r({path});
  dyn::Json row;
  REQUIRE(r.next(row));
  CHECK(row["a"] == 2);
  CHECK(r.malformed() == 1);
  std::remove(path.c_str());
}

TEST_CASE("segment writer on a full disk (/dev/full): drop_on_error drops and counts, default throws") {
  SegmentWriterOptions o;
  o.prefix = "/dev/full";
  o.gzip = false;
  o.flush_interval_ms = 0;
  o.buffer_bytes = 1;  // flush every row
  {
    o.drop_on_error = true;
    SegmentWriter w(o);
    w.write_line("{\"a\":1}");
    w.write_line("{\"a\":2}");
    CHECK(w.dropped_rows() == 2);
  }
  o.drop_on_error = false;
  SegmentWriter w(o);
  CHECK_THROWS_AS(w.write_line("{\"a\":1}"), dyn::Fatal);
}

TEST_CASE("case 42: a UTF-8 BOM before row 1 is skipped, per file, also gzip and no-newline files") {
  std::string c42 = std::string(DYN_SOURCE_DIR) + "/tests/fixtures/cases/42-jsonl-utf8-bom/";
  auto bom = read_all({c42 + "workload-bom-crlf.jsonl"});
  auto plain = read_all({c42 + "workload-plain.jsonl"});
  REQUIRE(plain.size() == 3);
  CHECK(bom == plain);  // the same 3 rows, byte for byte (BOM and CR gone)
  LineReader twice({c42 + "trace-bom.jsonl", c42 + "trace-bom.jsonl"});
  Line l;
  int n = 0;
  while (twice.next(l)) {
    CHECK(l.text.substr(0, 1) == "{");
    ++n;
  }
  CHECK(n == 6);
  CHECK(twice.boms() == 2);
  auto csv = read_all({c42 + "azure-bom.csv"});
  REQUIRE(csv.size() == 3);
  CHECK(csv[0].rfind("TIMESTAMP", 0) == 0);
  // Only the first line's BOM is an encoding mark; a BOM-only file is one empty line; one
  // inside a later line is data and stays.
  std::string d = tmpdir();
  std::string f = d + "/b.jsonl";
  {
    std::ofstream o(f, std::ios::binary);
    o << "\xEF\xBB\xBF{\"a\":1}\n\xEF\xBB\xBF{\"a\":2}";
  }
  auto rows = read_all({f});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == "{\"a\":1}");
  CHECK(rows[1] == "\xEF\xBB\xBF{\"a\":2}");
  std::remove(f.c_str());
  JsonlReader jr({c42 + "trace-bom.jsonl"});
  dyn::Json row;
  n = 0;
  while (jr.next(row)) ++n;
  CHECK(n == 3);
  CHECK(jr.malformed() == 0);
}

TEST_CASE("issue 21.8: an integer past 64 bits is reported naming its field; the summary counts rows and NUL bytes") {
  CHECK(out_of_range_message(R"({"timestamp":0,"request":{"input_tokens":18446744073709551616}})") ==
        "'request.input_tokens' is out of range (integers must be within 64 bits)");
  CHECK(out_of_range_message(R"({"hash_ids":[1,99999999999999999999999]})") ==
        "'hash_ids[1]' is out of range (integers must be within 64 bits)");
  std::string d = tmpdir();
  std::string f = d + "/r.jsonl";
  {
    std::ofstream o(f, std::ios::binary);
    o << "{\"a\":1}\n{\"input_length\":18446744073709551616}\n" << std::string(5, '\0') << "\n{\"a\":2}\n";
  }
  JsonlReader r({f});
  simdjson::dom::object obj;
  int n = 0;
  while (r.next_dom(obj)) ++n;
  CHECK(n == 2);
  CHECK(r.rows() == 2);
  CHECK(r.malformed() == 2);
  CHECK(r.out_of_range() == 1);
  CHECK(r.nul_bytes() == 5);
  std::remove(f.c_str());
}
