// Injected clocks: real time for live servers, a settable virtual clock for offline runs and tests.
#pragma once

#include <atomic>
#include <cstdint>

namespace dyn {

/// Time source. `now_ms()` is a monotonic reading in milliseconds (double, sub-ms precision);
/// `unix_ms()` is wall-clock Unix time in ms for trace records. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_ms() const = 0;
  virtual uint64_t unix_ms() const = 0;
};

/// std::chrono::steady_clock / system_clock.
class RealClock final : public Clock {
 public:
  double now_ms() const override;
  uint64_t unix_ms() const override;
  /// Process-wide instance.
  static RealClock& instance();
};

/// A virtual clock that only moves when told. `unix_ms()` = unix_epoch_ms + now.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double start_ms = 0, uint64_t unix_epoch_ms = 0) : now_(start_ms), epoch_(unix_epoch_ms) {}
  double now_ms() const override { return now_.load(std::memory_order_relaxed); }
  uint64_t unix_ms() const override { return epoch_ + static_cast<uint64_t>(now_ms()); }
  void set(double ms) { now_.store(ms, std::memory_order_relaxed); }
  void advance(double ms) { set(now_ms() + ms); }

 private:
  std::atomic<double> now_;
  uint64_t epoch_;
};

}  // namespace dyn
