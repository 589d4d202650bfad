// msgpack codec of vLLM's KVEventBatch (see codec.h for the layout and its source).
#include "dyn/kvevents/codec.h"

#include <fmt/format.h>

#include <msgpack.hpp>

#include <cstring>
#include <functional>
#include <type_traits>

namespace dyn::kvevents {

namespace {

using Obj = msgpack::object;

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

bool is_nil(const Obj* o) { return !o || o->type == msgpack::type::NIL; }

// Field readers: false with `why` set when the field has the wrong type (the event is rejected).
bool hash_list(const Obj* o, const char* field, std::vector<uint64_t>& out, std::string& why) {
  if (!o || o->type != msgpack::type::ARRAY) {
    why = fmt::format("{} must be an array", field);
    return false;
  }
  out.reserve(o->via.array.size);
  for (uint32_t k = 0; k < o->via.array.size; ++k) {
    auto h = as_hash(o->via.array.ptr[k]);
    if (!h) {
      why = fmt::format("{}[{}] is not an int or bytes", field, k);
      return false;
    }
    out.push_back(*h);
  }
  return true;
}

bool opt_string(const Obj* o, const char* field, std::optional<std::string>& out, std::string& why) {
  if (is_nil(o)) return true;
  out = as_str(*o);
  if (!out) why = fmt::format("{} must be a string or nil", field);
  return out.has_value();
}

bool opt_u32(const Obj* o, const char* field, std::optional<uint32_t>& out, std::string& why) {
  if (is_nil(o)) return true;
  if (o->type != msgpack::type::POSITIVE_INTEGER || o->via.u64 > UINT32_MAX) {
    why = fmt::format("{} must be an int (0 … 4294967295) or nil", field);
    return false;
  }
  out = static_cast<uint32_t>(o->via.u64);
  return true;
}

bool decode_removed(const Fields& f, BlockRemoved& r, std::string& why) {
  return hash_list(f.get(0, "block_hashes"), "block_hashes", r.block_hashes, why) &&
         opt_string(f.get(1, "medium"), "medium", r.medium, why) &&
         opt_u32(f.get(2, "group_idx"), "group_idx", r.group_idx, why);
}

bool decode_stored(const Fields& f, BlockStored& s, std::string& why) {
  if (!hash_list(f.get(0, "block_hashes"), "block_hashes", s.block_hashes, why)) return false;
  if (const Obj* p = f.get(1, "parent_block_hash"); !is_nil(p)) {
    s.parent_block_hash = as_hash(*p);
    if (!s.parent_block_hash) {
      why = "parent_block_hash is not an int, bytes or nil";
      return false;
    }
  }
  const Obj* t = f.get(2, "token_ids");
  if (!t || t->type != msgpack::type::ARRAY) {
    why = "token_ids must be an array";
    return false;
  }
  s.token_ids.reserve(t->via.array.size);
  for (uint32_t k = 0; k < t->via.array.size; ++k) {
    const Obj& x = t->via.array.ptr[k];
    if (x.type != msgpack::type::POSITIVE_INTEGER || x.via.u64 > UINT32_MAX) {
      why = fmt::format("token_ids[{}] is not a token id (0 … 4294967295)", k);
      return false;
    }
    s.token_ids.push_back(static_cast<uint32_t>(x.via.u64));
  }
  // 0 is allowed here: vLLM's offload placeholders carry it (the translator skips them).
  const Obj* b = f.get(3, "block_size");
  if (!b || b->type != msgpack::type::POSITIVE_INTEGER || b->via.u64 > UINT32_MAX) {
    why = "block_size must be an int (0 … 4294967295)";
    return false;
  }
  s.block_size = static_cast<uint32_t>(b->via.u64);
  if (const Obj* l = f.get(4, "lora_id"); !is_nil(l)) {
    if (l->type == msgpack::type::POSITIVE_INTEGER && l->via.u64 <= INT64_MAX)
      s.lora_id = static_cast<int64_t>(l->via.u64);
    else if (l->type == msgpack::type::NEGATIVE_INTEGER) s.lora_id = l->via.i64;
    else {
      why = "lora_id must be an int or nil";
      return false;
    }
  }
  // Position 7 is extra_keys (multimodal hashes, salts): not read, the tokens are what we hash.
  return opt_string(f.get(5, "medium"), "medium", s.medium, why) &&
         opt_string(f.get(6, "lora_name"), "lora_name", s.lora_name, why) &&
         opt_u32(f.get(8, "group_idx"), "group_idx", s.group_idx, why) &&
         opt_string(f.get(9, "kv_cache_spec_kind"), "kv_cache_spec_kind", s.kv_cache_spec_kind, why) &&
         opt_u32(f.get(10, "kv_cache_spec_sliding_window"), "kv_cache_spec_sliding_window",
                 s.kv_cache_spec_sliding_window, why);
}

// One event; nullopt with `why` set when it cannot be decoded.
std::optional<Event> decode_event(const Obj& o, std::string& why) {
  Fields f;
  std::string tag;
  if (o.type == msgpack::type::ARRAY && o.via.array.size >= 1 && o.via.array.ptr[0].type == msgpack::type::STR) {
    f.arr = &o;
    tag = *as_str(o.via.array.ptr[0]);
  } else if (o.type == msgpack::type::MAP) {
    f.map = &o;
    const Obj* t = f.get(0, "type");
    if (!t || !as_str(*t)) {
      why = "map-encoded event without a string \"type\"";
      return std::nullopt;
    }
    tag = *as_str(*t);
  } else {
    why = "not a tagged event (array starting with a tag string, or a map)";
    return std::nullopt;
  }
  if (tag == "AllBlocksCleared") return Event{AllBlocksCleared{}};
  if (tag == "BlockRemoved") {
    BlockRemoved r;
    if (!decode_removed(f, r, why)) return std::nullopt;
    return Event{std::move(r)};
  }
  if (tag == "BlockStored") {
    BlockStored s;
    if (!decode_stored(f, s, why)) return std::nullopt;
    return Event{std::move(s)};
  }
  why = fmt::format("unknown event tag \"{}\"", tag.substr(0, 64));
  return std::nullopt;
}

// ---- encoding --------------------------------------------------------------------------------

struct Packer {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  void str(std::string_view s) {
    pk.pack_str(static_cast<uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }
  template <class T>
  void opt(const std::optional<T>& v) {
    if (!v) pk.pack_nil();
    else if constexpr (std::is_same_v<T, std::string>) str(*v);
    else pk.pack(*v);
  }
  /// Always float64, as msgspec writes a float (msgpack-cxx's pack_double writes an integral
  /// value as an int).
  void f64(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    char b[9] = {static_cast<char>(0xcb)};
    for (int k = 0; k < 8; ++k) b[1 + k] = static_cast<char>(bits >> (56 - 8 * k));
    buf.write(b, sizeof b);
  }
  template <class T>
  void uints(const std::vector<T>& v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (T x : v) pk.pack(static_cast<uint64_t>(x));  // smallest form, as msgspec
  }
};

/// Writes one struct in array_like or tagged-map form: `fields` are (name, has a default, writer,
/// set) in declaration order. Array: the fields up to the last one set or without a default (a
/// field with a default is trailing in vLLM's classes). Map: every field without a default, and
/// those with one only when set (omit_defaults).
struct Field {
  const char* name;
  bool has_default;
  bool set;
  std::function<void()> write;
};

void pack_struct(Packer& p, bool map, const char* tag, const std::vector<Field>& fields) {
  size_t n = 0;  // array: fields written; map: entries
  for (size_t k = 0; k < fields.size(); ++k)
    if (!fields[k].has_default || fields[k].set) n = map ? n + 1 : k + 1;
  if (!map) {
    p.pk.pack_array(static_cast<uint32_t>(n + 1));
    p.str(tag);
    for (size_t k = 0; k < n; ++k) fields[k].write();
    return;
  }
  p.pk.pack_map(static_cast<uint32_t>(n + 1));
  p.str("type");
  p.str(tag);
  for (const Field& f : fields) {
    if (f.has_default && !f.set) continue;
    p.str(f.name);
    f.write();
  }
}

void pack_event(Packer& p, bool map, const Event& e) {
  if (const auto* s = std::get_if<BlockStored>(&e)) {
    // lora_name has no default in vLLM; it is written as a default here so that a store without
    // it keeps the older 7-element layout (dyn-mocker's, vLLM's documented subscriber classes).
    pack_struct(p, map, "BlockStored",
                {{"block_hashes", false, true, [&] { p.uints(s->block_hashes); }},
                 {"parent_block_hash", false, true, [&] { p.opt(s->parent_block_hash); }},
                 {"token_ids", false, true, [&] { p.uints(s->token_ids); }},
                 {"block_size", false, true, [&] { p.pk.pack(static_cast<uint64_t>(s->block_size)); }},
                 {"lora_id", false, true, [&] { p.opt(s->lora_id); }},
                 {"medium", false, true, [&] { p.opt(s->medium); }},
                 {"lora_name", !map, s->lora_name.has_value(), [&] { p.opt(s->lora_name); }},
                 {"extra_keys", true, false, [&] { p.pk.pack_nil(); }},
                 {"group_idx", true, s->group_idx.has_value(), [&] { p.opt(s->group_idx); }},
                 {"kv_cache_spec_kind", true, s->kv_cache_spec_kind.has_value(), [&] { p.opt(s->kv_cache_spec_kind); }},
                 {"kv_cache_spec_sliding_window", true, s->kv_cache_spec_sliding_window.has_value(),
                  [&] { p.opt(s->kv_cache_spec_sliding_window); }}});
  } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
    pack_struct(p, map, "BlockRemoved",
                {{"block_hashes", false, true, [&] { p.uints(r->block_hashes); }},
                 {"medium", false, true, [&] { p.opt(r->medium); }},
                 {"group_idx", true, r->group_idx.has_value(), [&] { p.opt(r->group_idx); }}});
  } else {
    pack_struct(p, map, "AllBlocksCleared", {});
  }
}

}  // namespace

const char* event_tag(const Event& e) {
  switch (e.index()) {
    case 0: return "BlockStored";
    case 1: return "BlockRemoved";
    default: return "AllBlocksCleared";
  }
}

std::string encode_batch(const EventBatch& batch, Layout layout) {
  Packer p;
  const bool map_events = layout != Layout::kArrays;
  const bool dp = batch.data_parallel_rank.has_value();
  if (layout == Layout::kMaps) {
    p.pk.pack_map(dp ? 3 : 2);
    p.str("ts");
  } else {
    p.pk.pack_array(dp ? 3 : 2);
  }
  p.f64(batch.ts);
  if (layout == Layout::kMaps) p.str("events");
  p.pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const Event& e : batch.events) pack_event(p, map_events, e);
  if (dp) {
    if (layout == Layout::kMaps) p.str("data_parallel_rank");
    p.pk.pack(*batch.data_parallel_rank);
  }
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
    if (dp->type == msgpack::type::POSITIVE_INTEGER && dp->via.u64 <= INT64_MAX)
      b.data_parallel_rank = static_cast<int64_t>(dp->via.u64);
    else if (dp->type == msgpack::type::NEGATIVE_INTEGER) b.data_parallel_rank = dp->via.i64;
    else return Error{"KV event batch: data_parallel_rank must be an int or nil", kExitBadData};
  }
  b.events.reserve(events->via.array.size);
  std::string why;
  for (uint32_t i = 0; i < events->via.array.size; ++i) {
    why.clear();
    if (auto e = decode_event(events->via.array.ptr[i], why)) b.events.push_back(std::move(*e));
    else b.rejected.push_back(RejectedEvent{i, fmt::format("KV event {}: {}", i, why)});
  }
  return b;
}

}  // namespace dyn::kvevents
