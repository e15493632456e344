/**
 * Restart drill (docs/operations.md "The restart drill"; pico v3 §6.4, §8.1, §8.2): deploys and
 * crashes lose nothing, checked against the real `wrangler dev --local` (what `npm start` runs), once
 * per kill signal (SIGKILL and SIGTERM, in parallel, each with its own port and `--persist-to` directory):
 *
 * 1. start wrangler dev; create a session with the paced `echo-slow` model; accept a long input;
 * 2. while its answer streams, queue a followUp, a steer and a signed webhook input (202);
 * 3. kill the whole wrangler dev process group with the signal, mid-answer; start it again on the same
 *    persisted storage;
 * 4. send no request that reaches the session until its alarm has resumed it: the drill waits for the
 *    restarted Worker's own task log line (src/worker/log.ts) while only `GET /health` (answered by the
 *    Worker, never the session object) is polled. workerd re-arms persisted alarms when it starts, so
 *    the session's heartbeat alarm (set 30 s after the turn began) reopens it; a request that reached the
 *    session earlier fails the drill;
 * 5. poll reads only (GET /inputs/{id}, GET entries) until every input is terminal, and check: the long
 *    input is answered exactly once (its interrupted partial is display-only, `stopReason: "aborted"`),
 *    the followUp, the steer and the webhook input are placed after its answer (together, one group, at
 *    its final-answer boundary, §8.1) and answered once, and no assistant answer is duplicated;
 * 6. tools across the kill (docs/tools.md): before it, a local product endpoint (scripts/tool-endpoint.ts)
 *    holds the first request of `drill_http` (an idempotent HTTP tool) so the kill lands while the call is
 *    dispatched, and a `drill_approve` call (an HTTP tool with approval always) waits in the pending
 *    list; after the resume the same item is still pending, is approved, and both calls settle with one
 *    result each: drill_http reached the endpoint at most twice under one Idempotency-Key, drill_approve
 *    once; and a call of an MCP server's tool (docs/mcp.md "Calling MCP tools"): `drill__slow_report` of
 *    a local MCP server (scripts/mcp-endpoint.ts, registered with a sealed bearer header) reports progress
 *    once a second for 30 s, so the kill lands while it is dispatched; after the resume it is sent again
 *    (the tool declares idempotentHint) on a fresh connection and answers once: the server saw it at
 *    most twice, and the call has one result;
 * 7. (first run only) a WebSocket client on a plain TCP socket watches the conversation and the session
 *    is deleted: the server's close frame (1000, "the session was deleted") must come within
 *    CLOSE_BUDGET_MS of DELETE's response (it may come before it).
 *
 * Prints PASS/FAIL lines with timings and exits non-zero on failure. `npm run drill:restart`; .ci/run runs
 * it after the e2e check. Offline. Run by Node directly (type stripping); tokens and the webhook secret
 * come from scripts/token.ts and scripts/webhook-secret.ts with the drill's own secrets.
 */
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  check,
  DrillFailure,
  runScript,
  sleep,
  startDev as startWranglerDev,
  stopDev,
  textOf,
  waitHealthy,
  logLines,
  type Dev,
  type Entry,
  type InputResult,
  type LogLine,
} from "./drill-kit.ts";
import { startMcpEndpoint, type McpEndpoint } from "./mcp-endpoint.ts";
import { startToolEndpoint, type ToolEndpoint } from "./tool-endpoint.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const JWT_SECRET = "restart-drill-only-jwt-secret-0123456789";
const WEBHOOK_MASTER_SECRET = "restart-drill-only-webhook-master-secret";
const SECRETS_SEALING_KEY = "restart-drill-only-sealing-key-0123456789";
/** The MCP server's bearer token: registered as a header, stored sealed, sent on every request. */
const MCP_TOKEN = "restart-drill-only-mcp-bearer";
/** slow_report's steps, one a second: the kill lands while the call is dispatched. */
const MCP_STEPS = 30;
const TENANT = "drill";
const SESSION = "restart-drill";
/** echo-slow streams ~16 characters per 200 ms: this answer takes about 8 s, so the kill lands mid-answer. */
const LONG = `The long input of the restart drill. ${"Each sentence of it is echoed back slowly, sixteen characters at a time. ".repeat(8)}End.`;
const TEXTS = {
  followUp: "drill followUp: answered after the long input",
  steer: "drill steer: answered after the long input",
  webhook: "drill webhook: answered once",
} as const;

type Mode = "SIGKILL" | "SIGTERM";
/** A deleted session's watchers must get their close frame within this after DELETE answers. */
const CLOSE_BUDGET_MS = 3_000;
const PORTS: Record<Mode, { port: number; inspector: number; tools: number; mcp: number }> = {
  SIGKILL: { port: 8811, inspector: 9311, tools: 8821, mcp: 8831 },
  SIGTERM: { port: 8812, inspector: 9312, tools: 8822, mcp: 8832 },
};
/** The product endpoint holds drill_http's first request this long, so the kill lands while the call is dispatched. */
const HOLD_MS = 20_000;

function startDev(mode: Mode, persist: string, envFile: string): Dev {
  const { port, inspector } = PORTS[mode];
  return startWranglerDev({ root, port, inspector, persist, envFile, env: "dev" });
}

function script(name: string, args: readonly string[]): string {
  return runScript(root, name, args, { JWT_SECRET, WEBHOOK_MASTER_SECRET });
}

/**
 * A WebSocket client on a plain TCP socket (so the drill sees the close frame itself, not only the end of
 * the connection) watches the conversation; the session is deleted. Measured: when the server's close
 * frame arrives, from DELETE's response (the server sends it before answering, so it may be negative).
 * The client answers with its own close frame, completing the handshake, and ends the connection.
 */
async function closeAfterDelete(
  base: string,
  api: string,
  headers: Record<string, string>,
  operator: string,
): Promise<{ ms: number; sinceSent: number; code: number; reason: string }> {
  const minted = await fetch(`${api}/conversations/root/watch-token`, { method: "POST", headers, body: "{}" });
  const mintedText = await minted.text();
  check(minted.status === 201, `watch token: ${minted.status} ${mintedText}`);
  const { token } = JSON.parse(mintedText) as { token: string };
  const url = new URL(
    `${new URL(api).pathname}/conversations/root/watch?access_token=${encodeURIComponent(token)}`,
    base,
  );
  const socket = connect(Number(url.port), url.hostname);
  socket.write(
    [
      `GET ${url.pathname}${url.search} HTTP/1.1`,
      `Host: ${url.host}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}`,
      "Sec-WebSocket-Version: 13",
      "",
      "",
    ].join("\r\n"),
  );
  let buffer = Buffer.alloc(0);
  let upgraded = false;
  let frames = 0;
  let onView: () => void = () => undefined;
  let onClose: (close: { at: number; code: number; reason: string }) => void = () => undefined;
  const view = new Promise<void>((resolve) => (onView = resolve));
  const closed = new Promise<{ at: number; code: number; reason: string }>((resolve) => (onClose = resolve));
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    if (!upgraded) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString();
      if (!head.startsWith("HTTP/1.1 101"))
        throw new DrillFailure(`the WebSocket watch was refused: ${head.split("\r\n")[0] ?? ""}`);
      upgraded = true;
      buffer = buffer.subarray(end + 4);
    }
    // Server frames are unmasked: FIN/opcode, a 7-bit length (126: 16-bit, 127: 64-bit), the payload.
    while (buffer.length >= 2) {
      const opcode = (buffer[0] ?? 0) & 0x0f;
      let length = (buffer[1] ?? 0) & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffer.length < 4) return;
        length = buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffer.length < 10) return;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (buffer.length < offset + length) return;
      const payload = buffer.subarray(offset, offset + length);
      buffer = buffer.subarray(offset + length);
      if (opcode === 0x8) {
        const at = Date.now();
        // Answer with a masked close frame echoing the code, as RFC 6455 asks of a client.
        const mask = randomBytes(4);
        const code = payload.length >= 2 ? payload.subarray(0, 2) : Buffer.alloc(0);
        const masked = Buffer.from(code.map((byte, i) => byte ^ (mask[i % 4] ?? 0)));
        socket.end(Buffer.concat([Buffer.from([0x88, 0x80 | masked.length]), mask, masked]));
        onClose({
          at,
          code: payload.length >= 2 ? payload.readUInt16BE(0) : 1005,
          reason: payload.subarray(2).toString(),
        });
      } else if (opcode === 0x1 && ++frames === 1) {
        onView();
      }
    }
  });
  const opened = await Promise.race([view.then(() => true), sleep(30_000).then(() => false)]);
  if (!opened) socket.destroy();
  check(opened, "the WebSocket watch sent no view within 30 s");
  const sent = Date.now();
  const deleted = await fetch(api, { method: "DELETE", headers: { authorization: `Bearer ${operator}` } });
  const answered = Date.now();
  const deletedText = await deleted.text();
  check(deleted.status === 200, `DELETE session: ${deleted.status} ${deletedText}`);
  const outcome = await Promise.race([closed, sleep(30_000).then(() => undefined)]);
  socket.destroy();
  check(outcome !== undefined, "the WebSocket watch got no close frame within 30 s of the session's delete");
  return { ms: outcome.at - answered, sinceSent: outcome.at - sent, code: outcome.code, reason: outcome.reason };
}

/** The tool calls that cross the kill (docs/tools.md, docs/mcp.md): what the drill checks after the restart. */
interface ToolCalls {
  readonly endpoint: ToolEndpoint;
  readonly mcp: McpEndpoint;
  readonly conversations: { readonly http: number; readonly approve: number; readonly mcp: number };
  readonly inputs: { readonly http: number; readonly approve: number; readonly mcp: number };
  readonly pendingId: string;
}

type Json = <T>(response: Response, expected: number | readonly number[], what: string) => Promise<T>;

/**
 * Before the kill: define `drill_http` (idempotent; the endpoint holds its first reply) and `drill_approve`
 * (approval always), register the MCP server `drill`, fork the root three times at the start, call
 * drill_http, drill_approve and drill__slow_report one in each, and wait until the endpoint holds the
 * first, the second is in the pending list and the MCP server runs the third.
 */
async function toolsBeforeKill(
  mode: Mode,
  base: string,
  api: string,
  headers: Record<string, string>,
  json: Json,
): Promise<ToolCalls> {
  const endpoint = await startToolEndpoint({
    port: PORTS[mode].tools,
    tenant: TENANT,
    api: base,
    masterSecret: WEBHOOK_MASTER_SECRET,
    delayMs: 0,
    holdMs: HOLD_MS,
    log: () => undefined,
  });
  const operator = {
    ...headers,
    authorization: `Bearer ${script("token.ts", ["--tenant", TENANT, "--role", "operator", "--ttl", "900"])}`,
  };
  const parameters = { type: "object", properties: { id: { type: "integer" } }, required: ["id"] };
  const url = `http://127.0.0.1:${PORTS[mode].tools}`;
  await json(
    await fetch(`${base}/v1/tools/drill_http`, {
      method: "PUT",
      headers: operator,
      body: JSON.stringify({
        description: "drill: held reply",
        parameters,
        handler: { type: "http", url: `${url}/hold`, idempotent: true },
      }),
    }),
    [200, 201],
    "PUT drill_http",
  );
  await json(
    await fetch(`${base}/v1/tools/drill_approve`, {
      method: "PUT",
      headers: operator,
      body: JSON.stringify({
        description: "drill: approved call",
        parameters,
        handler: { type: "http", url: `${url}/lookup` },
        approval: "always",
      }),
    }),
    [200, 201],
    "PUT drill_approve",
  );
  const mcp = await startMcpEndpoint({ port: PORTS[mode].mcp, token: MCP_TOKEN, stepMs: 1_000, log: () => undefined });
  await json(
    await fetch(`${base}/v1/mcp-servers/drill`, {
      method: "PUT",
      headers: operator,
      body: JSON.stringify({ url: mcp.url, headers: { authorization: `Bearer ${MCP_TOKEN}` } }),
    }),
    [200, 201],
    "PUT the MCP server drill",
  );
  const fork = async (): Promise<number> =>
    (
      await json<{ conversationId: number }>(
        await fetch(`${api}/conversations/root/fork`, {
          method: "POST",
          headers,
          body: JSON.stringify({ at: "start" }),
        }),
        201,
        "fork at start",
      )
    ).conversationId;
  const conversations = { http: await fork(), approve: await fork(), mcp: await fork() };
  // A fork at the start has no config: each gets the echo model and the tools (the root keeps its own).
  for (const c of [conversations.http, conversations.approve, conversations.mcp]) {
    const selectedTools = c === conversations.mcp ? ["drill__slow_report"] : ["drill_http", "drill_approve"];
    await json(
      await fetch(`${api}/conversations/${c}/config`, {
        method: "PATCH",
        headers,
        body: JSON.stringify({ model: "echo/echo", selectedTools }),
      }),
      200,
      "PATCH the fork's config",
    );
  }
  const callIn = async (conversation: number, input: string): Promise<number> =>
    (
      await json<{ inputId: number }>(
        await fetch(`${api}/conversations/${conversation}/inputs`, {
          method: "POST",
          headers: { ...headers, "idempotency-key": `drill-${conversation}` },
          body: JSON.stringify({ input }),
        }),
        [201, 202],
        input,
      )
    ).inputId;
  const inputs = {
    http: await callIn(conversations.http, '/call drill_http {"id":1}'),
    approve: await callIn(conversations.approve, '/call drill_approve {"id":2}'),
    mcp: await callIn(conversations.mcp, `/call drill__slow_report {"steps":${MCP_STEPS}}`),
  };
  const by = Date.now() + 20_000;
  let pendingId: string | undefined;
  while (pendingId === undefined || endpoint.requests.length === 0 || mcp.calls.length === 0) {
    check(
      Date.now() < by,
      `before the kill: drill_http ${endpoint.requests.length === 0 ? "never reached the endpoint" : "is held"}, drill_approve ${pendingId === undefined ? "never pending" : "is pending"}, drill__slow_report ${mcp.calls.length === 0 ? "never reached the MCP server" : "runs"}`,
    );
    await sleep(100);
    const items = (
      await json<{ items: { id: string; name: string }[] }>(
        await fetch(`${api}/pending`, { headers }),
        200,
        "GET pending",
      )
    ).items;
    pendingId = items.find((item) => item.name === "drill_approve")?.id;
  }
  return { endpoint, mcp, conversations, inputs, pendingId };
}

/**
 * After the alarm resumed the session: the approval is still pending under the same id; approve it; every
 * call settles once. drill_http reached the endpoint at most twice, always under one Idempotency-Key (a
 * retry of the held request after the restart), drill_approve exactly once, drill__slow_report at most
 * twice (idempotent: sent again after the restart), answering "all green".
 */
async function toolsAfterResume(
  calls: ToolCalls,
  api: string,
  headers: Record<string, string>,
  json: Json,
): Promise<string> {
  const items = (
    await json<{ items: { id: string }[] }>(
      await fetch(`${api}/pending`, { headers }),
      200,
      "GET pending after the restart",
    )
  ).items;
  check(
    items.some((item) => item.id === calls.pendingId),
    `after the restart the pending list ${JSON.stringify(items)} lacks ${calls.pendingId}`,
  );
  await json(
    await fetch(`${api}/pending/${calls.pendingId}`, {
      method: "POST",
      headers,
      body: JSON.stringify({ approve: true }),
    }),
    200,
    "approve drill_approve",
  );
  const by = Date.now() + 60_000 + MCP_STEPS * 1_000;
  for (const which of ["http", "approve", "mcp"] as const) {
    for (;;) {
      const r = (
        await json<{ result: InputResult }>(
          await fetch(`${api}/inputs/${calls.inputs[which]}`, { headers }),
          200,
          `GET the drill_${which} input`,
        )
      ).result;
      if (r.status === "done" || r.status === "unanswered") {
        check(
          r.status === "done" && r.answer !== undefined,
          `the drill_${which} input ended ${JSON.stringify(r)}, not answered`,
        );
        break;
      }
      check(Date.now() < by, `the drill_${which} input is not answered 60 s after the restart: ${JSON.stringify(r)}`);
      await sleep(250);
    }
    const entries = (
      await json<{ items: Entry[] }>(
        await fetch(`${api}/conversations/${calls.conversations[which]}/entries?limit=200`, { headers }),
        200,
        "GET entries",
      )
    ).items;
    const results = entries.filter((e) => e.kind === "tool_result");
    check(results.length === 1, `the drill_${which} call has ${results.length} tool results, not exactly one`);
    if (which === "mcp")
      check(
        results[0] !== undefined && textOf(results[0]).includes("all green"),
        `drill__slow_report's result is not its answer: ${results[0] === undefined ? "none" : textOf(results[0]).slice(0, 200)}`,
      );
  }
  const http = calls.endpoint.requests.filter((r) => r.name === "drill_http");
  const approve = calls.endpoint.requests.filter((r) => r.name === "drill_approve");
  check(
    http.length >= 1 && http.length <= 2,
    `drill_http reached the endpoint ${http.length} times, not once or twice`,
  );
  check(
    new Set(http.map((r) => r.key)).size === 1 &&
      http.every((r) => new RegExp(`^${SESSION}:[0-9a-v]{10}:${r.taskId}$`).test(r.key)),
    `drill_http was sent under keys ${JSON.stringify(http.map((r) => r.key))}, not one {session}:{incarnation}:{taskId}`,
  );
  check(approve.length === 1, `drill_approve reached the endpoint ${approve.length} times, not once`);
  const reports = calls.mcp.calls.filter((c) => c.tool === "slow_report").length;
  check(reports >= 1 && reports <= 2, `drill__slow_report reached the MCP server ${reports} times, not once or twice`);
  return `tools across the kill: drill_http sent ${http.length}x under ${http[0]?.key ?? "?"}, ${calls.pendingId} still pending after the restart, approved, drill_approve sent once, drill__slow_report sent ${reports}x; one result per call`;
}

async function drill(mode: Mode, closeCheck: boolean): Promise<string[]> {
  const figures: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), `pico-restart-drill-${mode.toLowerCase()}-`));
  const envFile = join(dir, "drill.env");
  writeFileSync(
    envFile,
    [
      `JWT_SECRET=${JWT_SECRET}`,
      `WEBHOOK_MASTER_SECRET=${WEBHOOK_MASTER_SECRET}`,
      `SECRETS_SEALING_KEY=${SECRETS_SEALING_KEY}`,
      // Both releases start with it: the one before ignores it, the new one hashes erasures with it.
      "SUBJECT_HASH_KEY=restart-drill-only-subject-hash-key-0123456789",
      "",
    ].join("\n"),
  );
  const persist = join(dir, "state");
  const base = `http://127.0.0.1:${PORTS[mode].port}`;
  const t0 = Date.now();
  let dev = startDev(mode, persist, envFile);
  let tools: ToolCalls | undefined;
  try {
    await waitHealthy(dev, base, 120_000);
    figures.push(`first start ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const token = script("token.ts", ["--tenant", TENANT, "--role", "client", "--ttl", "900"]);
    const secret = script("webhook-secret.ts", ["--tenant", TENANT, "--session", SESSION]);
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const api = `${base}/v1/sessions/${SESSION}`;
    const json = async <T>(response: Response, expected: number | readonly number[], what: string): Promise<T> => {
      const text = await response.text();
      check(
        typeof expected === "number" ? response.status === expected : expected.includes(response.status),
        `${what}: ${response.status} ${text}`,
      );
      return JSON.parse(text) as T;
    };

    await json(
      await fetch(api, { method: "PUT", headers, body: JSON.stringify({ model: "echo/echo-slow" }) }),
      201,
      "PUT session",
    );
    tools = await toolsBeforeKill(mode, base, api, headers, json);
    const long = await json<{ inputId: number }>(
      await fetch(`${api}/conversations/root/inputs`, {
        method: "POST",
        headers: { ...headers, "idempotency-key": "drill-long" },
        body: JSON.stringify({ input: LONG }),
      }),
      [201, 202],
      "accept the long input",
    );
    const input = async (id: number): Promise<InputResult> =>
      (await json<{ result: InputResult }>(await fetch(`${api}/inputs/${id}`, { headers }), 200, `GET input ${id}`))
        .result;
    const queue = async (key: string, body: object, what: string): Promise<number> =>
      (
        await json<{ inputId: number }>(
          await fetch(`${api}/conversations/root/inputs`, {
            method: "POST",
            headers: { ...headers, "idempotency-key": key },
            body: JSON.stringify(body),
          }),
          [201, 202],
          what,
        )
      ).inputId;
    const followUp = await queue("drill-followup", { input: TEXTS.followUp, mode: "followUp" }, "queue the followUp");
    const steer = await queue("drill-steer", { input: TEXTS.steer, mode: "steer" }, "queue the steer");
    const body = JSON.stringify({ input: TEXTS.webhook });
    const timestamp = Math.floor(Date.now() / 1000);
    const deliveryId = `msg_drill_${mode.toLowerCase()}`;
    const signature = `v1,${createHmac("sha256", Buffer.from(secret.slice("whsec_".length), "base64"))
      .update(`${deliveryId}.${timestamp}.${body}`)
      .digest("base64")}`;
    const webhook = (
      await json<{ inputId: number }>(
        await fetch(`${base}/v1/webhooks/${TENANT}/${SESSION}/root`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "webhook-id": deliveryId,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signature,
          },
          body,
        }),
        202,
        "the signed webhook input",
      )
    ).inputId;
    for (const [id, what] of [
      [followUp, "followUp"],
      [steer, "steer"],
      [webhook, "webhook"],
    ] as const) {
      check((await input(id)).status === "queued", `the ${what} input is not queued behind the long input`);
    }
    // Mid-answer: the long input is placed and its generation has streamed for a while, not finished.
    const placedBy = Date.now() + 20_000;
    while ((await input(long.inputId)).status !== "placed") {
      check(Date.now() < placedBy, "the long input was never placed");
      await sleep(100);
    }
    await sleep(2_000);
    check(
      (await input(long.inputId)).status === "placed",
      "the long input was answered before the kill (not mid-answer)",
    );

    const killedAt = Date.now();
    const stopped = await stopDev(dev, mode, 15_000);
    figures.push(
      `${mode} took the group down in ${stopped.ms} ms${stopped.forced ? " (SIGTERM did not end it within 15 s: SIGKILL followed)" : ""}`,
    );

    // Restart on the same storage. Only /health (the Worker, no session object) until the alarm resumes it.
    const restarted = Date.now();
    dev = startDev(mode, persist, envFile);
    await waitHealthy(dev, base, 120_000);
    const up = Date.now();
    figures.push(`restart ready ${((up - restarted) / 1000).toFixed(1)} s after the kill`);
    const resumeDeadline = Date.now() + 60_000;
    let resumedBy: LogLine | undefined;
    for (;;) {
      const lines = logLines(dev);
      check(
        !lines.some((l) => l.type === "request" && l.session !== undefined),
        "a request reached the session before its alarm resumed it",
      );
      resumedBy = lines.find((l) => l.type === "task");
      if (resumedBy !== undefined) break;
      check(
        Date.now() < resumeDeadline && !dev.exited,
        `the session did not resume without a request within 60 s of the restart (alarm never fired)${dev.exited ? "; wrangler dev exited" : ""}`,
      );
      await sleep(200);
    }
    // The task line is written when the invocation returns; it started durationMs earlier.
    const resumed = Date.now() - (resumedBy.durationMs ?? 0);
    figures.push(
      `resumed by its alarm alone: ${resumedBy.kind ?? "?"} ${resumedBy.method ?? "?"} started ~${((resumed - killedAt) / 1000).toFixed(1)} s after the kill, ~${((resumed - up) / 1000).toFixed(1)} s after the restart answered /health; no request reached the session before`,
    );

    // Reads only from here.
    const ids = { long: long.inputId, followUp, steer, webhook };
    const results: Record<keyof typeof ids, InputResult> = {
      long: { status: "queued" },
      followUp: { status: "queued" },
      steer: { status: "queued" },
      webhook: { status: "queued" },
    };
    const doneBy = Date.now() + 60_000;
    for (;;) {
      for (const key of Object.keys(ids) as (keyof typeof ids)[]) results[key] = await input(ids[key]);
      if (Object.values(results).every((r) => r.status === "done" || r.status === "unanswered")) break;
      check(Date.now() < doneBy, `inputs not terminal 60 s after the restart: ${JSON.stringify(results)}`);
      await sleep(250);
    }
    figures.push(`all four answered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
    figures.push(await toolsAfterResume(tools, api, headers, json));
    const entries = (
      await json<{ items: Entry[] }>(
        await fetch(`${api}/conversations/root/entries?limit=200`, { headers }),
        200,
        "GET entries",
      )
    ).items;
    const answers = entries.filter((e) => e.model?.[0]?.role === "assistant");
    const partials = answers.filter((e) => e.model?.[0]?.stopReason === "aborted");
    const finals = answers.filter(
      (e) => e.model?.[0]?.stopReason !== "aborted" && e.model?.[0]?.stopReason !== "error",
    );

    for (const key of Object.keys(ids) as (keyof typeof ids)[]) {
      const r = results[key];
      check(r.status === "done" && r.answer !== undefined, `the ${key} input ended ${JSON.stringify(r)}, not answered`);
    }
    const answerOf = (key: keyof typeof ids): number => (results[key] as { answer: number }).answer;
    const longFinals = finals.filter((e) => textOf(e) === LONG);
    check(longFinals.length === 1, `the long input has ${longFinals.length} final answers, not exactly one`);
    check(longFinals[0]?.id === answerOf("long"), "the long input's result does not name its one final answer");
    for (const partial of partials)
      check(
        LONG.startsWith(textOf(partial)) && textOf(partial).length < LONG.length,
        `a display-only partial is not a prefix of the long answer: ${textOf(partial).slice(0, 60)}`,
      );
    for (const key of ["followUp", "steer", "webhook"] as const) {
      check(answerOf(key) > answerOf("long"), `the ${key} input was answered before the long input`);
    }
    const texts = finals.map(textOf);
    check(
      new Set(texts).size === texts.length,
      `duplicate assistant answers: ${JSON.stringify(texts.map((t) => t.slice(0, 40)))}`,
    );
    const answerIds = new Set(Object.keys(ids).map((k) => answerOf(k as keyof typeof ids)));
    for (const id of answerIds)
      check(
        finals.some((e) => e.id === id),
        `answer entry ${id} is not a final assistant entry`,
      );
    check(
      finals.length === answerIds.size,
      `${finals.length} final assistant entries for ${answerIds.size} distinct answers`,
    );
    // Placed after the long answer (a new group at its final-answer boundary, §8.1), answered after that.
    for (const key of ["followUp", "steer", "webhook"] as const) {
      const r = results[key] as { entry: number; answer: number };
      check(
        r.entry > answerOf("long") && r.answer > r.entry,
        `the ${key} input was placed at entry ${r.entry} and answered at ${r.answer}, not after the long answer ${answerOf("long")}`,
      );
    }
    if (closeCheck) {
      const operator = script("token.ts", ["--tenant", TENANT, "--role", "operator", "--ttl", "900"]);
      const close = await closeAfterDelete(base, api, headers, operator);
      figures.push(
        `WebSocket watch after DELETE session: close frame ${close.sinceSent} ms after DELETE was sent, ${close.ms} ms after it answered (code ${close.code}, "${close.reason}")`,
      );
      check(
        close.ms < CLOSE_BUDGET_MS,
        `the WebSocket's close frame came ${close.ms} ms after the session was deleted (budget ${CLOSE_BUDGET_MS} ms)`,
      );
      check(
        close.code === 1000 && close.reason === "the session was deleted",
        `the WebSocket closed with ${close.code} "${close.reason}", not 1000 "the session was deleted"`,
      );
    }
    figures.push(
      `${partials.length} display-only partial${partials.length === 1 ? "" : "s"}, ${finals.length} final answers (${answerIds.size} distinct answer entries for 4 inputs)`,
    );
    return figures;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new DrillFailure(
      `${message}\n${figures.map((f) => `  ${f}`).join("\n")}\n--- wrangler dev (last 30 lines) ---\n${dev.log.split("\n").slice(-30).join("\n")}`,
    );
  } finally {
    await tools?.endpoint.close();
    await tools?.mcp.close();
    await stopDev(dev, "SIGTERM", 10_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

const modes: Mode[] = process.argv.includes("--kill-only")
  ? ["SIGKILL"]
  : process.argv.includes("--term-only")
    ? ["SIGTERM"]
    : ["SIGKILL", "SIGTERM"];
const started = Date.now();
// The WebSocket close check runs once, in the first run, after its restart checks.
const outcomes = await Promise.allSettled(modes.map((mode, i) => drill(mode, i === 0)));
let failed = false;
outcomes.forEach((outcome, i) => {
  const mode = modes[i] as Mode;
  if (outcome.status === "fulfilled") {
    console.log(`restart drill ${mode}: PASS`);
    for (const figure of outcome.value) console.log(`  ${figure}`);
  } else {
    failed = true;
    console.log(
      `restart drill ${mode}: FAIL: ${outcome.reason instanceof Error ? outcome.reason.message : String(outcome.reason)}`,
    );
  }
});
console.log(
  `restart drill: ${failed ? "FAIL" : "PASS"} (${modes.join(", ")}; ${((Date.now() - started) / 1000).toFixed(1)} s)`,
);
process.exit(failed ? 1 : 0);
