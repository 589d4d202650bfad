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

/// The /tokenize request body for a request body of `api`: chat -> {model, messages, tools?,
/// add_generation_prompt: true} (the engine applies its chat template, so the ids are those it
/// will cache and count as prompt_tokens); completions with a string `prompt` -> {model, prompt};
/// anything else -> {model, prompt: render(body)} (callers pass tokens::render_request, SPEC 4.2).
/// `model` is left out when empty.
Json tokenize_request(api::Api api, const Json& body, const std::string& model, std::string (*render)(const Json&));

/// POST `base_url` + "/tokenize" with `request` (connect timeout 1 s, read timeout 10 s; one
/// connection per call) and returns the answer's `tokens` (engine token ids, each 0 … 2^32-1).
/// Errors name the URL: unreachable or a non-200 answer -> kExitIo; an answer without a `tokens`
/// array of such integers -> kExitBadData.
Expected<std::vector<uint32_t>> tokenize(const std::string& base_url, const Json& request);

}  // namespace dyn::http
