// The chat-completions form an engine's OpenAI frontend converts an Anthropic Messages or OpenAI
// Responses request to before applying its chat template: what an engine tokenizes for them.
#pragma once

#include <string>

#include "dyn/base/error.h"
#include "dyn/base/json.h"

namespace dyn::api {

/// The chat-completions request vLLM's frontend builds from an Anthropic Messages body
/// (vllm/entrypoints/anthropic/serving.py, _convert_anthropic_to_openai_request, vLLM commit
/// 0001948bc): one system message of the `system` text and system-role messages' text, joined,
/// without Claude Code's "x-anthropic-billing-header" block (it holds a per-request hash); each
/// other message with its text (one text block: a string, else the parts), images as image_url
/// parts (a data URI for base64 sources), thinking blocks joined as `reasoning`, tool_use blocks as
/// `tool_calls` (arguments Python's json.dumps of `input`); a user's tool_result blocks as tool
/// messages before it (tool_call_id its tool_use_id, content its text parts joined by newlines;
/// its images as a user message, its tool references as a second tool message), an assistant's
/// as "Tool result: " and Python's str() of its content; a user message left without content is
/// dropped; tools as {type: function, function: {name, description, parameters: input_schema,
/// defer_loading?}}; chat_template_kwargs as given and output_config.effort as reasoning_effort.
/// Returns {messages, tools?, chat_template_kwargs?, reasoning_effort?}. Errors (kExitBadData): no
/// `messages` array, or a message that is not {role, content}.
Expected<Json> chat_from_messages(const Json& body);

/// The chat-completions request vLLM's frontend builds from a Responses body
/// (vllm/entrypoints/openai/responses/utils.py construct_input_messages and construct_tool_dicts,
/// protocol.py ResponsesRequest.build_chat_params, vLLM commit 01ca842d): `instructions` as a system
/// message, an `input` string as a user message, input items as messages (function_call and
/// custom_tool_call items as tool_calls merged into the assistant message before them,
/// function_call_output as tool messages, reasoning items as that message's `reasoning`, an
/// assistant message as its first text, other role items as they are); function tools as
/// {type: function, function: the tool without its type}; add_generation_prompt, or
/// continue_final_message when the last item is a message or reasoning in_progress or
/// incomplete; reasoning.effort as chat_template_kwargs.reasoning_effort. Returns {messages,
/// tools?, add_generation_prompt, continue_final_message, chat_template_kwargs?}. Errors
/// (kExitBadData) name what the engine keeps and dyn cannot see or what vLLM refuses:
/// previous_response_id or previous_response (earlier turns stored by the engine), encrypted
/// reasoning, an item type vLLM does not convert (item_reference, ...), no `input`.
Expected<Json> chat_from_responses(const Json& body);

/// Python's json.dumps(value) with its defaults (separators ", " and ": ", ensure_ascii): the
/// text vLLM puts in a converted tool call's arguments.
std::string python_json_dumps(const Json& value);

/// Python's str(value) of a JSON value as json.loads reads it (str of a string is the string;
/// containers as repr: {'k': 'v'}, [1, True, None]). Non-ASCII characters are kept, as Python
/// keeps printable ones; C1 controls and U+2028/2029 are escaped as Python escapes them.
std::string python_str(const Json& value);

}  // namespace dyn::api
