// Fuzz target: KV hints (SPEC 8.6): the KvHint v0.1 codec (engine::parse_kv_hint, to_json) and
// the leases that apply it to a KV pool (engine::KvLeases over engine::KvPool). Input: one flags
// byte (pool capacity 1 + low 4 bits blocks; pinned cap fraction high 4 bits / 15; bit patterns
// decide nothing else), then a JSON document (what POST /v1/kv_hints reads). The pool holds blocks
// with hashes 1..capacity, inactive, chained 1 <- 2 <- ... Properties checked: a parsed hint
// round-trips through to_json, every action's payload kept as sent (an unknown action travels
// untouched); applying it gives one outcome per action, in order, with its id and type,
// passed_through exactly for the types the engine does not know; the pinned hashes never exceed
// the cap; accepted and clipped retains pin at least one block; after every lease expires
// nothing is pinned and every block can be evicted again (a pin is a lease, never a leak); a
// refused message is bad data (exit 3) with a message.
#include <cmath>
#include <string>

#include "dyn/engine/hints.h"
#include "dyn/engine/kv_pool.h"
#include "fuzz_util.h"

using namespace dyn::engine;

namespace {

bool known(const std::string& type) {
  for (size_t k = 0; k + 1 < kHintActionKinds; ++k)
    if (type == kHintActionTypes[k]) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint64_t capacity = 1 + (data[0] & 15);
  KvHintLimits limits;
  limits.enabled = true;
  limits.max_pinned_fraction = static_cast<double>(data[0] >> 4) / 15.0;
  const dyn::Json j = dyn::Json::parse(reinterpret_cast<const char*>(data + 1),
                                       reinterpret_cast<const char*>(data + size), nullptr, false);
  if (j.is_discarded()) return 0;
  auto h = parse_kv_hint(j);
  if (!h) {
    FUZZ_CHECK(h.error().exit_code == dyn::kExitBadData);
    FUZZ_CHECK(!h.error().message.empty());
    return 0;
  }
  const dyn::Json wire = to_json(*h);
  auto again = parse_kv_hint(wire);
  FUZZ_CHECK(again && to_json(*again) == wire);
  for (size_t i = 0; i < h->actions.size(); ++i) {
    const dyn::Json& sent = j["actions"][i];
    FUZZ_CHECK(sent.contains("payload") ? wire["actions"][i]["payload"] == sent["payload"]
                                        : wire["actions"][i]["payload"] == dyn::Json::object());
  }

  KvPool pool(capacity);
  for (uint64_t b = 1; b <= capacity; ++b)
    pool.release_slot(pool.insert(b, b > 1 ? std::optional<uint64_t>(b - 1) : std::nullopt));
  KvLeases leases(pool, limits, data[0] & 1);
  const std::vector<uint64_t> current{1, 2, 3};
  const auto res = leases.apply(*h, HintTarget{0, 7, (data[0] & 2) ? &current : nullptr});
  FUZZ_CHECK(res.size() == h->actions.size());
  for (size_t i = 0; i < res.size(); ++i) {
    FUZZ_CHECK(res[i].action_id == h->actions[i].action_id && res[i].action_type == h->actions[i].action_type);
    FUZZ_CHECK((res[i].outcome == HintOutcome::kPassedThrough) == !known(res[i].action_type));
    if (res[i].action_type == "kv.retain" &&
        (res[i].outcome == HintOutcome::kAccepted || res[i].outcome == HintOutcome::kClipped))
      FUZZ_CHECK(res[i].blocks >= 1 && res[i].ttl_s > 0 && res[i].ttl_s <= limits.max_ttl_s);
  }
  FUZZ_CHECK(pool.pinned() <= leases.cap_blocks());
  leases.expire(INFINITY);
  FUZZ_CHECK(leases.leases() == 0 && pool.pinned() == 0);
  FUZZ_CHECK(pool.make_room(capacity));
  return 0;
}
