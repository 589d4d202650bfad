// Real clock implementation.
#include "dyn/base/clock.h"

#include <chrono>

namespace dyn {

double RealClock::now_ms() const {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

uint64_t RealClock::unix_ms() const {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

RealClock& RealClock::instance() {
  static RealClock clock;
  return clock;
}

}  // namespace dyn
