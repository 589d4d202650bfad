// Fuzz target: the SSE parser (SseParser) and the OpenAI stream interpretation on top of it.
// Input: the raw bytes of a response stream. Properties checked: the events do not depend on how
// the stream is cut into reads (whole, byte by byte, and input-derived chunk sizes agree, CR/LF
// splits included); arrival stamps are those of a read at or before the event's end; the summary
// of OpenAiStream is self-consistent (text kept == text counted, stamps in arrival order).
#include <string>
#include <vector>

#include "dyn/http/sse.h"
#include "dyn/http/sse_openai.h"
#include "fuzz_util.h"

using dyn::http::OpenAiStream;
using dyn::http::SseEvent;
using dyn::http::SseParser;

namespace {

struct Parsed {
  std::vector<SseEvent> events;
  bool clean = false;
};

// Feeds `in` in chunks of the sizes `next_size()` returns; read k arrives at time k.
template <class NextSize>
Parsed parse(std::string_view in, NextSize next_size) {
  SseParser p;
  Parsed r;
  size_t off = 0;
  double t = 0;
  while (off < in.size()) {
    size_t n = std::min(in.size() - off, next_size());
    size_t before = r.events.size();
    p.feed(in.substr(off, n), t, r.events);
    for (size_t i = before; i < r.events.size(); ++i) FUZZ_CHECK(r.events[i].first_byte_ms <= t);
    off += n;
    t += 1;
  }
  FUZZ_CHECK(p.bytes() == in.size());
  r.clean = p.finish(r.events);
  for (size_t i = 1; i < r.events.size(); ++i) FUZZ_CHECK(r.events[i - 1].first_byte_ms <= r.events[i].first_byte_ms);
  return r;
}

bool same_events(const Parsed& a, const Parsed& b) {
  if (a.clean != b.clean || a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i)
    if (a.events[i].event != b.events[i].event || a.events[i].data != b.events[i].data ||
        a.events[i].id != b.events[i].id)
      return false;
  return true;
}

void check_summary(OpenAiStream& s, bool keep_text) {
  auto& sum = s.summary();
  if (keep_text) FUZZ_CHECK(sum.text.size() == sum.text_bytes);
  else FUZZ_CHECK(sum.text.empty() && sum.content.empty());
  FUZZ_CHECK(sum.content.size() <= sum.text.size());
  for (size_t i = 1; i < sum.token_chunk_ms.size(); ++i) FUZZ_CHECK(sum.token_chunk_ms[i - 1] <= sum.token_chunk_ms[i]);
  FUZZ_CHECK(sum.parse_errors <= sum.events + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = dyn::fuzz::as_view(data, size);
  Parsed whole = parse(in, [&] { return in.size() + 1; });
  Parsed bytewise = parse(in, [] { return size_t{1}; });
  FUZZ_CHECK(same_events(whole, bytewise));
  // Chunk sizes 1..16 drawn from the input itself, so the fuzzer steers the cut points too.
  size_t k = 0;
  Parsed chunked = parse(in, [&] { return size_t{1} + (size ? data[k++ % size] % 16 : 0); });
  FUZZ_CHECK(same_events(whole, chunked));

  OpenAiStream stream(/*keep_text=*/true);
  for (const SseEvent& ev : chunked.events) stream.on_event(ev);
  FUZZ_CHECK(stream.summary().events == chunked.events.size());
  check_summary(stream, true);

  OpenAiStream body(/*keep_text=*/false);  // the same bytes as a non-streaming JSON body
  body.on_body(in, 7.0);
  check_summary(body, false);
  return 0;
}
