// Deterministic request rendering to text (SPEC 4.2): the one renderer every tool uses.
#pragma once

#include <optional>
#include <string>

#include "dyn/base/json.h"
#include "dyn/tokens/hash.h"

namespace simdjson::dom {
class element;
}  // namespace simdjson::dom

namespace dyn::tokens {

/// Renders an API request body to the text that is tokenized (4 bytes per token):
/// tools (compact JSON each, in order, one per line); then instructions (Anthropic `system`
/// string or text blocks, Responses `instructions`); then the conversation (chat/Anthropic
/// `messages`, Responses `input` string or items): per item its role (or item type), '\n',
/// its text (text parts concatenated; a tool call as name + arguments; a tool result as its
/// output), '\n'. A /v1/completions `prompt` (string, or array of strings joined) is returned
/// as is. Unknown fields are ignored; a body that is not an object renders to "".
/// Property: a request whose conversation extends an earlier one renders to a text that starts
/// with the earlier text, so it shares the earlier prefix blocks.
/// Unknown fields, and known ones of another type (a numeric `type`), are ignored.
std::string render_request(const Json& body);

/// render_request over a body parsed by simdjson's DOM parser: the same renderer, so the same text
/// as render_request(Json::parse(text)) of the same text, at a fraction of the cost (no Json tree;
/// dyn-route serve reads every request this way, issue 16). nullopt when the two readings could
/// differ: an object the renderer reads repeats a key (a Json tree keeps one of the members); the
/// caller renders a Json of the body instead. `reserve`: bytes to allocate up front (the body's
/// size bounds the text of a long conversation closely: growing a 600 KB text by doubling copied
/// it about once more, issue 54).
std::optional<std::string> render_request_dom(simdjson::dom::element body, size_t reserve = 0);
/// render_request_dom's text, appended to `out` piece by piece as it is rendered, never held
/// whole: dyn-route serve hashes a prompt's blocks straight from the parsed body's strings
/// (issue 54: the rendered copy of a 600 KB prompt was one more pass over it, and an allocation
/// as large). False where render_request_dom gives nullopt (`out` then holds part of the text).
bool render_request_dom(simdjson::dom::element body, TextBlockHasher& out);

}  // namespace dyn::tokens
