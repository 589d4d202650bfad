// Client of an engine's OpenAI-compatible tokenizer (vLLM's and SGLang's `POST /tokenize`; dyn-mocker
// serves one too): the one client dyn-route serve and dyn-replay use for --tokenizer-url.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"

namespace dyn::http {

/// The /tokenize request for what the engine will tokenize for a request body of `api` (issue
/// 51.3; vLLM's TokenizeChatRequest and TokenizeCompletionRequest,
/// vllm/entrypoints/serve/tokenize/protocol.py): a completions `prompt` string -> {prompt,
/// add_special_tokens?}; chat -> {messages, tools?, chat_template?, chat_template_kwargs?,
/// add_generation_prompt (default true), continue_final_message?, add_special_tokens?,
/// mm_processor_kwargs?}, with `documents` and `reasoning_effort` merged into
/// chat_template_kwargs as vLLM's ChatCompletionRequest.build_chat_params does for the
/// template; Anthropic Messages and Responses bodies in the chat form the engine's frontend
/// converts them to (api::chat_from_messages, api::chat_from_responses). `model` is added when
/// not empty. Errors (kExitBadData) say why precise tokenization is unavailable for this body: a
/// completions prompt that is not one string, a conversion's refusal (previous_response_id, ...).
Expected<Json> tokenize_request(api::Api api, const Json& body, const std::string& model);

/// POST `base_url` + "/tokenize" with `request` (connect, read and write timeouts `timeout_s`; one
/// connection per call) and returns the answer's `tokens` (engine token ids, each 0 … 2^32-1).
/// Errors name the URL: unreachable, timed out or a non-200 answer -> kExitIo (`*status` gets the
/// HTTP status when one came, else 0); an answer without a `tokens` array of such integers ->
/// kExitBadData.
Expected<std::vector<uint32_t>> tokenize(const std::string& base_url, const Json& request, double timeout_s = 10,
                                         int* status = nullptr);

}  // namespace dyn::http
