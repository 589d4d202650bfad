// Unit tests for lib/dyn/records: the envelope rule (SPEC 5), RowReader (one reader, one
// malformed-row policy for every tool), the one percentile (SPEC 7).
#include <doctest/doctest.h>

#include <simdjson.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/records/percentile.h"
#include "dyn/records/reader.h"

using dyn::Json;
using namespace dyn::records;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  char tmpl[] = "/tmp/dyn-records-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/" + name, std::ios::binary) << text;
  return dir + "/" + name;
}

// The rule on both representations: the unwrapped row's compact text, or "" when it is no envelope.
std::string unwrapped_json(const std::string& line) {
  Json row = Json::parse(line);
  const Json& inner = unwrap_envelope(row);
  return &inner == &row ? "" : inner.dump();
}
std::string unwrapped_dom(const std::string& line) {
  simdjson::dom::parser p;
  simdjson::dom::object row;
  REQUIRE(p.parse(line).get_object().get(row) == simdjson::SUCCESS);
  if (!unwrap_envelope(row)) return "";
  return simdjson::minify(row);
}

}  // namespace

TEST_CASE("envelope rule (SPEC 5): timestamp + object event, no event_type; extra members ignored") {
  struct Case {
    const char* line;
    const char* event;  // "" = not an envelope
  };
  const Case cases[] = {
      {R"({"timestamp":5,"event":{"event_type":"request_end"}})", R"({"event_type":"request_end"})"},
      {R"({"event":{"x":1},"timestamp":0.5})", R"({"x":1})"},
      // Unknown members of the envelope are ignored like any unknown field (the four copies this
      // rule replaced disagreed here: io's unwrapped only rows of at most three members).
      {R"({"timestamp":5,"event":{"x":1},"writer":"dynamo","seq":7})", R"({"x":1})"},
      // A record is never an envelope: one that carries an "event" member stays itself.
      {R"({"timestamp":5,"event":{"x":1},"event_type":"tool_end"})", ""},
      {R"({"timestamp":5,"event":"started"})", ""},
      {R"({"timestamp":5,"event":[1]})", ""},
      {R"({"event":{"x":1}})", ""},
      {R"({"timestamp":5})", ""},
      {R"({"event_type":"request_end","event_time_unix_ms":1})", ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    CHECK(unwrapped_json(c.line) == c.event);
    CHECK(unwrapped_dom(c.line) == c.event);
  }
  const Json arr = Json::array({1});
  CHECK(&unwrap_envelope(arr) == &arr);  // a non-object is returned as is
}

TEST_CASE("RowReader: envelopes unwrapped on both paths; bad rows named, counted, good rows flow") {
  const std::string path =
      write_file("t.jsonl",
                 "{\"timestamp\":5,\"event\":{\"event_type\":\"request_end\",\"n\":18446744073709551615}}\n"
                 "{bad json\n"
                 "\n"
                 "{\"event_type\":\"tool_end\",\"event\":{\"x\":1},\"timestamp\":1}\n"
                 "[1,2]\n"
                 "{\"timestamp\":1,\"note\":\"\xff\"}\n"
                 "{\"timestamp\":9,\"event\":{\"n\":2},\"extra\":true}\n");
  RowReader slow({path}), fast({path});
  Json row;
  simdjson::dom::object obj;
  std::string ws, wf;
  std::vector<std::string> got;
  std::vector<bool> env;
  while (fast.next_dom(obj, &wf)) {
    REQUIRE(slow.next(row, &ws));
    CHECK(ws == wf);
    CHECK(slow.enveloped() == fast.enveloped());
    CHECK(dyn::io::to_json(obj) == row);
    got.push_back(ws.substr(ws.rfind(':') + 1) + " " + row.dump());
    env.push_back(fast.enveloped());
  }
  CHECK_FALSE(slow.next(row));
  CHECK(got == std::vector<std::string>{R"(1 {"event_type":"request_end","n":18446744073709551615})",
                                        R"(4 {"event_type":"tool_end","event":{"x":1},"timestamp":1})",
                                        R"(7 {"n":2})"});
  CHECK(env == std::vector<bool>{true, false, true});
  CHECK(fast.rows() == 3);
  CHECK(fast.malformed() == 3);  // malformed, not an object, invalid UTF-8
  CHECK(slow.malformed() == 3);
}

TEST_CASE("RowReader: a caller's own scanner takes lines, the rest parse as next_dom would") {
  const std::string path = write_file("s.jsonl", "{\"a\":1}\n{\"timestamp\":1,\"event\":{\"b\":2}}\n");
  RowReader r({path});
  std::string_view text;
  REQUIRE(r.next_line(text));
  CHECK(text == "{\"a\":1}");
  r.accept_line();
  REQUIRE(r.next_line(text));
  simdjson::dom::object obj;
  REQUIRE(r.parse_line_dom(obj));
  CHECK(r.enveloped());
  CHECK(simdjson::minify(obj) == "{\"b\":2}");
  CHECK(r.line().number == 2);
  CHECK_FALSE(r.next_line(text));
  CHECK(r.rows() == 2);
}

TEST_CASE("percentile_linear is NumPy's linear method, its two-sided lerp included (SPEC 7)") {
  const std::vector<double> v{1, 2, 3, 4};
  CHECK(percentile_linear(v, 50) == 2.5);
  CHECK(percentile_linear(v, 25) == 1.75);
  CHECK(percentile_linear(v, 0) == 1);
  CHECK(percentile_linear(v, 100) == 4);
  CHECK(percentile_linear({7}, 90) == 7);
  // np.percentile([0.1, 0.7, 3.3, 1e16], p) with NumPy 1.24: the one-sided a + (b - a) * t that
  // dyn-trace stats used gave 1.9999999999999998, 7000000000000002.0 and 9700000000000002.0.
  const std::vector<double> w{0.1, 0.7, 3.3, 1e16};
  CHECK(percentile_linear(w, 50) == 2.0);
  CHECK(percentile_linear(w, 90) == 7000000000000003.0);
  CHECK(percentile_linear(w, 99) == 9699999999999998.0);
  CHECK(percentile_linear(w, 25) == 0.5499999999999999);
}
