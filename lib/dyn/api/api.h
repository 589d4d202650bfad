// The wire protocol's one table of APIs: OpenAI chat/completions and completions, Anthropic
// messages and OpenAI Responses. The frontend (serve), the mock engine (engine, mocker), the live
// replay (replay), the HTTP helpers' error responses and /tokenize client (http) and their tests
// name an API, map a path to it, close its stream and shape its errors from here.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "dyn/base/json.h"

namespace dyn::api {

/// The API of a request. Order is the table order of kApis (not a wire value).
enum class Api { kChat, kCompletions, kResponses, kMessages };

/// One row of the API table.
struct ApiInfo {
  Api api;
  const char* name;  ///< short name in records and logs: chat, completions, responses, messages
  const char* path;  ///< the POST path: /v1/chat/completions, /v1/completions, ...
  /// The stream's terminal event: OpenAI's `data: [DONE]` sentinel, Anthropic's `message_stop`,
  /// Responses' `response.completed` (a cut response says `response.incomplete` instead).
  const char* terminal_event;
};

/// Every API, in enum order.
inline constexpr std::array<ApiInfo, 4> kApis = {{
    {Api::kChat, "chat", "/v1/chat/completions", "[DONE]"},
    {Api::kCompletions, "completions", "/v1/completions", "[DONE]"},
    {Api::kResponses, "responses", "/v1/responses", "response.completed"},
    {Api::kMessages, "messages", "/v1/messages", "message_stop"},
}};

/// The table row of `a`.
const ApiInfo& api_info(Api a);
/// "chat", "completions", "responses" or "messages".
const char* api_name(Api a);
/// The API's POST path, e.g. "/v1/chat/completions".
const char* api_path(Api a);
/// "/v1/chat/completions" -> kChat, ...; nullopt for other paths. A query string and trailing
/// slashes are ignored ("/v1/messages/?beta=true" is kMessages).
std::optional<Api> api_for_path(std::string_view path);
/// True for the OpenAI APIs whose streams can carry usage (stream_options.include_usage):
/// chat/completions and completions.
inline bool has_stream_usage_option(Api a) { return a == Api::kChat || a == Api::kCompletions; }

/// The error body of an API, the toolkit's one builder of it: Anthropic's {"type": "error",
/// "error": {"type", "message"}} for /v1/messages, else OpenAI's {"error": {"message", "type",
/// "param": null, "code"}} with `code` the HTTP status (as vLLM and Dynamo's frontend send it).
Json error_body(Api api, std::string_view message, std::string_view type, int code);

}  // namespace dyn::api
