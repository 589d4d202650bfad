// Workers joining, draining and leaving at run time: the admin verbs and the watched worker file.
#include "dyn/serve/membership.h"

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "dyn/base/diag.h"

namespace dyn::serve {

namespace {

Json error_json(int status, const std::string& type, const std::string& msg) {
  Json j = Json::object();
  j["error"] = Json{{"message", msg}, {"type", type}, {"code", status}};
  return j;
}

}  // namespace

Expected<WorkerSpec> parse_worker_spec(const Json& j, bool url_only) {
  auto bad = [](const std::string& m) { return Error{m, 400}; };
  if (!j.is_object()) return bad("expected a JSON object with \"url\"");
  WorkerSpec s;
  std::string endpoint, replay;
  for (const auto& [k, v] : j.items()) {
    if (k == "url") {
      if (!v.is_string()) return bad("\"url\" must be a string");
      s.url = v.get<std::string>();
    } else if (url_only) {
      return bad("unknown field \"" + k + "\" (only \"url\" is taken here)");
    } else if (k == "kv_events_endpoint" || k == "kv_events_replay_endpoint") {
      if (!v.is_string() || v.get<std::string>().empty()) return bad("\"" + k + "\" must be a non-empty string");
      (k == "kv_events_endpoint" ? endpoint : replay) = v.get<std::string>();
    } else if (k == "block_size") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > UINT32_MAX)
        return bad("\"block_size\" must be a positive integer");
      s.block_size = v.get<uint32_t>();
    } else if (k == "draining") {
      if (!v.is_boolean()) return bad("\"draining\" must be true or false");
      s.draining = v.get<bool>();
    } else {
      return bad("unknown field \"" + k +
                 "\" (fields: url, kv_events_endpoint, kv_events_replay_endpoint, block_size, draining)");
    }
  }
  if (s.url.empty()) return bad("\"url\" is required");
  if (!replay.empty() && endpoint.empty()) return bad("\"kv_events_replay_endpoint\" needs \"kv_events_endpoint\"");
  if (!endpoint.empty()) s.kv_events = KvEventSource{endpoint, replay};
  return s;
}

Membership::Membership(const FrontendOptions& opt, Fleet& fleet, Placer& placer, KvFeeds* kv)
    : opt_(opt), fleet_(fleet), placer_(placer), kv_(kv) {}

Membership::~Membership() { stop(); }

Json Membership::worker_json(size_t i) const {
  const Fleet::Worker& w = fleet_.at(i);
  const WorkerState st = w.state.load();
  Json j = Json::object();
  j["worker"] = i;
  j["url"] = w.url;
  j["state"] = st == WorkerState::kServing && !w.routable ? "down" : worker_state_name(st);
  j["healthy"] = w.healthy.load();
  j["circuit"] = circuit_name(w.breaker.state());
  j["source"] = worker_source_name(w.source.load());
  j["in_flight"] = w.counters.in_flight.load();
  j["block_size"] = w.block_size.load() ? Json(w.block_size.load()) : Json(nullptr);
  j["kv_blocks"] = w.kv_blocks.load() ? Json(w.kv_blocks.load()) : Json(nullptr);
  j["kv_events_endpoint"] = kv_ && kv_->has(i) ? Json(kv_->source(i).endpoint) : Json(nullptr);
  return j;
}

Json Membership::list() const {
  std::map<uint64_t, route::WorkerLoad> loads;
  for (const auto& l : placer_.router().loads()) loads[l.worker] = l;
  std::map<uint64_t, uint64_t> bound;
  for (const auto& [w, n] : placer_.router().bindings_per_worker()) bound[w] = n;
  Json ws = Json::array();
  for (size_t i = 0, n = fleet_.size(); i < n; ++i) {
    if (!fleet_.at(i).present()) continue;
    Json j = worker_json(i);
    const route::WorkerLoad& l = loads[i];
    j["load"] = Json{{"active_requests", l.active_requests},
                     {"active_blocks", l.active_blocks},
                     {"prefill_tokens", l.prefill_tokens},
                     {"cached_blocks", l.cached_blocks}};
    j["bound_sessions"] = bound[i];
    ws.push_back(std::move(j));
  }
  return Json{{"workers", std::move(ws)}};
}

Membership::Answer Membership::add(const WorkerSpec& spec, WorkerSource source) {
  std::lock_guard lk(mu_);
  if (opt_.router.kv_events != spec.kv_events.has_value())
    return {400,
            error_json(400, "invalid_request_error",
                       opt_.router.kv_events
                           ? "--router-kv-events is on: a worker needs its \"kv_events_endpoint\""
                           : "\"kv_events_endpoint\" needs --router-kv-events (the index is predicted otherwise)")};
  if (spec.block_size && *spec.block_size != opt_.router.block_size && !opt_.allow_block_size_mismatch)
    return {400, error_json(400, "invalid_request_error",
                            fmt::format("worker block size {} differs from the router's --kv-cache-block-size {} "
                                        "(start it with {} or pass --allow-block-size-mismatch)",
                                        *spec.block_size, opt_.router.block_size, opt_.router.block_size))};
  auto added = fleet_.add(spec.url, source);
  if (!added) return {400, error_json(400, "invalid_request_error", added.error().message)};
  const size_t i = added->id;
  const bool back = added->created || added->was == WorkerState::kRemoved;
  if (kv_ && spec.kv_events && (back || !kv_->has(i) || kv_->source(i).endpoint != spec.kv_events->endpoint)) {
    if (auto e = kv_->add(i, *spec.kv_events)) {
      fleet_.set_state(i, added->created ? WorkerState::kRemoved : added->was);
      return {400, error_json(400, "invalid_request_error", e->message)};
    }
  }
  if (spec.block_size) fleet_.check_block_size(i, *spec.block_size, "its spec's block_size");
  placer_.add_worker(i);
  if (spec.draining) {
    fleet_.set_state(i, WorkerState::kDraining);
    placer_.drain_worker(i);
  }
  const Fleet::Worker& w = fleet_.at(i);
  if (added->created || added->was != w.state.load())
    diag::note(fmt::format("worker {} ({}) {} ({})", i, w.url,
                           added->created ? "added" : (back ? "added again" : "serving again"),
                           spec.draining ? "draining" : worker_source_name(source)));
  return {added->created ? 201 : 200, Json{{"worker", worker_json(i)}}};
}

Membership::Answer Membership::drain(const std::string& url) {
  std::lock_guard lk(mu_);
  auto i = fleet_.find(url);
  if (!i || !fleet_.at(*i).present())
    return {404, error_json(404, "not_found_error", "no worker " + url + " (GET /v1/workers lists them)")};
  if (fleet_.at(*i).state.exchange(WorkerState::kDraining) != WorkerState::kDraining) {
    placer_.drain_worker(*i);
    diag::note(fmt::format("worker {} ({}) draining: no new sessions; bound sessions move at their next turn", *i,
                           fleet_.at(*i).url));
  }
  return {200, Json{{"worker", worker_json(*i)}}};
}

Membership::Answer Membership::remove(const std::string& url) {
  std::lock_guard lk(mu_);
  auto i = fleet_.find(url);
  if (!i || !fleet_.at(*i).present())
    return {404, error_json(404, "not_found_error", "no worker " + url + " (GET /v1/workers lists them)")};
  fleet_.set_state(*i, WorkerState::kRemoved);
  const size_t dropped = placer_.remove_worker(*i);
  if (kv_) kv_->remove(*i);
  diag::note(fmt::format("worker {} ({}) removed: {} session binding{} dropped", *i, fleet_.at(*i).url, dropped,
                         dropped == 1 ? "" : "s"));
  Json j = Json{{"worker", worker_json(*i)}};
  j["bindings_dropped"] = dropped;
  return {200, std::move(j)};
}

bool Membership::sync_file(bool at_start) {
  std::ifstream in(opt_.worker_file, std::ios::binary);
  std::stringstream buf;
  if (in) buf << in.rdbuf();
  if (!in || in.bad()) {
    if (at_start) throw Fatal(kExitIo, opt_.worker_file + ": cannot read the worker file");
    if (!std::exchange(file_unreadable_, true))
      diag::warning(opt_.worker_file, "cannot read the worker file; keeping the workers it named");
    return false;
  }
  file_unreadable_ = false;
  std::string content = buf.str();
  if (!at_start && content == file_content_) return true;
  file_content_ = content;
  // The workers the file names now: a URL per line, or a JSON object per line (WorkerSpec).
  std::map<std::string, WorkerSpec> named;  // canonical URL -> spec
  std::istringstream lines(content);
  std::string line;
  for (size_t no = 1; std::getline(lines, line); ++no) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    auto spec = [&]() -> Expected<WorkerSpec> {
      if (line[0] != '{') return WorkerSpec{line, std::nullopt, std::nullopt, false};
      Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded()) return Error{"not a URL or a JSON object", 400};
      return parse_worker_spec(j, false);
    }();
    std::optional<std::string> canonical;
    if (spec) {
      auto c = http::canonical_worker_url(spec->url);
      if (!c) spec = Error{c.error().message, 400};
      else canonical = *c;
    }
    if (spec && opt_.router.kv_events && !spec->kv_events)
      spec = Error{"--router-kv-events is on: the line needs {\"url\": ..., \"kv_events_endpoint\": ...}", 400};
    if (!spec) {
      diag::warning(fmt::format("{}:{}", opt_.worker_file, no), spec.error().message + " (line skipped)");
      continue;
    }
    named[*canonical] = *spec;
  }
  for (auto& [url, spec] : named) {
    auto i = fleet_.find(url);
    Fleet::Worker* w = i ? &fleet_.at(*i) : nullptr;
    const bool present = w && w->present();
    if (present) w->source = WorkerSource::kFile;  // the file manages the workers it names
    if (present && (w->state.load() == WorkerState::kDraining) == spec.draining) continue;
    if (present && spec.draining) {
      drain(url);
      continue;
    }
    Answer a = add(spec, WorkerSource::kFile);  // new, back, or no longer draining
    if (a.status >= 400)
      diag::warning(opt_.worker_file, "worker " + url + ": " + a.body["error"]["message"].get<std::string>());
  }
  for (size_t i = 0, n = fleet_.size(); i < n; ++i) {
    const Fleet::Worker& w = fleet_.at(i);
    if (w.present() && w.source.load() == WorkerSource::kFile && !named.count(w.url)) remove(w.url);
  }
  return true;
}

void Membership::start() {
  if (opt_.worker_file.empty()) return;
  sync_file(/*at_start=*/true);
  watcher_ = std::thread([this] { watch(); });
}

void Membership::watch() {
  for (;;) {
    {
      std::unique_lock lk(watch_mu_);
      if (watch_cv_.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>(opt_.worker_file_interval_ms * 1000)),
                             [&] { return stopping_; }))
        return;
    }
    sync_file(false);
  }
}

void Membership::stop() {
  {
    std::lock_guard lk(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace dyn::serve
