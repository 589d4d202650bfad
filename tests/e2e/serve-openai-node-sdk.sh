# Shows that the official OpenAI Node SDK (npm package `openai`, installed by this test into its
# temporary folder) streams chat completions through dyn-route serve over dyn-mocker: content
# arrives chunk by chunk, the usage chunk the router asked for is hidden when the SDK did not ask
# for usage and present when it did, the x-dyn-worker header is readable, and a session's two
# calls land on one worker. Skipped (exit 77) only when npm cannot reach its registry.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed" >&2; exit 77; }
mkdir -p sdk
if ! (cd sdk && npm init -y >/dev/null 2>&1 && timeout 180 npm install --no-audit --no-fund --loglevel=error openai >npm.log 2>&1); then
  echo "skip: npm could not install the openai package (registry unreachable?): $(tail -3 sdk/npm.log)" >&2
  exit 77
fi
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 60
cat >sdk/run.js <<'JS'
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;
async function main() {
  const client = new OpenAI({ baseURL: process.env.BASE + '/v1', apiKey: 'dummy',
                              defaultHeaders: { 'x-session-id': 'node-sdk-1' } });
  const workers = [];
  for (const askUsage of [false, true]) {
    const req = { model: 'mock-model', stream: true, max_tokens: 8,
                  messages: [{ role: 'user', content: 'Say hello from the Node SDK.' }] };
    if (askUsage) req.stream_options = { include_usage: true };
    const { data: stream, response } = await client.chat.completions.create(req).withResponse();
    workers.push(response.headers.get('x-dyn-worker'));
    let chunks = 0, text = '', usage = null, finish = null;
    for await (const c of stream) {
      chunks++;
      if (c.usage) usage = c.usage;
      const ch = c.choices && c.choices[0];
      if (ch && ch.delta && ch.delta.content) text += ch.delta.content;
      if (ch && ch.finish_reason) finish = ch.finish_reason;
    }
    console.log(`include_usage=${askUsage}: chunks>1 ${chunks > 1}, text ${text.length > 0 ? 'non-empty' : 'EMPTY'}, ` +
                `finish_reason ${finish}, usage ${usage ? 'completion_tokens=' + usage.completion_tokens : 'absent'}`);
  }
  console.log(`x-dyn-worker present: ${workers.every(w => w !== null)}, same worker: ${workers[0] === workers[1]}`);
}
main().catch(e => { console.error(e); process.exit(1); });
JS
BASE="$r_url" node sdk/run.js
