// Unit tests for lib/dyn/engine timing profiles (SPEC 8): the .npz reader, the three profile
// forms on the shipped files and on malformed ones, interpolation, the parametric model, and the
// engine stepping with a profile.
#include <doctest/doctest.h>

#include <zip.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dyn/engine/engine.h"
#include "dyn/engine/npz.h"
#include "dyn/engine/profile.h"

using namespace dyn::engine;
namespace fs = std::filesystem;

namespace {

const std::string kShipped = std::string(DYN_SOURCE_DIR) + "/data/silicon/profiles/h200_llama31_8b_fp8_tp1_vllm";

// One .npy member: float64 (or int64) little-endian, C order, NumPy format 1.0.
struct Member {
  std::string name;
  std::vector<size_t> shape;
  std::vector<double> values;
  bool as_int = false;
};

std::string npy_bytes(const Member& m) {
  std::string shape = "(";
  for (size_t d : m.shape) shape += std::to_string(d) + (m.shape.size() == 1 ? ",)" : ", ");
  if (m.shape.size() != 1) {
    if (!m.shape.empty()) shape.resize(shape.size() - 2);
    shape += ")";
  }
  std::string header =
      std::string("{'descr': '") + (m.as_int ? "<i8" : "<f8") + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (double v : m.values) {
    char b[8];
    if (m.as_int) {
      const int64_t i = static_cast<int64_t>(v);
      std::memcpy(b, &i, 8);
    } else {
      std::memcpy(b, &v, 8);
    }
    out.append(b, 8);
  }
  return out;
}

// Writes an .npz (zip, deflated like numpy.savez_compressed) of `members` to a temporary path.
std::string write_npz(const std::vector<Member>& members, const std::string& name) {
  const std::string path = (fs::temp_directory_path() / ("dyn-test-" + name + ".npz")).string();
  fs::remove(path);
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z != nullptr);
  std::vector<std::string> keep;
  keep.reserve(members.size());
  for (const auto& m : members) {
    keep.push_back(npy_bytes(m));
    zip_source_t* src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    REQUIRE(zip_file_add(z, (m.name + ".npy").c_str(), src, ZIP_FL_OVERWRITE) >= 0);
  }
  REQUIRE(zip_close(z) == 0);
  return path;
}

std::vector<Member> converted(double nan_at = -1) {
  std::vector<double> itl = {5, 6, 10, 12};  // [kv 0 / 1000][ctx 100 / 1000]
  if (nan_at >= 0) itl[static_cast<size_t>(nan_at)] = std::numeric_limits<double>::quiet_NaN();
  return {{"prefill_isl", {3}, {100, 1000, 2000}},
          {"prefill_ttft_ms", {3}, {20, 40, 80}},
          {"decode_active_kv_tokens", {2}, {0, 1000}},
          {"decode_context_length", {2}, {100, 1000}},
          {"decode_itl", {2, 2}, itl}};
}

std::string error_of(const std::string& path) {
  auto p = PerfProfile::load(path);
  REQUIRE_FALSE(p.ok());
  return p.error().message;
}

}  // namespace

TEST_CASE("the shipped H200 profiler output loads as a directory and as the two raw_data.npz files") {
  auto dir = PerfProfile::load(kShipped);
  REQUIRE(dir.ok());
  const PerfProfile& p = **dir;
  CHECK(p.kind() == PerfProfile::Kind::kTables);
  CHECK(p.info().format == "profiler-raw");
  const ProfileTables& t = p.table();
  CHECK(t.prefill_tokens.size() == 17);
  CHECK(t.prefill_tokens.front() == 100);
  CHECK(t.prefill_tokens.back() == 16372);
  CHECK(t.decode_context.size() == 6);  // 350 ... 13585
  CHECK(t.decode_kv_tokens.size() == 100);
  CHECK(t.decode_kv_tokens.back() == doctest::Approx(945029));
  REQUIRE(p.engine().kv_tokens);
  CHECK(*p.engine().kv_tokens == 945029);
  // A profiled prefill point is returned as measured (prefill_isl 1117 -> 38.494131 ms).
  StepShape s;
  s.prefill_tokens = 1117;
  s.prefill_seqs = 1;
  CHECK(p.step_ms(s) == doctest::Approx(38.494131));
  // Decode at a profiled context between grid points stays near the measured ITL (resampling is
  // linear in KV along each profiled context length): x_kv_usage 0.3076, context 2997 -> 15.48 ms.
  StepShape d;
  d.decode_kv_tokens = static_cast<uint64_t>(0.3076191312647548 * 945029);
  d.decode_seqs = d.decode_kv_tokens / 2997;
  CHECK(p.step_ms(d) == doctest::Approx(15.479).epsilon(0.03));
  auto pair = PerfProfile::load(kShipped + "/selected_prefill_interpolation/raw_data.npz," + kShipped +
                                "/selected_decode_interpolation/raw_data.npz");
  REQUIRE(pair.ok());
  CHECK((*pair)->step_ms(s) == p.step_ms(s));
  CHECK((*pair)->step_ms(d) == p.step_ms(d));
  // Either order.
  auto swapped = PerfProfile::load(kShipped + "/selected_decode_interpolation/raw_data.npz," + kShipped +
                                   "/selected_prefill_interpolation/raw_data.npz");
  REQUIRE(swapped.ok());
  CHECK((*swapped)->step_ms(d) == p.step_ms(d));
}

TEST_CASE("the mocker's converted npz interpolates, extrapolates and clamps as Dynamo's perf_model.rs") {
  auto p = PerfProfile::load(write_npz(converted(), "converted"));
  REQUIRE(p.ok());
  CHECK((*p)->info().format == "mocker-npz");
  StepShape s;
  s.prefill_tokens = 550;  // halfway 100..1000
  CHECK((*p)->step_ms(s) == doctest::Approx(30));
  s.prefill_tokens = 3000;  // past the end: the last segment extended
  CHECK((*p)->step_ms(s) == doctest::Approx(120));
  StepShape d;
  d.decode_seqs = 1;
  d.decode_kv_tokens = 550;  // kv 550, context 550: bilinear
  CHECK((*p)->step_ms(d) == doctest::Approx(8.525));
  d.decode_seqs = 11;  // context 50: extrapolated below the axis
  CHECK((*p)->step_ms(d) == doctest::Approx(7.663889).epsilon(1e-5));
  // Both: prefill plus decode.
  StepShape both = d;
  both.prefill_tokens = 1000;
  CHECK((*p)->step_ms(both) == doctest::Approx(40 + (*p)->step_ms(d)));
  // A profile whose extrapolation goes below 1 ms is clamped at 1 ms (decode) and 0 (prefill).
  auto low = converted();
  low[1].values = {1, 2, 30};
  low[4].values = {0.5, 0.6, 0.9, 1.0};
  auto q = PerfProfile::load(write_npz(low, "low"));
  REQUIRE(q.ok());
  StepShape tiny;
  tiny.prefill_tokens = 1;
  CHECK((*q)->step_ms(tiny) == doctest::Approx(1.0));
  StepShape dec;
  dec.decode_seqs = 1;
  dec.decode_kv_tokens = 100;
  CHECK((*q)->step_ms(dec) == doctest::Approx(1.0));
}

TEST_CASE("malformed profiles are clear errors naming the file and the key") {
  auto missing = converted();
  missing.erase(missing.begin() + 1);  // no prefill_ttft_ms
  std::string path = write_npz(missing, "missing");
  std::string e = error_of(path);
  CHECK(e.find(path) != std::string::npos);
  CHECK(e.find("prefill_ttft_ms") != std::string::npos);
  CHECK(e.find("missing") != std::string::npos);

  auto unsorted = converted();
  unsorted[2].values = {1000, 0};
  path = write_npz(unsorted, "unsorted");
  e = error_of(path);
  CHECK(e.find("decode_active_kv_tokens") != std::string::npos);
  CHECK(e.find("not strictly increasing") != std::string::npos);

  path = write_npz(converted(2), "nan");
  e = error_of(path);
  CHECK(e.find("decode_itl") != std::string::npos);
  CHECK(e.find("not a finite number") != std::string::npos);

  auto shape = converted();
  shape[4].shape = {4};
  e = error_of(write_npz(shape, "shape"));
  CHECK(e.find("decode_itl") != std::string::npos);

  const std::string junk = (fs::temp_directory_path() / "dyn-test-junk.npz").string();
  std::ofstream(junk) << "this is not a zip archive";
  e = error_of(junk);
  CHECK(e.find(junk) != std::string::npos);
  CHECK(e.find("not a readable .npz") != std::string::npos);

  // A raw decode file without max_kv_tokens, paired with a good prefill file.
  auto raw_dec = read_npz(kShipped + "/selected_decode_interpolation/raw_data.npz");
  REQUIRE(raw_dec.ok());
  std::vector<Member> dec;
  for (auto& [k, a] : *raw_dec)
    if (k != "max_kv_tokens") dec.push_back({k, a.shape, a.values});
  path = write_npz(dec, "raw-dec");
  e = error_of(kShipped + "/selected_prefill_interpolation/raw_data.npz," + path);
  CHECK(e.find(path) != std::string::npos);
  CHECK(e.find("max_kv_tokens") != std::string::npos);

  CHECK(PerfProfile::load("/nonexistent/profile.npz").error().exit_code == dyn::kExitIo);
  const std::string absent = fs::temp_directory_path().string() + "/dyn-test-absent.npz";
  fs::remove(absent);
  CHECK(error_of(absent).find("no such file") != std::string::npos);
}

TEST_CASE("npy members: integer arrays, 0-d arrays and a non-npy member") {
  auto path = write_npz({{"a", {2}, {3, 4}, true}, {"b", {}, {7}}}, "ints");
  auto a = read_npz(path);
  REQUIRE(a.ok());
  CHECK(a->at("a").values == std::vector<double>{3, 4});
  CHECK(a->at("b").values == std::vector<double>{7});
  CHECK(a->at("b").shape.empty());
  // A member that is not .npy.
  int err = 0;
  const std::string odd = (fs::temp_directory_path() / "dyn-test-odd.npz").string();
  zip_t* z = zip_open(odd.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  static const char kText[] = "hello";
  zip_file_add(z, "readme.txt", zip_source_buffer(z, kText, 5, 0), 0);
  zip_close(z);
  auto r = read_npz(odd);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("readme.txt") != std::string::npos);
}

TEST_CASE("dyn JSON profile: the parametric step model round-trips and is checked") {
  StepCoefficients c;
  c.base = 12;
  c.prefill_step = 4;
  c.prefill_token = 0.02;
  c.prefill_attention = 1e-6;
  c.prefill_seq = 0.5;
  c.decode_seq = 0.1;
  c.kv_token = 2e-5;
  PerfProfile::Info info{"Qwen/Qwen3-32B", "h100_sxm", "vllm", "0.12.0", 2, 2, "", ""};
  ProfileEngine pe;
  pe.block_size = 16;
  pe.num_gpu_blocks = 1000;
  pe.max_num_batched_tokens = 4096;
  pe.enable_chunked_prefill = false;
  auto p = PerfProfile::parametric(c, info, pe);
  StepShape s;
  s.prefill_tokens = 1000;
  s.prefill_seqs = 2;
  s.prefill_attention = 5e5;
  s.decode_seqs = 8;
  s.decode_kv_tokens = 8000;
  CHECK(p->step_ms(s) == doctest::Approx(12 + 4 + 20 + 0.5 + 1 + 0.8 + 0.16));
  CHECK(p->step_ms(StepShape{}) == doctest::Approx(12));  // no prompt tokens: no prefill_step
  auto back = parse_profile_json(p->to_json().dump(), "p.json");
  REQUIRE(back.ok());
  CHECK((*back)->step_ms(s) == doctest::Approx(p->step_ms(s)));
  CHECK((*back)->info().model == "Qwen/Qwen3-32B");
  CHECK((*back)->info().tp == 2);
  CHECK(*(*back)->engine().max_num_batched_tokens == 4096);
  CHECK(*(*back)->engine().enable_chunked_prefill == false);
  // Below 1 ms: clamped.
  StepCoefficients zero;
  CHECK(PerfProfile::parametric(zero, info, {})->step_ms(s) == 1.0);

  auto j = p->to_json();
  j.erase("gpu");
  auto e = parse_profile_json(j.dump(), "p.json");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "p.json: key 'gpu': missing (a string naming the hardware or software)");
  j = p->to_json();
  j["step_ms"]["kv_token"] = -1;
  CHECK(parse_profile_json(j.dump(), "p.json").error().message.find("step_ms.kv_token") != std::string::npos);
  j = p->to_json();
  j["step_ms"]["warp"] = 1;
  CHECK(parse_profile_json(j.dump(), "p.json").error().message.find("unknown coefficient") != std::string::npos);
  j = p->to_json();
  j["schema"] = "other";
  CHECK_FALSE(parse_profile_json(j.dump(), "p.json").ok());
  CHECK_FALSE(parse_profile_json("[1, 2]", "p.json").ok());
}

TEST_CASE("interp1 extrapolates linearly past both ends") {
  const std::vector<double> xs{0, 10}, ys{1, 3};
  CHECK(interp1(xs, ys, 5) == doctest::Approx(2));
  CHECK(interp1(xs, ys, -10) == doctest::Approx(-1));
  CHECK(interp1(xs, ys, 20) == doctest::Approx(5));
  CHECK(interp1({4}, {9}, 100) == 9);
}

TEST_CASE("the engine times each step with its profile: shape, chunked prefill, steady decode") {
  StepCoefficients c;
  c.base = 10;
  c.prefill_token = 0.01;
  c.decode_seq = 1;
  c.kv_token = 0.001;
  EngineConfig cfg;
  cfg.profile = PerfProfile::parametric(c, {}, {});
  cfg.max_num_batched_tokens = 600;
  Engine e(cfg);
  RequestSpec r;
  r.id = 1;
  r.prompt_tokens = 1000;
  r.max_output_tokens = 5;
  REQUIRE(e.add(r).ok());
  StepResult s;
  e.step(s);  // a 600-token chunk
  CHECK(s.shape.prefill_tokens == 600);
  CHECK(s.shape.prefill_seqs == 1);
  CHECK(s.shape.prefill_attention == doctest::Approx(600.0 * 300));
  CHECK(s.duration_ms == doctest::Approx(10 + 6));
  e.step(s);  // the other 400 tokens, after 600: first token
  CHECK(s.shape.prefill_attention == doctest::Approx(400.0 * (600 + 200)));
  CHECK(s.outputs.size() == 1);
  e.step(s);  // decode: context 1000 + the new token
  CHECK(s.shape.decode_seqs == 1);
  CHECK(s.shape.decode_kv_tokens == 1001);
  CHECK(s.duration_ms == doctest::Approx(10 + 1 + 1.001));
  // Steady decode steps: each a token longer.
  REQUIRE(e.steady_decode_steps() == 2);
  CHECK(e.decode_steps_ms(2) == doctest::Approx(2 * 11 + 1.002 + 1.003));
  CHECK(e.decode_steps_within(2, 12.002) == 1);
  CHECK(e.decode_steps_within(2, 100) == 2);
}

TEST_CASE("prefill_schedule_interval defers admission while running sequences can decode") {
  EngineConfig cfg;
  cfg.prefill_schedule_interval = 3;
  Engine e(cfg);
  RequestSpec a;
  a.id = 1;
  a.prompt_tokens = 100;
  a.max_output_tokens = 10;
  REQUIRE(e.add(a).ok());
  StepResult s;
  e.step(s);  // nothing decodes: admitted at once
  CHECK(s.prefill_tokens == 100);
  RequestSpec b = a;
  b.id = 2;
  REQUIRE(e.add(b).ok());
  e.step(s);  // 1 step after a prefill: b waits, a decodes
  CHECK(s.prefill_tokens == 0);
  CHECK(s.decode_tokens == 1);
  e.step(s);  // 2 steps after
  CHECK(s.prefill_tokens == 0);
  e.step(s);  // 3 steps after: admitted beside a's decode
  CHECK(s.prefill_tokens == 100);
  CHECK(s.decode_tokens == 1);
}

TEST_CASE("kv_blocks_for_memory sizes the pool as vLLM's gpu_memory_utilization") {
  // 80 GiB x 0.9 - 64 GiB of weights = 8 GiB; 256 KiB per token, 16-token blocks: 2048 blocks.
  auto b = kv_blocks_for_memory(80, 0.9, 64, 262144, 16);
  REQUIRE(b.ok());
  CHECK(*b == 2048);
  auto none = kv_blocks_for_memory(80, 0.9, 80, 262144, 16);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit_code == dyn::kExitUsage);
  CHECK_FALSE(kv_blocks_for_memory(80, 0.9, 0, 0, 16).ok());
}
