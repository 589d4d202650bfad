// vLLM/SGLang-style POST /tokenize client (see tokenize.h).
#include "dyn/http/tokenize.h"

#include <chrono>

#include <fmt/format.h>

#include <httplib.h>
#include "dyn/http/proxy.h"

namespace dyn::http {

Json tokenize_request(api::Api api, const Json& body, const std::string& model, std::string (*render)(const Json&)) {
  // vLLM's and SGLang's /tokenize: chat messages go through the model's chat template there, so
  // the ids are those the engine will cache; other APIs send the rendered text as a prompt.
  Json req = Json::object();
  if (!model.empty()) req["model"] = model;
  auto msgs = body.find("messages");
  auto prompt = body.find("prompt");
  if (api == api::Api::kChat && msgs != body.end()) {
    req["messages"] = *msgs;
    req["add_generation_prompt"] = true;
    if (auto t = body.find("tools"); t != body.end()) req["tools"] = *t;
  } else if (api == api::Api::kCompletions && prompt != body.end() && prompt->is_string()) {
    req["prompt"] = *prompt;
  } else {
    req["prompt"] = render(body);
  }
  return req;
}

Expected<std::vector<uint32_t>> tokenize(const std::string& base_url, const Json& request) {
  auto u = UpstreamUrl::parse(base_url);
  if (!u) return u.error();
  httplib::Client c(u->scheme_host_port);
  c.set_connection_timeout(std::chrono::seconds(1));
  c.set_read_timeout(std::chrono::seconds(10));
  auto r = c.Post(u->path_prefix + "/tokenize", request.dump(), "application/json");
  if (!r) return Error{"POST " + base_url + "/tokenize failed: " + httplib::to_string(r.error()), kExitIo};
  if (r->status != 200) return Error{fmt::format("POST {}/tokenize answered {}", base_url, r->status), kExitIo};
  Json j = Json::parse(r->body, nullptr, false);
  auto t = j.is_object() ? j.find("tokens") : j.end();
  if (!j.is_object() || t == j.end() || !t->is_array())
    return Error{"POST " + base_url + "/tokenize: no \"tokens\" array in the answer", kExitBadData};
  std::vector<uint32_t> out;
  out.reserve(t->size());
  for (const auto& v : *t) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
      return Error{"POST " + base_url + "/tokenize: a token id is not an integer 0 … 4294967295", kExitBadData};
    out.push_back(v.get<uint32_t>());
  }
  return out;
}

}  // namespace dyn::http
