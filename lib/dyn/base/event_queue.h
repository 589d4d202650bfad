// The virtual-clock loop shared by the offline drivers: dyn-replay --sim (engine steps, arrivals,
// admission ticks) and dyn-route decide (request ends releasing their load) pop discrete events
// from one EventQueue, which moves their FakeClock.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "dyn/base/clock.h"

namespace dyn {

/// A time-ordered queue of discrete events that drives a FakeClock (virtual milliseconds).
/// Events pop in (time, kind, insertion) order: `kind` ranks events of the same instant (lower
/// first: the caller's enum says which happen first), insertion order breaks the remaining ties,
/// so a run is deterministic. Popping an event moves the clock to its time, never backwards (an
/// event due before the clock's reading runs "now"). `Arg` is the caller's payload (an index).
/// Not thread-safe; the clock must outlive the queue.
template <class Arg>
class EventQueue {
 public:
  struct Event {
    double t_ms;
    int kind;
    uint64_t seq;  ///< insertion number (push_first: its rank)
    Arg arg;
  };

  explicit EventQueue(FakeClock& clock) : clock_(&clock) {}

  /// Schedules `arg` at virtual time `t_ms` with same-instant rank `kind`.
  void push(double t_ms, int kind, Arg arg) { heap_.push(Event{t_ms, kind, seq_++, std::move(arg)}); }
  /// As push, but it pops before every push() event of the same (time, kind), and among such
  /// events by `rank` (< 2^62): for events fixed before the run (a workload's arrivals, ranked by
  /// row), so they keep one order whether pushed at the start or later (a streamed input).
  void push_first(double t_ms, int kind, Arg arg, uint64_t rank) {
    heap_.push(Event{t_ms, kind, rank, std::move(arg)});
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  /// Time of the next event; +infinity when none is left.
  double next_ms() const { return heap_.empty() ? INFINITY : heap_.top().t_ms; }

  /// Removes the next event and moves the clock to its time. Precondition: !empty().
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    clock_->set(std::max(clock_->now_ms(), e.t_ms));
    return e;
  }

  /// Pops and hands to `handle(const Event&)`, in order, every event due at or before `t_ms`
  /// (events it pushes for that span run too), then moves the clock to `t_ms`.
  template <class F>
  void run_until(double t_ms, F&& handle) {
    while (!heap_.empty() && heap_.top().t_ms <= t_ms) handle(pop());
    clock_->set(std::max(clock_->now_ms(), t_ms));
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.t_ms != b.t_ms) return a.t_ms > b.t_ms;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.seq > b.seq;
    }
  };
  FakeClock* clock_;
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t seq_ = uint64_t{1} << 62;  // push(); push_first's ranks lie below
};

}  // namespace dyn
