# Shows that dyn-mocker's Anthropic /v1/messages and OpenAI /v1/responses answer what the official
# SDKs parse (npm @anthropic-ai/sdk and openai, installed by this test into its temporary folder),
# streaming and not, for text and for --replies tool calls, directly and through dyn-route serve:
# the SDKs' stream helpers rebuild the final message/response from the events (text, tool_use
# input from input_json_delta, function_call arguments), stop reasons and usage are right, and a
# follow-up turn that ends with the tool result gets the after_tool reply. Also checks the event
# order on the wire with curl, and that a bad body gets a 400 in each API's own error shape.
# SDK versions are pinned (openai 6.49.0, @anthropic-ai/sdk 1.14.0) so the goldens do not move.
# Skipped (exit 77) only when npm cannot install the packages.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed" >&2; exit 77; }
mkdir -p sdk
if ! (cd sdk && npm init -y >/dev/null 2>&1 &&
      timeout 300 npm install --no-audit --no-fund --loglevel=error openai@6.49.0 @anthropic-ai/sdk@1.14.0 >npm.log 2>&1); then
  echo "skip: npm could not install openai and @anthropic-ai/sdk (registry unreachable?): $(tail -3 sdk/npm.log | tr '\n' ' ')" >&2
  exit 77
fi
cat >replies.jsonl <<'J'
{"match":"WEATHER","first_turn":true,"offered":"get_weather","tool_call":{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}
{"match":"WEATHER","first_turn":true,"offered":"get_weather","tool_call":{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}
{"match":"WEATHER","first_turn":true,"offered":"get_weather","tool_call":{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}
{"match":"WEATHER","first_turn":true,"offered":"get_weather","tool_call":{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}
{"after_tool":"get_weather","text":"It is sunny in Paris."}
{"after_tool":"get_weather","text":"It is sunny in Paris."}
{"text":"Hello from the mock, ünïcode included."}
J
start_mocker w0 --worker-id 0 --replies replies.jsonl
start_mocker w1 --worker-id 1 --replies replies.jsonl
start_router r --worker "$w1_url" --router-session-affinity-ttl-secs 60
cat >sdk/run.js <<'JS'
const OpenAI = (m => m.OpenAI || m.default || m)(require('openai'));
const Anthropic = (m => m.Anthropic || m.default || m)(require('@anthropic-ai/sdk'));
// Event types in order, consecutive repeats folded to "type*N".
const fold = types => types.reduce((a, t) => {
  const last = a[a.length - 1];
  if (last && last.t === t) last.n++; else a.push({ t, n: 1 });
  return a; }, []).map(x => x.n > 1 ? `${x.t}*${x.n}` : x.t).join(' ');
async function main() {
  const base = process.env.BASE;
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: 'dummy', maxRetries: 0 });
  const an = new Anthropic({ baseURL: base, apiKey: 'dummy', maxRetries: 0 });
  const fnTool = { type: 'function', name: 'get_weather', description: 'weather',
                   parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } };
  const anTool = { name: 'get_weather', description: 'weather',
                   input_schema: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } };

  // ---- OpenAI Responses ----
  let r = await oa.responses.create({ model: 'mock-model', input: 'Say hello.', max_output_tokens: 64 });
  console.log(`responses text: "${r.output_text}" status ${r.status} output_tokens ${r.usage.output_tokens}`);
  let s = oa.responses.stream({ model: 'mock-model', input: 'Say hello.', max_output_tokens: 64 });
  let types = [];
  for await (const e of s) types.push(e.type);
  r = await s.finalResponse();
  console.log(`responses stream text: "${r.output_text}" status ${r.status}`);
  console.log(`  events: ${fold(types)}`);
  r = await oa.responses.create({ model: 'mock-model', input: 'WEATHER in Paris?', tools: [fnTool] });
  let fc = r.output[0];
  console.log(`responses tool call: ${fc.type} ${fc.name} ${fc.arguments} call_id ${fc.call_id ? 'set' : 'MISSING'}`);
  s = oa.responses.stream({ model: 'mock-model', input: 'WEATHER in Paris?', tools: [fnTool] });
  types = [];
  for await (const e of s) types.push(e.type);
  r = await s.finalResponse();
  fc = r.output[0];
  console.log(`responses stream tool call: ${fc.type} ${fc.name} ${fc.arguments}`);
  console.log(`  events: ${fold(types)}`);
  r = await oa.responses.create({ model: 'mock-model', tools: [fnTool], input: [
    { role: 'user', content: 'WEATHER in Paris?' },
    { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
    { type: 'function_call_output', call_id: fc.call_id, output: '{"sky":"clear"}' }] });
  console.log(`responses after tool result: "${r.output_text}"`);

  // ---- Anthropic Messages ----
  let m = await an.messages.create({ model: 'mock-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
  console.log(`messages text: "${m.content[0].text}" stop ${m.stop_reason} output_tokens ${m.usage.output_tokens}`);
  let ms = an.messages.stream({ model: 'mock-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
  types = [];
  for await (const e of ms) types.push(e.type);
  m = await ms.finalMessage();
  console.log(`messages stream text: "${m.content[0].text}" stop ${m.stop_reason} output_tokens ${m.usage.output_tokens}`);
  console.log(`  events: ${fold(types)}`);
  m = await an.messages.create({ model: 'mock-model', max_tokens: 64, tools: [anTool],
                                 messages: [{ role: 'user', content: 'WEATHER in Paris?' }] });
  let tu = m.content[0];
  console.log(`messages tool use: ${tu.type} ${tu.name} ${JSON.stringify(tu.input)} stop ${m.stop_reason}`);
  ms = an.messages.stream({ model: 'mock-model', max_tokens: 64, tools: [anTool],
                            messages: [{ role: 'user', content: 'WEATHER in Paris?' }] });
  types = [];
  for await (const e of ms) types.push(e.type);
  m = await ms.finalMessage();
  tu = m.content[0];
  console.log(`messages stream tool use: ${tu.type} ${tu.name} ${JSON.stringify(tu.input)} stop ${m.stop_reason}`);
  console.log(`  events: ${fold(types)}`);
  m = await an.messages.create({ model: 'mock-model', max_tokens: 64, tools: [anTool], messages: [
    { role: 'user', content: 'WEATHER in Paris?' },
    { role: 'assistant', content: [tu] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: 'clear sky' }] }] });
  console.log(`messages after tool result: "${m.content[0].text}" stop ${m.stop_reason}`);
  // Errors keep each API's shape and the SDKs raise them as 400s.
  try { await an.messages.create({ model: 'mock-model', max_tokens: 0, messages: [] }); console.log('messages bad body: accepted?!'); }
  catch (e) { console.log(`messages bad body: ${e.status} ${e.error && e.error.type} / ${e.error && e.error.error && e.error.error.type}`); }
  try { await oa.responses.create({ model: 'mock-model', input: 42 }); console.log('responses bad body: accepted?!'); }
  catch (e) { console.log(`responses bad body: ${e.status} ${e.type}`); }
}
main().catch(e => { console.error(e); process.exit(1); });
JS
echo "== direct to dyn-mocker"
BASE="$w0_url" node sdk/run.js
echo "== through dyn-route serve"
BASE="$r_url" node sdk/run.js
echo "== wire order (curl, streamed)"
for api in responses messages; do
  if [[ $api == responses ]]; then body='{"model":"m","stream":true,"input":"Say hello.","max_output_tokens":3}'
  else body='{"model":"m","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"Say hello."}]}'; fi
  curl -sS -N "$w0_url/v1/$api" -H 'content-type: application/json' -d "$body" >sse.txt
  # Every event line names the type that its data carries.
  echo "$api: $(grep '^event: ' sse.txt | cut -c8- | uniq -c | awk '{printf "%s%s ", $2, ($1>1 ? "*" $1 : "")}' | sed 's/ $//')"
  paste -d' ' <(grep '^event: ' sse.txt | cut -c8-) <(grep '^data: ' sse.txt | cut -c7- | jq -r .type) |
    awk '$1 != $2 {bad++} END {print "  event names match data types: " (bad ? "no" : "yes")}'
done
