// Tests of the chat form vLLM's frontend converts Anthropic Messages and Responses bodies to
// (issue 51.3), and the Python spellings it puts in it.
#include <doctest/doctest.h>

#include "dyn/api/chat_form.h"

using dyn::Json;
using namespace dyn::api;

TEST_CASE("python_json_dumps spells JSON as Python's json.dumps with its defaults") {
  // json.dumps({"b": 1, "a": [True, None, "é\n"], "f": 1.5, "e": 1e16, "s": 1e-05, "k": 1e15}) in CPython 3.
  Json v = Json::parse(R"({"b": 1, "a": [true, null, "é\n"], "f": 1.5, "e": 1e16, "s": 0.00001, "k": 1e15})");
  CHECK(python_json_dumps(v) ==
        R"({"b": 1, "a": [true, null, "\u00e9\n"], "f": 1.5, "e": 1e+16, "s": 1e-05, "k": 1000000000000000.0})");
  CHECK(python_json_dumps(Json::object()) == "{}");
  CHECK(python_json_dumps(Json::parse(R"({"path": "/tmp/a b", "n": -3})")) == R"({"path": "/tmp/a b", "n": -3})");
}

TEST_CASE("python_str: a string as itself, containers as Python's repr") {
  CHECK(python_str(Json("plain\ntext")) == "plain\ntext");
  // str([{"type": "text", "text": "it's"}, {"ok": True, "v": None, "x": 0.5}])
  Json v = Json::parse(R"([{"type": "text", "text": "it's"}, {"ok": true, "v": null, "x": 0.5}])");
  CHECK(python_str(v) == R"([{'type': 'text', 'text': "it's"}, {'ok': True, 'v': None, 'x': 0.5}])");
  // Both quotes: single quotes, the inner one escaped; controls escaped; printable non-ASCII kept.
  CHECK(python_str(Json::array({"a'b\"c", "tab\there\x01", "ünï\xc2\xa0"})) ==
        R"(['a\'b"c', 'tab\there\x01', 'ünï\xa0'])");
}

TEST_CASE("chat_from_messages: a Claude Code turn in vLLM's chat form") {
  Json body = Json::parse(R"({
    "model": "m", "max_tokens": 64, "stream": true,
    "system": [{"type": "text", "text": "You are Claude Code. "}, {"type": "text", "text": "Be brief."}],
    "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
              {"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "fix main.c"}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "look first", "signature": "s"},
                                        {"type": "text", "text": "Reading it."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "Read",
                                         "input": {"path": "main.c", "limit": 10}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                    "content": [{"type": "text", "text": "int main(){}"}]},
                                   {"type": "text", "text": "go on"}]},
      {"role": "user", "content": [{"type": "text", "text": ""}]},
      {"role": "user", "content": "thanks"}]})");
  auto chat = chat_from_messages(body);
  REQUIRE(chat);
  Json want = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are Claude Code. Be brief."},
      {"role": "user", "content": "fix main.c"},
      {"role": "assistant", "reasoning": "look first",
       "tool_calls": [{"id": "toolu_1", "type": "function",
                       "function": {"name": "Read", "arguments": "{\"path\": \"main.c\", \"limit\": 10}"}}],
       "content": "Reading it."},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "int main(){}"},
      {"role": "user", "content": "go on"},
      {"role": "user", "content": "thanks"}],
    "tools": [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                                "parameters": {"type": "object"}}},
              {"type": "function", "function": {"name": "Bash", "description": null,
                                                "parameters": {"type": "object"}}}]})");
  CHECK(chat->dump() == want.dump());
  // An assistant's tool result becomes text; a message of two text blocks keeps its parts.
  auto two = chat_from_messages(Json::parse(R"({"messages": [{"role": "assistant", "content": [
      {"type": "text", "text": "a"}, {"type": "tool_result", "content": "ok"}]}]})"));
  REQUIRE(two);
  CHECK((*two)["messages"][0]["content"].dump() ==
        R"([{"type":"text","text":"a"},{"type":"text","text":"Tool result: ok"}])");
  CHECK_FALSE(chat_from_messages(Json::parse(R"({"messages": [{"role": "user"}]})")));
  // Claude Code's attribution block (a per-request hash) is not in the engine's prompt; system
  // messages join the system prompt; a tool result's text parts are joined by newlines, its images
  // follow as a user message; an empty assistant turn stays.
  auto cc = chat_from_messages(Json::parse(R"({
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=4f2a;"},
               {"type": "text", "text": "You are Claude Code."}],
    "output_config": {"effort": "low"}, "chat_template_kwargs": {"enable_thinking": true},
    "messages": [{"role": "system", "content": " Be brief."},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}]}]},
                 {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "zz"}]}]})"));
  REQUIRE(cc);
  CHECK(cc->dump() == Json::parse(R"({"messages": [
          {"role": "system", "content": "You are Claude Code. Be brief."},
          {"role": "tool", "tool_call_id": "t1", "content": "a\nb"},
          {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ=="}}]},
          {"role": "assistant"}],
          "chat_template_kwargs": {"enable_thinking": true}, "reasoning_effort": "low"})")
                          .dump());
  CHECK_FALSE(chat_from_messages(Json::parse(R"({"system": "x"})")));
}

TEST_CASE("chat_from_responses: a Codex turn in vLLM's chat form") {
  Json body = Json::parse(R"({
    "model": "m", "instructions": "You are Codex.", "reasoning": {"effort": "high"},
    "tools": [{"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"},
               "strict": false},
              {"type": "web_search"}],
    "input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "use ls"}]},
      {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{\"cmd\":\"pwd\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "a.c"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one file"}]}]})");
  auto chat = chat_from_responses(body);
  REQUIRE(chat);
  Json want = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are Codex."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
      {"role": "assistant", "reasoning": "use ls",
       "tool_calls": [{"id": "call_1", "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}, "type": "function"},
                      {"id": "call_2", "function": {"name": "shell", "arguments": "{\"cmd\":\"pwd\"}"}, "type": "function"}]},
      {"role": "tool", "content": "a.c", "tool_call_id": "call_1"},
      {"role": "assistant", "content": "one file"}],
    "tools": [{"type": "function", "function": {"name": "shell", "description": "run",
                                                "parameters": {"type": "object"}, "strict": false}}],
    "add_generation_prompt": true, "continue_final_message": false,
    "chat_template_kwargs": {"reasoning_effort": "high"}})");
  CHECK(chat->dump() == want.dump());

  auto simple = chat_from_responses(Json::parse(R"({"input": "hi"})"));
  REQUIRE(simple);
  CHECK((*simple)["messages"].dump() == R"([{"role":"user","content":"hi"}])");
  // A partial assistant message is continued, not answered.
  auto partial = chat_from_responses(Json::parse(
      R"({"input": [{"role": "user", "content": "q"},
                    {"type": "message", "role": "assistant", "status": "incomplete", "content": "The answ"}]})"));
  REQUIRE(partial);
  CHECK((*partial)["continue_final_message"] == true);
  CHECK((*partial)["add_generation_prompt"] == false);
  // What the engine keeps or refuses makes the precise form unavailable, with the reason.
  auto stored = chat_from_responses(Json::parse(R"({"previous_response_id": "resp_1", "input": "more"})"));
  REQUIRE_FALSE(stored);
  CHECK(stored.error().message.find("previous_response_id") == 0);
  CHECK_FALSE(chat_from_responses(Json::parse(R"({"input": [{"type": "item_reference", "id": "x"}]})")));
  CHECK_FALSE(chat_from_responses(
      Json::parse(R"({"input": [{"type": "reasoning", "encrypted_content": "zz", "summary": []}]})")));
}
