// The toolkit version, printed by every binary's --version.
#pragma once

namespace dyn {
inline constexpr const char* kVersion = "0.1.0";
}
