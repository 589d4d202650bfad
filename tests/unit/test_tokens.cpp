// Unit tests for lib/dyn/tokens: SPEC 4.1 check values, the 4-byte convention, rendering, synthesis.
#include <doctest/doctest.h>

#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
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

TEST_CASE("text_block_hashes: the block hashes of text_to_tokens, hashed in place") {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  CHECK(text_block_hashes(text, 64) ==
        std::vector<uint64_t>{14444594402189156925ULL, 12169449671096555218ULL, 16066903675813493844ULL});
  // Every length around a block edge and a token edge, with and without the partial block, and
  // another seed: the padded last token must hash as text_to_tokens lays it out.
  const std::string twice = text + text;
  for (size_t n : {0, 1, 3, 4, 5, 255, 256, 257, 259, 260, 511, 512, 513, 900, 901, 902, 903}) {
    const std::string_view t = std::string_view(twice).substr(0, n);
    for (bool partial : {false, true}) {
      CAPTURE(n);
      CAPTURE(partial);
      CHECK(text_block_hashes(t, 64, partial) == block_hashes(text_to_tokens(t), 64, partial));
      CHECK(text_block_hashes(t, 16, partial, 99) == block_hashes(text_to_tokens(t), 16, partial, 99));
    }
  }
}

TEST_CASE("TextBlockHasher: text_block_hashes of the pieces joined, however the text is cut") {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  for (size_t n : {size_t{0}, size_t{3}, size_t{256}, size_t{901}, text.size()}) {
    const std::string_view t = std::string_view(text).substr(0, n);
    // Pieces of every size from 1 byte to over a block, bytes appended one at a time as chars.
    for (size_t cut : {1, 2, 5, 63, 64, 255, 256, 257, 700}) {
      for (bool partial : {false, true}) {
        CAPTURE(n);
        CAPTURE(cut);
        CAPTURE(partial);
        TextBlockHasher h(64, 99);
        for (size_t at = 0; at < t.size(); at += cut) {
          if (cut == 1) h += t[at];
          else h += t.substr(at, cut);
        }
        CHECK(h.bytes() == t.size());
        CHECK(h.finish(partial) == text_block_hashes(t, 64, partial, 99));
      }
    }
  }
}

TEST_CASE("block hashes: the per-call seeded XXH3 values, under any seed, on both sides of 240 bytes") {
  // block_hashes derives the seed's secret once (XXH3_64bits_withSecretandSeed); hash_tokens
  // is XXH3_64bits_withSeed. Blocks of 59, 60, 61 and 64 tokens straddle XXH3's 240-byte switch
  // from the seed to the secret; adapter seeds are not the default.
  std::vector<uint32_t> toks(1000);
  for (uint32_t i = 0; i < toks.size(); ++i) toks[i] = i * 2654435761u;
  for (uint64_t seed : {kHashSeed, uint64_t{0}, uint64_t{99}, adapter_seed("lora-a")}) {
    for (uint32_t bs : {1u, 16u, 59u, 60u, 61u, 64u, 256u}) {
      CAPTURE(seed);
      CAPTURE(bs);
      const auto got = block_hashes(toks, bs, /*include_partial=*/true, seed);
      REQUIRE(got.size() == (toks.size() + bs - 1) / bs);
      for (size_t i = 0; i < got.size(); ++i)
        CHECK(got[i] ==
              hash_tokens(std::span<const uint32_t>(toks).subspan(i * bs, std::min<size_t>(bs, toks.size() - i * bs)),
                          seed));
    }
  }
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

namespace {

// render_request_dom of `text` parsed by simdjson; "<refused>" when simdjson refuses it,
// "<ambiguous>" when the renderer declines.
std::string render_dom(const std::string& text) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  if (p.parse(text).get(e) != simdjson::SUCCESS) return "<refused>";
  return render_request_dom(e).value_or("<ambiguous>");
}

// The block hashes render_request_dom makes of `text` as it renders it (TextBlockHasher), at
// `block_size` tokens, the partial block included; empty when it declines.
std::vector<uint64_t> hashed_dom(const std::string& text, uint32_t block_size) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  TextBlockHasher h(block_size);
  if (p.parse(text).get(e) != simdjson::SUCCESS || !render_request_dom(e, h)) return {};
  return h.finish(true);
}

}  // namespace

TEST_CASE("render: a type of another kind is ignored, not an error") {
  // Before, value("type", "") threw on a number and dyn-route answered 500.
  CHECK(render_request(dyn::Json::parse(R"({"messages":[{"role":1,"type":2,"content":"x"}]})")) == "\nx\n");
  CHECK(render_request(dyn::Json::parse(R"({"messages":[{"role":"user","content":[{"type":7}]}]})")) == "user\n\n");
  CHECK(render_request(dyn::Json::parse(R"({"messages":[{"role":"assistant","tool_calls":[3,{"function":4}]}]})")) ==
        "assistant\n\n");
}

TEST_CASE("render_request_dom: the same text as render_request on crafted bodies") {
  const char* bodies[] = {
      R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]})",
      R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":
         {"n":{"type":"number","minimum":-0,"maximum":1e2,"default":0.1,"x":[1.0,-1.5e-7,1e16,123456789.125,
         18446744073709551615,-9223372036854775808,true,false,null]}}}}}],
         "messages":[{"role":"user","content":"esc \" \\ \/ \b \f \n \r \t \u0001 \u001f \u007f \u00e9 \ud83d\ude00"}]})",
      R"({"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2"}],
         "messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"p":1,"q":{}}}]},
                     {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"d"}]}]},
                     {"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"redacted"}]}]})",
      R"({"instructions":"sys","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"ls"}]},
         {"type":"function_call","name":"shell","arguments":{"cmd":["ls","-l"]},"call_id":"c1"},
         {"type":"custom_tool_call","name":"patch","input":"*** Begin"},
         {"type":"function_call_output","call_id":"c1","output":[{"type":"output_text","text":"a b"}]},"bare"]})",
      R"({"input":"just text"})",
      R"({"prompt":["a","b",3,"c"]})",
      R"({"prompt":"p","messages":[{"role":"user","content":"m"}]})",
      R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function",
         "function":{"name":"get","arguments":"{\"a\":1}"}},{"name":"bare","arguments":{"b":[]}}]}]})",
      R"({"messages":[{"role":1,"type":2,"content":"x"},[],7,"s",{"content":{"type":"text","text":"obj"}}]})",
      R"({"model":"m","model":"n","messages":[{"role":"user","content":"top-level repeats are not rendered"}]})",
      R"([1,2])",
      R"("text")",
  };
  for (const char* b : bodies) {
    INFO(b);
    CHECK(render_dom(b) == render_request(dyn::Json::parse(b)));
  }
}

TEST_CASE("render_request_dom: declines where a Json tree keeps one of two members") {
  CHECK(render_dom(R"({"messages":[{"role":"user","role":"system","content":"x"}]})") == "<ambiguous>");
  CHECK(render_dom(R"({"tools":[{"a":1,"b":2,"a":3}],"messages":[]})") == "<ambiguous>");
  CHECK(render_dom(R"({"messages":[],"messages":[]})") == "<ambiguous>");
}

TEST_CASE("render_request_dom: the same text as render_request on every object in the fixtures and data") {
  // Each JSON document and JSONL row as stored, and every object nested in it printed compactly
  // (requests sit inside captures, traces and AIPerf exports). simdjson may refuse what nlohmann
  // reads (a UTF-8 BOM): dyn-route then reads a Json tree.
  namespace fs = std::filesystem;
  size_t compared = 0, refused = 0;
  auto compare = [&](const std::string& text, const dyn::Json& j) {
    std::string d = render_dom(text);
    if (d == "<refused>") ++refused;
    else CHECK(d == render_request(j));
    if (d != "<refused>" && d != "<ambiguous>") CHECK(hashed_dom(text, 4) == text_block_hashes(d, 4, true));
    ++compared;
  };
  std::function<void(const dyn::Json&)> walk = [&](const dyn::Json& j) {
    if (j.is_object()) compare(j.dump(), j);
    if (j.is_structured())
      for (const auto& x : j) walk(x);
  };
  for (const auto& root : {"tests/fixtures", "data"}) {
    for (const auto& f : fs::recursive_directory_iterator(fs::path(DYN_SOURCE_DIR) / root)) {
      auto ext = f.path().extension();
      if (!f.is_regular_file() || (ext != ".json" && ext != ".jsonl") || f.file_size() > (1 << 20)) continue;
      INFO(f.path().string());
      std::ifstream in(f.path());
      std::stringstream ss;
      ss << in.rdbuf();
      std::vector<std::string> texts{ss.str()};
      if (ext == ".jsonl") {
        texts.clear();
        for (std::string line; std::getline(ss, line);) texts.push_back(line);
      }
      for (const auto& t : texts) {
        dyn::Json j = dyn::Json::parse(t, nullptr, false);
        if (j.is_discarded()) continue;
        compare(t, j);
        walk(j);
      }
    }
  }
  CHECK(compared > 1000);
  CHECK(refused < 5);
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

TEST_CASE("InfiniteCache::add by id prefix counts what add_sequence counts on the engine blocks") {
  // Rows share leading ids from a small pool and end anywhere, inside an id or past their ids, so
  // an id prefix is seen with some of its pieces before others.
  std::mt19937_64 rng(54);
  for (auto [ids_bs, engine_bs] : {std::pair{512u, 64u}, {256u, 64u}, {64u, 64u}, {48u, 16u}, {16u, 64u}}) {
    CAPTURE(ids_bs);
    CAPTURE(engine_bs);
    InfiniteCache by_id, by_block;
    uint64_t hits = 0;
    for (int row = 0; row < 400; ++row) {
      std::vector<uint64_t> ids;
      const size_t n = 1 + rng() % 12;
      for (size_t k = 0; k < n; ++k) ids.push_back(k < 3 ? rng() % 3 : rng() % 40);
      const uint64_t length = 1 + rng() % (ids.size() * ids_bs + ids_bs);
      const uint64_t want = by_block.add_sequence(sequence_from_ids(ids, ids_bs, false, length, engine_bs), engine_bs);
      CHECK(by_id.add(ids, ids_bs, length, engine_bs) == want);
      hits += want;
    }
    CHECK(hits > 0);  // the rows did share blocks
  }
}
