// Error helpers.
#include "dyn/base/error.h"

namespace dyn {

Error bad_data(std::string message) { return Error{std::move(message), kExitBadData}; }

}  // namespace dyn
