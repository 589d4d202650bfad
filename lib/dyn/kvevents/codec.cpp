// msgpack codec of vLLM's KVEventBatch (see codec.h for the layout and its source).
#include "dyn/kvevents/codec.h"

#include <fmt/format.h>

#include <msgpack.hpp>

namespace dyn::kvevents {

namespace {

using Obj = msgpack::object;

struct Packer {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  void str(std::string_view s) {
    pk.pack_str(static_cast<uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }
  void opt_str(const std::optional<std::string>& s) {
    if (s) str(*s);
    else pk.pack_nil();
  }
  template <class T>
  void uints(const std::vector<T>& v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (T x : v) pk.pack(static_cast<uint64_t>(x));  // smallest form, as msgspec
  }
};

Error err(size_t i, std::string_view what) { return Error{fmt::format("KV event {}: {}", i, what), kExitBadData}; }

std::optional<uint64_t> as_hash(const Obj& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<uint64_t>(o.via.i64);
  if (o.type == msgpack::type::BIN && o.via.bin.size > 0) {
    // Newer vLLM's bytes hashes: the last 8 bytes, big-endian (any fixed fold works: the ids
    // are only compared with each other).
    uint64_t v = 0;
    uint32_t n = o.via.bin.size, from = n > 8 ? n - 8 : 0;
    for (uint32_t k = from; k < n; ++k) v = (v << 8) | static_cast<unsigned char>(o.via.bin.ptr[k]);
    return v;
  }
  return std::nullopt;
}

std::optional<std::string> as_str(const Obj& o) {
  if (o.type == msgpack::type::STR) return std::string(o.via.str.ptr, o.via.str.size);
  return std::nullopt;
}

/// Field accessor over an array_like struct (fields after the tag) or a map-encoded one.
struct Fields {
  const Obj* arr = nullptr;  // array: element 0 is the tag
  const Obj* map = nullptr;
  const Obj* get(size_t pos, std::string_view name) const {
    if (arr) return pos + 1 < arr->via.array.size ? &arr->via.array.ptr[pos + 1] : nullptr;
    for (uint32_t k = 0; k < map->via.map.size; ++k) {
      const auto& kv = map->via.map.ptr[k];
      if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == name)
        return &kv.val;
    }
    return nullptr;
  }
};

Expected<std::vector<uint64_t>> hash_list(const Obj* o, size_t i, const char* field) {
  if (!o || o->type != msgpack::type::ARRAY) return err(i, fmt::format("{} must be an array", field));
  std::vector<uint64_t> out;
  out.reserve(o->via.array.size);
  for (uint32_t k = 0; k < o->via.array.size; ++k) {
    auto h = as_hash(o->via.array.ptr[k]);
    if (!h) return err(i, fmt::format("{}[{}] is not an int or bytes", field, k));
    out.push_back(*h);
  }
  return out;
}

bool is_nil(const Obj* o) { return !o || o->type == msgpack::type::NIL; }

Expected<std::optional<std::string>> opt_string(const Obj* o, size_t i, const char* field) {
  if (is_nil(o)) return std::optional<std::string>{};
  auto s = as_str(*o);
  if (!s) return err(i, fmt::format("{} must be a string or nil", field));
  return std::optional<std::string>{*s};
}

Expected<Event> decode_event(const Obj& o, size_t i) {
  Fields f;
  std::string tag;
  if (o.type == msgpack::type::ARRAY && o.via.array.size >= 1 && o.via.array.ptr[0].type == msgpack::type::STR) {
    f.arr = &o;
    tag = *as_str(o.via.array.ptr[0]);
  } else if (o.type == msgpack::type::MAP) {
    f.map = &o;
    const Obj* t = f.get(0, "type");
    if (!t || !as_str(*t)) return err(i, "map-encoded event without a string \"type\"");
    tag = *as_str(*t);
  } else {
    return err(i, "not a tagged event (array starting with a tag string, or a map)");
  }
  if (tag == "AllBlocksCleared") return Event{AllBlocksCleared{}};
  if (tag == "BlockRemoved") {
    BlockRemoved r;
    auto h = hash_list(f.get(0, "block_hashes"), i, "block_hashes");
    if (!h) return h.error();
    r.block_hashes = std::move(*h);
    auto m = opt_string(f.get(1, "medium"), i, "medium");
    if (!m) return m.error();
    r.medium = std::move(*m);
    return Event{std::move(r)};
  }
  if (tag != "BlockStored") return err(i, fmt::format("unknown event tag \"{}\"", tag.substr(0, 64)));
  BlockStored s;
  auto h = hash_list(f.get(0, "block_hashes"), i, "block_hashes");
  if (!h) return h.error();
  s.block_hashes = std::move(*h);
  const Obj* p = f.get(1, "parent_block_hash");
  if (!is_nil(p)) {
    auto ph = as_hash(*p);
    if (!ph) return err(i, "parent_block_hash is not an int, bytes or nil");
    s.parent_block_hash = *ph;
  }
  const Obj* t = f.get(2, "token_ids");
  if (!t || t->type != msgpack::type::ARRAY) return err(i, "token_ids must be an array");
  s.token_ids.reserve(t->via.array.size);
  for (uint32_t k = 0; k < t->via.array.size; ++k) {
    const Obj& x = t->via.array.ptr[k];
    if (x.type != msgpack::type::POSITIVE_INTEGER || x.via.u64 > UINT32_MAX)
      return err(i, fmt::format("token_ids[{}] is not a token id (0 … 4294967295)", k));
    s.token_ids.push_back(static_cast<uint32_t>(x.via.u64));
  }
  const Obj* b = f.get(3, "block_size");
  if (!b || b->type != msgpack::type::POSITIVE_INTEGER || b->via.u64 == 0 || b->via.u64 > UINT32_MAX)
    return err(i, "block_size must be a positive int");
  s.block_size = static_cast<uint32_t>(b->via.u64);
  const Obj* l = f.get(4, "lora_id");
  if (!is_nil(l)) {
    if (l->type == msgpack::type::POSITIVE_INTEGER) s.lora_id = static_cast<int64_t>(l->via.u64);
    else if (l->type == msgpack::type::NEGATIVE_INTEGER) s.lora_id = l->via.i64;
    else return err(i, "lora_id must be an int or nil");
  }
  auto m = opt_string(f.get(5, "medium"), i, "medium");
  if (!m) return m.error();
  s.medium = std::move(*m);
  return Event{std::move(s)};
}

}  // namespace

const char* event_tag(const Event& e) {
  switch (e.index()) {
    case 0: return "BlockStored";
    case 1: return "BlockRemoved";
    default: return "AllBlocksCleared";
  }
}

std::string encode_batch(const EventBatch& batch) {
  Packer p;
  p.pk.pack_array(batch.data_parallel_rank ? 3 : 2);
  p.pk.pack_double(batch.ts);
  p.pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const Event& e : batch.events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      p.pk.pack_array(7);
      p.str("BlockStored");
      p.uints(s->block_hashes);
      if (s->parent_block_hash) p.pk.pack(*s->parent_block_hash);
      else p.pk.pack_nil();
      p.uints(s->token_ids);
      p.pk.pack(static_cast<uint64_t>(s->block_size));
      if (s->lora_id) p.pk.pack(*s->lora_id);
      else p.pk.pack_nil();
      p.opt_str(s->medium);
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      p.pk.pack_array(3);
      p.str("BlockRemoved");
      p.uints(r->block_hashes);
      p.opt_str(r->medium);
    } else {
      p.pk.pack_array(1);
      p.str("AllBlocksCleared");
    }
  }
  if (batch.data_parallel_rank) p.pk.pack(*batch.data_parallel_rank);
  return std::string(p.buf.data(), p.buf.size());
}

Expected<EventBatch> decode_batch(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    size_t off = 0;
    // Limits keep a hostile header (an array claiming 4 G elements) from allocating gigabytes.
    msgpack::unpack_limit limit(/*array=*/1u << 22, /*map=*/1024, /*str=*/1u << 16, /*bin=*/1024, /*ext=*/0,
                                /*depth=*/8);
    msgpack::unpack(oh, payload.data(), payload.size(), off, nullptr, nullptr, limit);
    if (off != payload.size())
      return Error{fmt::format("KV event batch: {} trailing bytes after the msgpack value", payload.size() - off),
                   kExitBadData};
  } catch (const std::exception& e) {
    return Error{fmt::format("KV event batch is not valid msgpack: {}", e.what()), kExitBadData};
  }
  const Obj& o = oh.get();
  const Obj* ts = nullptr;
  const Obj* events = nullptr;
  const Obj* dp = nullptr;
  if (o.type == msgpack::type::ARRAY && o.via.array.size >= 2) {
    ts = &o.via.array.ptr[0];
    events = &o.via.array.ptr[1];
    if (o.via.array.size >= 3) dp = &o.via.array.ptr[2];
  } else if (o.type == msgpack::type::MAP) {
    Fields f{nullptr, &o};
    ts = f.get(0, "ts");
    events = f.get(0, "events");
    dp = f.get(0, "data_parallel_rank");
  }
  if (!ts || !events) return Error{"KV event batch must be [ts, events, ...] or {ts, events}", kExitBadData};
  EventBatch b;
  if (ts->type == msgpack::type::FLOAT64 || ts->type == msgpack::type::FLOAT32) b.ts = ts->via.f64;
  else if (ts->type == msgpack::type::POSITIVE_INTEGER) b.ts = static_cast<double>(ts->via.u64);
  else return Error{"KV event batch: ts must be a number", kExitBadData};
  if (events->type != msgpack::type::ARRAY) return Error{"KV event batch: events must be an array", kExitBadData};
  if (!is_nil(dp)) {
    if (dp->type == msgpack::type::POSITIVE_INTEGER) b.data_parallel_rank = static_cast<int64_t>(dp->via.u64);
    else if (dp->type == msgpack::type::NEGATIVE_INTEGER) b.data_parallel_rank = dp->via.i64;
    else return Error{"KV event batch: data_parallel_rank must be an int or nil", kExitBadData};
  }
  b.events.reserve(events->via.array.size);
  for (uint32_t i = 0; i < events->via.array.size; ++i) {
    auto e = decode_event(events->via.array.ptr[i], i);
    if (!e) return e.error();
    b.events.push_back(std::move(*e));
  }
  return b;
}

}  // namespace dyn::kvevents
