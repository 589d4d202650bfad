// A growable pool of worker threads, each owning one keep-alive Connection, so thousands of
// streams can be in flight at once with blocking cpp-httplib clients (SPEC 6.3).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "dyn/http/client.h"

namespace dyn::http {

/// Raises the soft RLIMIT_NOFILE to the hard limit (each in-flight stream holds a socket).
/// Returns the soft limit now in force.
size_t raise_fd_limit();

/// Re-issues listen() with a deep backlog on this process's listening TCP socket bound to
/// `port`. cpp-httplib 0.11 listens with a backlog of 5, so a burst of hundreds of connects
/// overflows the accept queue and clients see resets after ~1 s; servers that expect thousands
/// of concurrent streams (dyn-mocker, test servers) call this right after bind. Returns false
/// when no such socket was found. Linux only (scans /proc/self/fd).
bool widen_listen_backlog(int port, int backlog = 4096);

/// Runs jobs on worker threads, each with its own Connection (reused across jobs: keep-alive).
/// Workers are created on demand up to `max_workers` and never exit before the pool is
/// destroyed; threads get a small stack (`stack_bytes`) so 2,000+ of them fit comfortably.
/// Thread-safe: submit() may be called from any thread.
class ConnectionPool {
 public:
  struct Job {
    std::function<void(Transport&)> run;  ///< on the worker thread
    /// Runs on the worker thread after the worker is idle again, so a job's completion can
    /// submit the next job without growing the pool.
    std::function<void()> after;
  };
  /// Each worker gets an http::Connection to options.endpoint, or what `factory` makes when it
  /// is set (a unit test's stand-in; options are then unused).
  ConnectionPool(ClientOptions options, size_t max_workers, size_t stack_bytes = 256 * 1024,
                 const Clock& clock = RealClock::instance(), TransportFactory factory = nullptr);
  ~ConnectionPool();  ///< waits for running jobs, then joins every worker
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// Hands `job` to an idle worker, or to a new one while below max_workers. Returns false
  /// (and does nothing) when all max_workers are busy. Throws Fatal(kExitIo) when the OS
  /// refuses a new thread.
  bool submit(Job job);
  size_t busy() const;
  size_t workers() const;
  size_t max_workers() const { return max_; }

  struct Worker;
  void loop_entry(Worker* w);  ///< thread entry (internal)

 private:
  void loop(Worker* w);

  ClientOptions opts_;
  size_t max_, stack_;
  const Clock& clock_;
  TransportFactory factory_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> all_;
  std::vector<Worker*> idle_;
  size_t busy_ = 0;
  bool stopping_ = false;
};

}  // namespace dyn::http
