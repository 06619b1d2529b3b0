// A TypeScript-SDK client that answers elicitation as Claude Code declares it (`elicitation: {}`: forms,
// the 2025-06-18 shape): it accepts every form with {sure: true} and records what it was asked.
// Usage: node ts_elicit.mjs '<json [command, ...args]>' TOOL '<json arguments>'
// Calls TOOL (again while the gateway is still connecting its upstream) with each arguments object in
// turn, and prints one JSON line: {answers: [text, ...], asked: [params, ...]}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [target, tool, calls] = process.argv.slice(2);
const slow = { timeout: 300000 };
const client = new Client({ name: "toolweave-ts-elicit", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params);
  return { action: "accept", content: { sure: true } };
});
const [command, ...args] = JSON.parse(target);
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" }), slow);
const text = (result) => (result.content ?? []).map((c) => c.text ?? "").join("");
const answers = [];
for (const callArgs of JSON.parse(calls)) {
  let result = await client.callTool({ name: tool, arguments: callArgs }, undefined, slow);
  for (let tries = 0; result.isError && /unknown_tool|unavailable/.test(text(result)) && tries < 120; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    result = await client.callTool({ name: tool, arguments: callArgs }, undefined, slow);
  }
  answers.push(text(result));
}
console.log(JSON.stringify({ answers, asked }));
await client.close();
process.exit(0);
