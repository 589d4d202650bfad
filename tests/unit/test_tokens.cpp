// Unit tests for lib/dyn/tokens: SPEC 4.1 check values, the 4-byte convention, rendering, synthesis.
#include <doctest/doctest.h>

#include <numeric>
#include <string>

#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"
#include "dyn/tokens/synthetic.h"

using namespace dyn::tokens;

TEST_CASE("SPEC 4.1 check values: tokens 0..127, block size 64") {
  std::vector<uint32_t> toks(128);
  std::iota(toks.begin(), toks.end(), 0u);
  auto blocks = block_hashes(toks, 64);
  REQUIRE(blocks.size() == 2);
  CHECK(blocks[0] == 3480597578098033343ULL);
  CHECK(blocks[1] == 3318286205056455972ULL);
  auto seq = sequence_hashes(blocks);
  CHECK(seq[0] == 3480597578098033343ULL);
  CHECK(seq[1] == 2575318956255022795ULL);
}

TEST_CASE("SPEC 4.1 check values: quick brown fox text, 225 tokens") {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  REQUIRE(text.size() == 900);
  auto toks = text_to_tokens(text);
  REQUIRE(toks.size() == 225);
  CHECK(toks[0] == 543516756u);
  auto blocks = block_hashes(toks, 64);
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0] == 14444594402189156925ULL);
  CHECK(blocks[1] == 12169449671096555218ULL);
  CHECK(blocks[2] == 16066903675813493844ULL);
  auto seq = sequence_hashes(blocks);
  CHECK(seq[1] == 2256195512600290951ULL);
  CHECK(seq[2] == 459716978981978031ULL);
  // A trailing partial block is hashed only when asked (replay traces).
  CHECK(block_hashes(toks, 64, true).size() == 4);
}

TEST_CASE("4-byte tokens: last token zero-padded") {
  auto t = text_to_tokens("abcde");
  REQUIRE(t.size() == 2);
  CHECK(t[1] == static_cast<uint32_t>('e'));
  CHECK(text_to_tokens("").empty());
}

TEST_CASE("render: chat messages extend as a prefix") {
  dyn::Json a =
      dyn::Json::parse(R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]})");
  dyn::Json b = a;
  b["messages"].push_back(dyn::Json::parse(R"({"role":"assistant","content":[{"type":"text","text":"hello"}]})"));
  std::string ra = render_request(a), rb = render_request(b);
  CHECK(ra == "system\nbe brief\nuser\nhi\n");
  CHECK(rb.rfind(ra, 0) == 0);
  CHECK(rb == ra + "assistant\nhello\n");
}

TEST_CASE("render: tools first, then instructions, then Responses input items") {
  dyn::Json r = dyn::Json::parse(R"({"tools":[{"type":"function","name":"shell"}],"instructions":"sys",
    "input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"run ls"}]},
             {"type":"function_call","name":"shell","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},
             {"type":"function_call_output","call_id":"c1","output":"a b"}]})");
  CHECK(render_request(r) ==
        "{\"type\":\"function\",\"name\":\"shell\"}\nsys\nuser\nrun ls\nfunction_call\nshell{\"cmd\":\"ls\"}\n"
        "function_call_output\na b\n");
}

TEST_CASE("render: Anthropic system blocks, tool_use and tool_result; completions prompt as is") {
  dyn::Json r = dyn::Json::parse(R"({"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2"}],
    "messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"p":1}}]},
                {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"data"}]}]})");
  CHECK(render_request(r) == "S1S2\nassistant\nRead{\"p\":1}\nuser\ndata\n");
  CHECK(render_request(dyn::Json::parse(R"({"prompt":"raw text"})")) == "raw text");
}

TEST_CASE("synthetic blocks: deterministic, exact size, printable, distinct heads") {
  auto a = block_text(7, 42, 16), b = block_text(7, 42, 16), c = block_text(7, 43, 16);
  CHECK(a == b);
  CHECK(a.size() == 64);
  CHECK(a != c);
  CHECK(a.substr(0, 3) != c.substr(0, 3));
  for (char ch : a) CHECK((ch >= 32 && ch < 127));
  std::vector<uint64_t> ids{1, 2, 3};
  auto p = synthetic_prompt(7, ids, 40, 16);
  CHECK(p.size() == 160);
  CHECK(p.substr(0, 64) == block_text(7, 1, 16));
  // Identical leading ids give byte-identical prefixes.
  std::vector<uint64_t> ids2{1, 2, 9};
  CHECK(synthetic_prompt(7, ids2, 40, 16).substr(0, 128) == p.substr(0, 128));
  // Too few ids (lenient mode): still exactly input_length tokens.
  std::vector<uint64_t> one{5};
  CHECK(synthetic_prompt(7, one, 50, 16).size() == 200);
}
