// The JSON type used across the toolkit (nlohmann, insertion-ordered for deterministic output).
#pragma once

#include <nlohmann/json.hpp>

namespace dyn {
/// Ordered JSON: keys keep insertion order, so output has a fixed key order and rows pass through
/// with their original order. Integers up to 2^64-1 are kept exactly (number_unsigned).
using Json = nlohmann::ordered_json;
}  // namespace dyn
