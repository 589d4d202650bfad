// Unit tests of harness tool events: the msgpack codec and the PULL receiver / PUSH sender.
#include <doctest/doctest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <msgpack.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "dyn/kvevents/pubsub.h"
#include "dyn/toolevents/toolevents.h"

using namespace dyn;
using namespace dyn::toolevents;

namespace {

records::ToolEvent sample_end() {
  records::ToolEvent e;
  e.event_type = "tool_end";
  e.event_time_unix_ms = 1777312801500;
  e.session_id = "research-run-42:researcher";
  e.parent_session_id = "research-run-42:planner";
  e.tool_call_id = "call-abc";
  e.tool_class = "web_search";
  e.status = "succeeded";
  e.started_at_unix_ms = 1777312801080;
  e.ended_at_unix_ms = 1777312801500;
  e.duration_ms = 420.5;
  e.output_tokens = 9;
  return e;
}

/// A payload written as a harness in another language would: extra keys, nil optionals, a
/// synonym status, an integer duration.
std::string foreign_payload(const char* schema = "dynamo.request.trace.v1") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  pk.pack_map(7);
  pk.pack("schema"), pk.pack(schema);
  pk.pack("event_type"), pk.pack("tool_error");
  pk.pack("event_time_unix_ms"), pk.pack(uint64_t{42});
  pk.pack("session_id"), pk.pack("s1");
  pk.pack("parent_session_id"), pk.pack_nil();
  pk.pack("harness_extra"), pk.pack("ignored");
  pk.pack("tool");
  pk.pack_map(5);
  pk.pack("tool_call_id"), pk.pack("c1");
  pk.pack("tool_class"), pk.pack("Bash");
  pk.pack("status"), pk.pack("failed");
  pk.pack("duration_ms"), pk.pack(uint64_t{12});
  pk.pack("error_type"), pk.pack("timeout");
  return std::string(buf.data(), buf.size());
}

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 300; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("toolevents: encode and decode round trip every field") {
  records::ToolEvent e = sample_end();
  auto d = decode_tool_event(encode_tool_event(e));
  REQUIRE(d);
  CHECK(d->event_type == e.event_type);
  CHECK(d->event_time_unix_ms == e.event_time_unix_ms);
  CHECK(d->session_id == e.session_id);
  CHECK(d->parent_session_id == e.parent_session_id);
  CHECK(d->tool_call_id == e.tool_call_id);
  CHECK(d->tool_class == e.tool_class);
  CHECK(d->status == e.status);
  CHECK(d->started_at_unix_ms == e.started_at_unix_ms);
  CHECK(d->ended_at_unix_ms == e.ended_at_unix_ms);
  CHECK(d->duration_ms == e.duration_ms);
  CHECK(d->output_tokens == e.output_tokens);
  CHECK(!d->output_bytes);
}

TEST_CASE("toolevents: a foreign harness's payload decodes as serde would take it") {
  auto d = decode_tool_event(foreign_payload());
  REQUIRE(d);
  CHECK(d->event_type == "tool_error");
  CHECK(d->parent_session_id.empty());  // nil = absent
  CHECK(d->status == "error");          // "failed" is a synonym
  CHECK(d->duration_ms == 12.0);
  CHECK(d->error_type == "timeout");
}

TEST_CASE("toolevents: malformed payloads are errors naming the field") {
  CHECK(decode_tool_event(foreign_payload("other.v2")).error().message ==
        "tool event: schema 'other.v2' (want dynamo.request.trace.v1)");
  CHECK(!decode_tool_event("not msgpack \xc1"));
  CHECK(!decode_tool_event(encode_tool_event(sample_end()) + "x"));  // trailing bytes
  records::ToolEvent e = sample_end();
  e.tool_call_id.clear();
  CHECK(decode_tool_event(encode_tool_event(e)).error().message == "tool event: 'tool.tool_call_id' is empty");
  e = sample_end();
  e.event_type = "request_end";
  CHECK(!decode_tool_event(encode_tool_event(e)));
  e = sample_end();
  e.status = "exploded";
  CHECK(decode_tool_event(encode_tool_event(e)).error().message == "tool event: unknown status 'exploded'");
  e = sample_end();
  e.session_id.clear();
  CHECK(!decode_tool_event(encode_tool_event(e)));
}

TEST_CASE("toolevents: status synonyms") {
  CHECK(normalize_tool_status("ok") == "succeeded");
  CHECK(normalize_tool_status("success") == "succeeded");
  CHECK(normalize_tool_status("canceled") == "cancelled");
  CHECK(normalize_tool_status("timeout") == "error");
  CHECK(!normalize_tool_status("Succeeded"));
}

TEST_CASE("toolevents: a sender's events reach the receiver; malformed frames are counted") {
  std::mutex mu;
  std::vector<records::ToolEvent> got;
  Receiver rx("tcp://127.0.0.1:0", kDefaultTopic, [&](records::ToolEvent&& e) {
    std::lock_guard lk(mu);
    got.push_back(std::move(e));
  });
  REQUIRE(rx.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(rx.endpoint() != "tcp://127.0.0.1:0");
  {
    Sender tx(rx.endpoint());
    tx.send(sample_end());
    CHECK(eventually([&] { return rx.stats().accepted.load() == 1; }));
  }
  // Frames a harness should never send: two frames, a short sequence, bad msgpack, another topic.
  zmq::context_t ctx;
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.connect(rx.endpoint());
  std::string seq = kvevents::encode_seq(7);
  auto send = [&](std::vector<std::string> parts) {
    std::vector<zmq::const_buffer> b;
    for (auto& p : parts) b.push_back(zmq::buffer(p));
    zmq::send_multipart(push, b);
  };
  send({kDefaultTopic, seq});
  send({kDefaultTopic, "123", foreign_payload()});
  send({kDefaultTopic, seq, "\xc1"});
  send({"other-topic", seq, foreign_payload()});
  send({kDefaultTopic, seq, foreign_payload()});
  CHECK(eventually([&] { return rx.stats().accepted.load() == 2; }));
  CHECK(rx.stats().malformed.load() == 3);
  CHECK(rx.stats().other_topic.load() == 1);
  CHECK(rx.stats().frames.load() == 6);
  CHECK(rx.last_error().find("tool event: not valid msgpack") == 0);
  std::lock_guard lk(mu);
  REQUIRE(got.size() == 2);
  CHECK(got[0].tool_call_id == "call-abc");
  CHECK(got[1].tool_call_id == "c1");
}

TEST_CASE("toolevents: zmq_address turns port 0 into ZMQ's wildcard") {
  CHECK(zmq_address("tcp://127.0.0.1:0") == "tcp://127.0.0.1:*");
  CHECK(zmq_address("tcp://127.0.0.1:5557") == "tcp://127.0.0.1:5557");
  CHECK(zmq_address("ipc:///tmp/x") == "ipc:///tmp/x");
}
