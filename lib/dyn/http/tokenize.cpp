// vLLM/SGLang-style POST /tokenize client (see tokenize.h).
#include "dyn/http/tokenize.h"

#include <chrono>

#include <fmt/format.h>

#include <httplib.h>
#include "dyn/api/chat_form.h"
#include "dyn/http/proxy.h"

namespace dyn::http {

namespace {

/// vLLM's TokenizeChatRequest from a chat-completions request: the members its chat template
/// reads (ChatCompletionRequest.build_chat_params and build_tok_params).
Json tokenize_chat(const Json& chat, Json req) {
  req["messages"] = chat["messages"];
  for (const char* key :
       {"tools", "chat_template", "mm_processor_kwargs", "add_special_tokens", "continue_final_message"})
    if (auto it = chat.find(key); it != chat.end() && !it->is_null()) req[key] = *it;
  auto agp = chat.find("add_generation_prompt");
  req["add_generation_prompt"] = agp != chat.end() && agp->is_boolean() ? agp->get<bool>() : true;
  Json kwargs = Json::object();
  if (auto it = chat.find("chat_template_kwargs"); it != chat.end() && it->is_object()) kwargs = *it;
  // merge_kwargs(chat_template_kwargs, {documents, reasoning_effort}): set fields win, None and
  // "auto" count as unset.
  for (const char* key : {"documents", "reasoning_effort"})
    if (auto it = chat.find(key); it != chat.end() && !it->is_null() && *it != "auto") kwargs[key] = *it;
  if (!kwargs.empty()) req["chat_template_kwargs"] = std::move(kwargs);
  return req;
}

}  // namespace

Expected<Json> tokenize_request(api::Api api, const Json& body, const std::string& model) {
  Json req = Json::object();
  if (!model.empty()) req["model"] = model;
  switch (api) {
    case api::Api::kCompletions: {
      auto prompt = body.is_object() ? body.find("prompt") : body.end();
      if (prompt == body.end() || !prompt->is_string())
        return Error{"a completions prompt that is not one string (token ids or a batch)", kExitBadData};
      req["prompt"] = *prompt;
      if (auto ast = body.find("add_special_tokens"); ast != body.end() && ast->is_boolean())
        req["add_special_tokens"] = *ast;
      return req;
    }
    case api::Api::kChat: {
      auto msgs = body.is_object() ? body.find("messages") : body.end();
      if (msgs == body.end() || !msgs->is_array())
        return Error{"a chat request without a \"messages\" array", kExitBadData};
      return tokenize_chat(body, std::move(req));
    }
    case api::Api::kMessages:
    case api::Api::kResponses: {
      auto chat = api == api::Api::kMessages ? api::chat_from_messages(body) : api::chat_from_responses(body);
      if (!chat) return chat.error();
      return tokenize_chat(*chat, std::move(req));
    }
  }
  return Error{"an API without a tokenizer form", kExitBadData};
}

Expected<std::vector<uint32_t>> tokenize(const std::string& base_url, const Json& request, double timeout_s,
                                         int* status) {
  if (status) *status = 0;
  auto u = UpstreamUrl::parse(base_url);
  if (!u) return u.error();
  httplib::Client c(u->scheme_host_port);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
  c.set_connection_timeout(timeout);
  c.set_read_timeout(timeout);
  c.set_write_timeout(timeout);
  auto r = c.Post(u->path_prefix + "/tokenize", request.dump(), "application/json");
  if (!r) return Error{"POST " + base_url + "/tokenize failed: " + httplib::to_string(r.error()), kExitIo};
  if (status) *status = r->status;
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
