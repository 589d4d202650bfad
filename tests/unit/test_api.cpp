// The one API table: names, paths and their inverse, terminal events, error body shapes.
#include <doctest/doctest.h>

#include "dyn/api/api.h"

using namespace dyn::api;

TEST_CASE("every API's path maps back to it, with or without a query string or trailing slash") {
  for (const ApiInfo& i : kApis) {
    CAPTURE(i.name);
    CHECK(api_for_path(i.path) == i.api);
    CHECK(api_for_path(std::string(i.path) + "/") == i.api);
    CHECK(api_for_path(std::string(i.path) + "?beta=true") == i.api);
    CHECK(std::string(api_name(i.api)) == i.name);
    CHECK(std::string(api_path(i.api)) == i.path);
  }
  CHECK(api_for_path("/v1/chat/completions") == Api::kChat);
  CHECK(api_for_path("/v1/messages") == Api::kMessages);
  CHECK(api_for_path("/v1/messages/count_tokens") == std::nullopt);
  CHECK(api_for_path("/v1/models") == std::nullopt);
  CHECK(api_for_path("") == std::nullopt);
}

TEST_CASE("names and terminal events as records and streams spell them") {
  CHECK(std::string(api_name(Api::kChat)) == "chat");
  CHECK(std::string(api_name(Api::kCompletions)) == "completions");
  CHECK(std::string(api_name(Api::kResponses)) == "responses");
  CHECK(std::string(api_name(Api::kMessages)) == "messages");
  CHECK(std::string(api_info(Api::kChat).terminal_event) == "[DONE]");
  CHECK(std::string(api_info(Api::kMessages).terminal_event) == "message_stop");
  CHECK(std::string(api_info(Api::kResponses).terminal_event) == "response.completed");
  CHECK(has_stream_usage_option(Api::kChat));
  CHECK(!has_stream_usage_option(Api::kMessages));
}

TEST_CASE("error bodies: Anthropic's shape for messages, OpenAI's for the rest") {
  CHECK(error_body(Api::kMessages, "bad", "invalid_request_error", 400).dump() ==
        R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})");
  CHECK(error_body(Api::kChat, "bad", "invalid_request_error", 400).dump() ==
        R"({"error":{"message":"bad","type":"invalid_request_error","param":null,"code":400}})");
}
