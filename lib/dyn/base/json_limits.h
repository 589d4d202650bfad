// Limits on untrusted JSON text checked before parsing: nesting depth (no stack overflow in the
// recursive code that walks or prints parsed values).
#pragma once

#include <cstddef>
#include <string_view>

namespace dyn {

/// Deepest nesting accepted in a request body or a JSONL row. 128 is serde_json's recursion limit,
/// so Dynamo's (Rust) frontend refuses the same bodies; real rows and agent requests nest < 20.
inline constexpr size_t kMaxJsonDepth = 128;

/// True when `text` nests arrays/objects deeper than `max_depth` ('[' and '{' outside strings,
/// escapes honoured). A linear scan with no allocation, safe on any bytes (malformed JSON is left
/// to the parser). Thread-safe.
bool json_too_deep(std::string_view text, size_t max_depth = kMaxJsonDepth);

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF),
/// the rule nlohmann's dump() enforces: a string from an HTTP header must pass it before it is
/// put into a Json value that will be printed (trace rows, /v1/bindings). Thread-safe.
bool valid_utf8(std::string_view s);

}  // namespace dyn
