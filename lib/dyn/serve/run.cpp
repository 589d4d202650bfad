// serve::run: a live frontend's whole life for a command's main (signals, bind, serve, drain).
#include <atomic>
#include <csignal>
#include <optional>

#include <sys/prctl.h>

#include "dyn/base/diag.h"
#include "dyn/serve/frontend.h"

namespace dyn::serve {

std::string startup_line(const FrontendOptions& opt, int port) {
  std::string s = "listening on http://" + opt.listen.host + ":" + std::to_string(port);
  if (opt.capture) {
    s += "; upstream " + (opt.workers.empty() ? std::string("?") : opt.workers.front());
  } else {
    s += "; " + std::to_string(opt.workers.size()) + (opt.workers.size() == 1 ? " worker" : " workers") +
         "; router mode " + route::mode_name(opt.router.mode);
    if (opt.router.affinity_enabled())
      s += ", session affinity " + std::string(route::affinity_mode_name(opt.router.affinity_mode)) + " TTL " +
           std::to_string(opt.router.affinity_ttl_secs) + " s";
    else s += ", no session affinity";
  }
  // gzip writes numbered segments PREFIX.NNNNNN.jsonl.gz; jsonl appends to the one file PREFIX.
  s += "; trace " + (!opt.trace            ? std::string("off")
                     : opt.trace_file.gzip ? opt.trace_file.prefix + ".*.jsonl.gz"
                                           : opt.trace_file.prefix);
  if (opt.admin_listen.port >= 0) s += "; admin on " + opt.admin_listen.host;
  return s;
}

int run(FrontendOptions opt) {
  const FrontendOptions shown = opt;
  // No transparent huge pages for a live frontend, whatever jemalloc advises (the tools take them,
  // cmd/common/malloc_conf.cpp): each request's body, rendered prompt and trace row are freed
  // when it ends, jemalloc purges such pages as they decay, and the next request faulted a fresh
  // 2 MiB page back in, which the kernel zeroes whole. Agent prompts through dyn-route serve took
  // four such faults a request, 8 MiB cleared: clear_page was 60 % of the router's CPU samples
  // (64 sessions, bench/serve-agent-prompts.sh sizes), and 4 KiB pages halved its CPU a request
  // (issue 54). The flag covers the whole process; an older kernel without it changes nothing.
  ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  // The watcher blocks the stop signals before the frontend exists: its constructor starts
  // threads (the Redis store's, the KV event subscribers'), and a thread started earlier would
  // not block SIGTERM, so the kernel could hand it the signal and the process would die of it
  // without draining or flushing the trace (the rows of the last ~100 ms were lost that way).
  // Declared first, the optional is destroyed last: the watcher's thread has ended by then.
  std::optional<Frontend> frontend;
  std::atomic<bool> ready{false};
  http::SignalWatcher watcher([&](int) {
    if (ready.load()) frontend->stop();
  });
  frontend.emplace(std::move(opt));
  ready.store(true);
  if (watcher.received() != 0) frontend->stop();  // a signal during construction
  auto port = frontend->bind();
  if (!port) throw Fatal(port.error().exit_code, port.error().message);
  diag::note(startup_line(shown, *port));
  frontend->serve();
  return watcher.received() == SIGINT ? kExitInterrupted : kExitOk;
}

}  // namespace dyn::serve
