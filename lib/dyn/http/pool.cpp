// Worker threads with small stacks, each with its own keep-alive connection.
#include "dyn/http/pool.h"

#include <pthread.h>
#include <sys/resource.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace dyn::http {

size_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

bool widen_listen_backlog(int port, int backlog) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  bool done = false;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end) continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &sl) != 0) continue;
    int p = ss.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
            : ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                       : -1;
    if (p == port && ::listen(static_cast<int>(fd), backlog) == 0) done = true;
  }
  closedir(d);
  return done;
}

struct ConnectionPool::Worker {
  ConnectionPool* pool = nullptr;
  pthread_t thread{};
  std::mutex mu;
  std::condition_variable cv;
  Job job;
  bool has_job = false;
  bool stop = false;
  std::unique_ptr<Transport> conn;
};

namespace {
void* thread_main(void* arg) {
  auto* w = static_cast<ConnectionPool::Worker*>(arg);
  w->pool->loop_entry(w);
  return nullptr;
}
}  // namespace

ConnectionPool::ConnectionPool(ClientOptions options, size_t max_workers, size_t stack_bytes, const Clock& clock,
                               TransportFactory factory)
    : opts_(std::move(options)),
      max_(max_workers ? max_workers : 1),
      stack_(stack_bytes),
      clock_(clock),
      factory_(std::move(factory)) {}

ConnectionPool::~ConnectionPool() {
  std::vector<Worker*> ws;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    for (auto& w : all_) ws.push_back(w.get());
  }
  for (auto* w : ws) {
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->stop = true;
    }
    w->cv.notify_one();
  }
  for (auto* w : ws) pthread_join(w->thread, nullptr);
}

bool ConnectionPool::submit(Job job) {
  Worker* w = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return false;
    if (!idle_.empty()) {
      w = idle_.back();
      idle_.pop_back();
    } else if (all_.size() < max_) {
      auto nw = std::make_unique<Worker>();
      nw->pool = this;
      nw->job = std::move(job);
      nw->has_job = true;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstacksize(&attr, stack_);
      int rc = pthread_create(&nw->thread, &attr, thread_main, nw.get());
      pthread_attr_destroy(&attr);
      if (rc != 0)
        throw Fatal(kExitIo,
                    "cannot start worker thread " + std::to_string(all_.size() + 1) + ": " + std::strerror(rc));
      all_.push_back(std::move(nw));
      ++busy_;
      return true;
    } else {
      return false;
    }
    ++busy_;
  }
  {
    std::lock_guard<std::mutex> lk(w->mu);
    w->job = std::move(job);
    w->has_job = true;
  }
  w->cv.notify_one();
  return true;
}

void ConnectionPool::loop_entry(Worker* w) { loop(w); }

void ConnectionPool::loop(Worker* w) {
  w->conn = factory_ ? factory_() : std::make_unique<Connection>(opts_, clock_);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(w->mu);
      w->cv.wait(lk, [&] { return w->has_job || w->stop; });
      if (!w->has_job) return;
      job = std::move(w->job);
      w->has_job = false;
    }
    if (job.run) job.run(*w->conn);
    {
      std::lock_guard<std::mutex> lk(mu_);
      --busy_;
      idle_.push_back(w);
    }
    if (job.after) job.after();
  }
}

size_t ConnectionPool::busy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return busy_;
}

size_t ConnectionPool::workers() const {
  std::lock_guard<std::mutex> lk(mu_);
  return all_.size();
}

}  // namespace dyn::http
