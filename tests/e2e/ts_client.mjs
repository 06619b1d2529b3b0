// A TypeScript-SDK client that behaves like Claude Code: on every tools/list_changed it fetches the
// tool list again, and it looks at the list it holds at the moment the find_tools result arrives.
// Usage: node ts_client.mjs stdio '<json [command, ...args]>' QUERY  |  node ts_client.mjs http URL QUERY
// Prints one JSON line: {first, atResult, found, events}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, query] = process.argv.slice(2);
// Generous: on a loaded 2-core CI machine a gateway can take long to start; order is what is checked.
const slow = { timeout: 300000 };
const client = new Client({ name: "toolweave-ts-e2e", version: "1.0.0" });
let tools = [];
const events = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  events.push("list_changed");
  const listed = await client.listTools(undefined, slow);
  tools = listed.tools.map((t) => t.name);
  events.push(`relisted:${tools.length}`);
});

let transport;
if (mode === "stdio") {
  const [command, ...args] = JSON.parse(target);
  transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target));
}
await client.connect(transport, slow);
tools = (await client.listTools(undefined, slow)).tools.map((t) => t.name);
const first = [...tools];
const result = await client.callTool({ name: "find_tools", arguments: { query } }, undefined, slow);
const atResult = [...tools];
events.push("result");
const found = (result.structuredContent?.tools ?? []).map((t) => t.name);
console.log(JSON.stringify({ first, atResult, found, events, published: result.structuredContent?.tool_list_changed }));
await client.close();
process.exit(0);
