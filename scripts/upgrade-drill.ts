/**
 * Upgrade drill (docs/operations.md "The upgrade drill"): work in flight on the previous release continues
 * exactly once on this one, over the real `wrangler dev --local` and one shared `--persist-to` directory.
 *
 * 1. The previous release is the commit named in `.ci/upgrade-from` (a missing commit fails the drill): a
 *    detached git worktree of it in a temporary directory with its own `npm ci`. It runs as its wrangler.toml
 *    says development runs (`--env dev` when it has `[env.dev]`, else the top level), and so does this tree;
 *    both name the Worker "pico-edge" with the same classes, so Durable Object ids and storage carry over.
 * 2. On the previous release, at once: a turn mid-answer (the paced echo model, with a chat resume stream
 *    open on it), a queued followUp, an approval on the pending list, an HTTP tool call answered
 *    202 whose result comes later, a client tool waiting, a sleeping recurring job, a schedule due during the
 *    switch, a rig with an active hook and its witness, an outbox delivery retrying against an endpoint that
 *    answers 503, limits with counts for two users, a profile at version 2, and a session with a retention
 *    timer.
 * 3. SIGTERM the previous release (as a deploy does), start this tree on the same state, and check that
 *    everything continues exactly once (see `after` below), then stop it and read every object's SQLite file:
 *    each session and directory is at this tree's schema version.
 *
 * Waits: the witness patrols every 5 s (PATCH /witness), the schedule, made last, is due 4 s later (while neither release runs), the job
 * repeats every 45 s; the outbox's backoff (5 s, 30 s, 2 min) is fixed in both releases (no var), so the
 * receiver comes back before the third attempt. Ports 8814 (inspector 8914), fakes on 8815-8816.
 * Prints one PASS/FAIL line; `npm run drill:upgrade`; .ci/run runs it after the restart drill. Offline.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import {
  check,
  devEnvOf,
  DrillFailure,
  expectJson,
  previousRelease,
  removeInBackground,
  runScript,
  sleep,
  startDev,
  stopDev,
  textOf,
  waitHealthy,
  type Dev,
  type Entry,
  type InputResult,
} from "./drill-kit.ts";
import { startToolEndpoint, toolSecret, type ToolEndpoint } from "./tool-endpoint.ts";

const NAME = "Work in flight on the previous release continues exactly once after the upgrade";
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const JWT_SECRET = "upgrade-drill-only-jwt-secret-0123456789";
const WEBHOOK_MASTER_SECRET = "upgrade-drill-only-webhook-master-secret";
const SECRETS_SEALING_KEY = "upgrade-drill-only-sealing-key-0123456789";
const TENANT = "upgrade";
const PORT = 8814;
const INSPECTOR = 8914;
const TOOLS_PORT = 8815;
const EVENTS_PORT = 8816;
const BASE = `http://127.0.0.1:${PORT}`;
const S = {
  main: "upgrade-main",
  events: "upgrade-events",
  rig: "upgrade-rig",
  retained: "upgrade-retained",
} as const;
const USERS = ["upgrade-user-1", "upgrade-user-2"] as const;
/** echo-slow streams ~16 characters per 200 ms: this answer takes ~10 s, so the switch lands mid-answer. */
const LONG = `The long answer of the upgrade drill. ${"Each sentence of it is echoed back slowly, sixteen characters at a time. ".repeat(10)}End.`;
const FOLLOW_UP = "upgrade followUp: answered after the long answer";
const SCHEDULED = "upgrade schedule: due during the switch";
/** The schedule is made last before the SIGTERM: due while neither release runs (a start takes > 8 s). */
const SCHEDULE_DUE_MS = 4_000;
const JOB_EVERY_MS = 45_000;
const PATROL_MS = 5_000;

const figures: string[] = [];
const note = (line: string): void => {
  figures.push(line);
};
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

function token(role: string, extra: readonly string[] = []): string {
  return runScript(root, "token.ts", ["--tenant", TENANT, "--role", role, "--ttl", "1800", ...extra], {
    JWT_SECRET,
    WEBHOOK_MASTER_SECRET,
  });
}

/** A webhook receiver that answers 503 (down) until `up`, recording every attempt. */
interface Receiver {
  readonly attempts: { readonly webhookId: string; readonly eventId: string; readonly status: number }[];
  up: boolean;
  close(): Promise<void>;
}
function startReceiver(port: number): Promise<Receiver> {
  const receiver: Receiver = {
    attempts: [],
    up: false,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let eventId = "";
      try {
        eventId = String((JSON.parse(Buffer.concat(chunks).toString()) as { id?: unknown }).id ?? "");
      } catch {
        // not JSON
      }
      const status = receiver.up ? 200 : 503;
      const header = req.headers["webhook-id"];
      receiver.attempts.push({
        webhookId: Array.isArray(header) ? (header[0] ?? "") : (header ?? ""),
        eventId,
        status,
      });
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(receiver.up ? "ok" : "down");
    });
  });
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(receiver)));
}

interface Api {
  readonly get: <T>(path: string, who: string, what: string, expected?: number | readonly number[]) => Promise<T>;
  readonly send: <T>(
    method: string,
    path: string,
    who: string,
    body: unknown,
    what: string,
    expected?: number | readonly number[],
    headers?: Record<string, string>,
  ) => Promise<T>;
}

function api(tokens: Record<string, string>): Api {
  const auth = (who: string): Record<string, string> => {
    const t = tokens[who];
    check(t !== undefined, `no token for ${who}`);
    return { authorization: `Bearer ${t}`, "content-type": "application/json" };
  };
  return {
    get: async (path, who, what, expected = 200) =>
      expectJson(await fetch(`${BASE}${path}`, { headers: auth(who) }), expected, what),
    send: async (method, path, who, body, what, expected = [200, 201, 202], headers = {}) =>
      expectJson(
        await fetch(`${BASE}${path}`, {
          method,
          headers: { ...auth(who), ...headers },
          body: JSON.stringify(body),
        }),
        expected,
        what,
      ),
  };
}

interface PendingItem {
  readonly id: string;
  readonly name: string;
  readonly type?: string;
}
interface TaskRow {
  readonly id: number;
  readonly kind: string;
  readonly status?: string;
  readonly state?: { readonly runs?: number; readonly status?: string; readonly notBefore?: number };
}

/** What the previous release left in flight, for the checks after the switch. */
interface InFlight {
  readonly conversations: {
    readonly later: number;
    readonly approve: number;
    readonly confirm: number;
    readonly job: number;
    readonly schedule: number;
  };
  readonly inputs: {
    readonly long: number;
    readonly followUp: number;
    readonly later: number;
    readonly approve: number;
    readonly confirm: number;
  };
  readonly pending: { readonly approve: string; readonly confirm: string };
  readonly schedule: number;
  readonly scheduleDueAt: number;
  readonly jobRuns: number;
  readonly jobTask: number;
  readonly witnessTasks: readonly number[];
  readonly usage: string;
  readonly limits: string;
  readonly retentionExpiresAt: number;
  readonly chat: Promise<string>;
}

/** Read an SSE UI message stream to its end (or until the connection drops): the text of its text-delta parts. */
async function streamText(response: Response): Promise<{ text: string; parts: string[]; ended: boolean }> {
  let text = "";
  const parts = new Map<string, string>();
  let ended = false;
  const reader = response.body?.getReader();
  if (reader === undefined) return { text, parts: [], ended };
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") {
          ended = true;
          continue;
        }
        try {
          const part = JSON.parse(data) as { type?: string; delta?: string; id?: string };
          if (part.type === "text-delta") {
            text += part.delta ?? "";
            const id = part.id ?? "";
            parts.set(id, (parts.get(id) ?? "") + (part.delta ?? ""));
          }
        } catch {
          // not JSON
        }
      }
    }
  } catch {
    // the connection dropped (the release went away)
  }
  return { text, parts: [...parts.values()], ended };
}

async function inputResult(a: Api, session: string, id: number): Promise<InputResult> {
  return (await a.get<{ result: InputResult }>(`/v1/sessions/${session}/inputs/${id}`, "client", `GET input ${id}`))
    .result;
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const by = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    check(Date.now() < by, `${what} (waited ${seconds(ms)})`);
    await sleep(250);
  }
}

async function done(a: Api, session: string, id: number, what: string, ms: number): Promise<number> {
  return until(`${what} is not answered`, ms, async () => {
    const r = await inputResult(a, session, id);
    if (r.status === "unanswered") throw new DrillFailure(`${what} ended unanswered: ${JSON.stringify(r)}`);
    return r.status === "done" && r.answer !== undefined ? r.answer : undefined;
  });
}

async function liveTasks(a: Api, session: string): Promise<TaskRow[]> {
  return (
    await a.get<{ items: TaskRow[] }>(`/v1/sessions/${session}/tasks?live=true&limit=200`, "operator", "GET tasks")
  ).items;
}

async function usageOf(a: Api): Promise<string> {
  const rows: unknown[] = [];
  for (const sub of USERS) {
    const usage = await a.get<{ items: { sub: string; day: string; inputs: number; totalTokens: number }[] }>(
      `/v1/usage?sub=${sub}`,
      "operator",
      `GET usage of ${sub}`,
    );
    rows.push(usage.items.map((r) => [r.sub, r.day, r.inputs, r.totalTokens]));
  }
  return JSON.stringify(rows);
}

async function before(
  a: Api,
  tools: ToolEndpoint,
  receiver: Receiver,
  tokens: Record<string, string>,
): Promise<InFlight> {
  const m = `/v1/sessions/${S.main}`;
  // A retention timer: the tenant default, captured by each session created after it.
  await a.send("PUT", "/v1/retention", "operator", { retention: { deleteAfterDays: 30 } }, "PUT retention");
  await a.send("PUT", `/v1/sessions/${S.retained}`, "client", {}, "PUT the retained session", 201);
  const retained = await a.get<{ retention?: { expiresAt: number } }>(
    `/v1/sessions/${S.retained}`,
    "client",
    "GET the retained session",
  );
  check(retained.retention !== undefined, "the retained session has no retention");
  // A profile at version 2.
  for (const text of ["first version", "second version"])
    await a.send("PUT", "/v1/profiles/upgrade", "operator", { sections: [{ id: "role", text }] }, "PUT profile");
  // Limits, and counts for two users (each a session of its own and one answered input).
  await a.send("PUT", "/v1/limits", "operator", { user: { inputsPerDay: 50 } }, "PUT limits");
  await a.send("PUT", "/v1/templates/upgrade", "operator", { model: "echo/echo" }, "PUT template");
  for (const sub of USERS) {
    await a.send("PUT", `/v1/sessions/${sub}-s`, sub, { template: "upgrade" }, `PUT ${sub}'s session`, 201);
    const r = await a.send<{ status: string }>(
      "POST",
      `/v1/sessions/${sub}-s/conversations/root/inputs?wait=30`,
      sub,
      { input: `hello from ${sub}` },
      `${sub}'s input`,
    );
    check(r.status === "done", `${sub}'s input is ${r.status}, not done`);
  }
  // Tools: a 202 answered later, an approval, a client tool.
  const parameters = { type: "object", properties: { id: { type: "integer" } }, required: ["id"] };
  await a.send(
    "PUT",
    "/v1/tools/upgrade_later",
    "operator",
    {
      description: "drill: answered later",
      parameters,
      handler: { type: "http", url: `${tools.url}/later`, timeoutMs: 600_000 },
    },
    "PUT upgrade_later",
  );
  await a.send(
    "PUT",
    "/v1/tools/upgrade_approve",
    "operator",
    {
      description: "drill: approved call",
      parameters,
      handler: { type: "http", url: `${tools.url}/lookup` },
      approval: "always",
    },
    "PUT upgrade_approve",
  );
  await a.send(
    "PUT",
    "/v1/tools/upgrade_confirm",
    "operator",
    { description: "drill: the user confirms", parameters, handler: { type: "client" } },
    "PUT upgrade_confirm",
  );
  // An outbox delivery retrying against an endpoint that is down (503).
  await a.send(
    "POST",
    "/v1/webhook-endpoints",
    "operator",
    { url: `http://127.0.0.1:${EVENTS_PORT}/`, events: ["input.completed"], sessions: [S.events] },
    "POST webhook endpoint",
    201,
  );
  // A rig: one polecat with an active hook, and the witness patrolling every PATROL_MS.
  const r = `/v1/sessions/${S.rig}/rig`;
  await a.send("PUT", `/v1/sessions/${S.rig}`, "mayor", {}, "PUT the rig's session", 201);
  await a.send("PUT", `${r}/agents/polecat-alpha`, "mayor", { role: "polecat" }, "register polecat-alpha", 201);
  await a.send("PATCH", `${r}/witness`, "mayor", { patrolIntervalMs: PATROL_MS }, "PATCH witness");
  await a.send("PUT", `${r}/agents/polecat-alpha/hook`, "mayor", { bead_id: "gt-up1", title: "Upgrade" }, "set hook");
  await a.send("POST", `${r}/hook/activate`, "agent", { attempt: 1 }, "activate the hook");

  // The main session: forks for each tool and the job, and the long turn on the root.
  await a.send("PUT", m, "client", { model: "echo/echo-slow" }, "PUT the main session", 201);
  const fork = async (): Promise<number> =>
    (
      await a.send<{ conversationId: number }>(
        "POST",
        `${m}/conversations/root/fork`,
        "client",
        { at: "start" },
        "fork",
        201,
      )
    ).conversationId;
  const conversations = {
    later: await fork(),
    approve: await fork(),
    confirm: await fork(),
    job: await fork(),
    schedule: await fork(),
  };
  for (const c of Object.values(conversations))
    await a.send(
      "PATCH",
      `${m}/conversations/${c}/config`,
      "client",
      { model: "echo/echo", selectedTools: ["upgrade_later", "upgrade_approve", "upgrade_confirm", "job"] },
      "PATCH the fork's config",
      200,
    );
  const callIn = async (c: number, input: string): Promise<number> =>
    (
      await a.send<{ inputId: number }>(
        "POST",
        `${m}/conversations/${c}/inputs`,
        "client",
        { input },
        input,
        [201, 202],
        { "idempotency-key": `upgrade-${c}` },
      )
    ).inputId;
  const later = await callIn(conversations.later, '/call upgrade_later {"id":1}');
  const approve = await callIn(conversations.approve, '/call upgrade_approve {"id":2}');
  const confirm = await callIn(conversations.confirm, '/call upgrade_confirm {"id":3}');
  const jobInput = await callIn(
    conversations.job,
    `/call job {"cmd":"echo woke","background":true,"every":${JOB_EVERY_MS}}`,
  );
  await done(a, S.main, jobInput, "the job's input", 30_000);
  // The events session's answered input: its input.completed event goes out to the endpoint that is down.
  await a.send("PUT", `/v1/sessions/${S.events}`, "client", { model: "echo/echo" }, "PUT the events session", 201);
  await a.send(
    "POST",
    `/v1/sessions/${S.events}/conversations/root/inputs?wait=30`,
    "client",
    { input: "event" },
    "events input",
  );

  // The long turn, a chat stream open on it (the AI SDK's resume), and a followUp queued behind it.
  const long = (
    await a.send<{ inputId: number }>(
      "POST",
      `${m}/conversations/root/inputs`,
      "client",
      { input: LONG },
      "accept the long input",
      [201, 202],
      { "idempotency-key": "upgrade-long" },
    )
  ).inputId;
  await until("the long input is never placed", 20_000, async () =>
    (await inputResult(a, S.main, long)).status === "placed" ? true : undefined,
  );
  const chatResponse = await fetch(`${BASE}${m}/chat/root/stream`, {
    headers: { authorization: `Bearer ${tokens["client"] ?? ""}` },
  });
  check(chatResponse.status === 200, `GET chat stream before the switch: ${chatResponse.status}`);
  const chat = streamText(chatResponse).then((s) => s.text);
  const followUp = (
    await a.send<{ inputId: number }>(
      "POST",
      `${m}/conversations/root/inputs`,
      "client",
      { input: FOLLOW_UP, mode: "followUp" },
      "queue the followUp",
      [201, 202],
      { "idempotency-key": "upgrade-followup" },
    )
  ).inputId;

  // Everything in place before the switch.
  const pending = await until(
    "before the switch: the approval and the client tool are not both pending",
    30_000,
    async () => {
      const items = (await a.get<{ items: PendingItem[] }>(`${m}/pending`, "client", "GET pending")).items;
      const ap = items.find((i) => i.name === "upgrade_approve")?.id;
      const cf = items.find((i) => i.name === "upgrade_confirm")?.id;
      return ap !== undefined && cf !== undefined ? { approve: ap, confirm: cf } : undefined;
    },
  );
  await until("before the switch: upgrade_later never reached the endpoint", 30_000, async () =>
    tools.requests.some((q) => q.name === "upgrade_later") ? true : undefined,
  );
  await until("before the switch: the endpoint that is down never saw the delivery", 30_000, async () =>
    receiver.attempts.length > 0 ? true : undefined,
  );
  const tasks = await liveTasks(a, S.main);
  const job = tasks.find((t) => t.kind === "job" || t.kind.endsWith(".job"));
  check(job !== undefined, `no live job task before the switch: ${JSON.stringify(tasks.map((t) => t.kind))}`);
  const witnessTasks = (await liveTasks(a, S.rig)).filter((t) => t.kind.includes("witness")).map((t) => t.id);
  check(witnessTasks.length === 1, `the rig has ${witnessTasks.length} live witness tasks before the switch, not one`);
  check((await inputResult(a, S.main, long)).status === "placed", "the long input is not mid-answer before the switch");
  check((await inputResult(a, S.main, followUp)).status === "queued", "the followUp is not queued before the switch");
  const profile = await a.get<{ version: number }>("/v1/profiles/upgrade", "operator", "GET profile");
  check(profile.version === 2, `the profile is at version ${profile.version}, not 2`);
  const limits = JSON.stringify(await a.get<unknown>("/v1/limits", "operator", "GET limits"));
  // The users' turns report their tokens to the limits shard after the answer: counted before the switch.
  const usage = await until("before the switch: the users' token usage was never reported", 30_000, async () => {
    const u = await usageOf(a);
    return (JSON.parse(u) as [string, string, number, number][][]).every((rows) => rows.some((r) => r[3] > 0))
      ? u
      : undefined;
  });
  // Last: the schedule, due SCHEDULE_DUE_MS from now, while the switch is under way.
  const scheduleDueAt = Date.now() + SCHEDULE_DUE_MS;
  const schedule = (
    await a.send<{ id: number }>(
      "POST",
      `${m}/schedules`,
      "client",
      {
        conversation: conversations.schedule,
        input: SCHEDULED,
        every: 3_600_000,
        startAt: scheduleDueAt,
      },
      "POST schedule",
      201,
    )
  ).id;
  return {
    limits,
    conversations,
    inputs: { long, followUp, later, approve, confirm },
    pending,
    schedule,
    scheduleDueAt,
    jobRuns: job.state?.runs ?? 0,
    jobTask: job.id,
    witnessTasks,
    usage,
    retentionExpiresAt: retained.retention.expiresAt,
    chat,
  };
}

async function toolResults(a: Api, conversation: number): Promise<Entry[]> {
  return (
    await a.get<{ items: Entry[] }>(
      `/v1/sessions/${S.main}/conversations/${conversation}/entries?limit=200`,
      "client",
      "GET entries",
    )
  ).items.filter((e) => e.kind === "tool_result");
}

async function after(
  a: Api,
  f: InFlight,
  tools: ToolEndpoint,
  receiver: Receiver,
  tokens: Record<string, string>,
): Promise<void> {
  const m = `/v1/sessions/${S.main}`;
  // The chat resume replays the live turn once, from its start.
  const resume = await fetch(`${BASE}${m}/chat/root/stream`, {
    headers: { authorization: `Bearer ${tokens["client"] ?? ""}` },
  });
  const resumed = resume.status === 200 ? await streamText(resume) : { text: "", parts: [], ended: false };
  check(resume.status === 200 || resume.status === 204, `GET chat stream: ${resume.status}`);
  // The turn from its start: the answer whole once; before it at most the display-only partial the switch
  // interrupted (a proper prefix of the answer, its own text part); after it the queued followUp's turn.
  const at = resumed.parts.indexOf(LONG);
  const partials = resumed.parts.slice(0, Math.max(at, 0));
  if (resume.status === 200) {
    check(
      at >= 0 && resumed.parts.filter((p) => p === LONG).length === 1,
      `the chat resume did not stream the long answer whole once: ${JSON.stringify(resumed.parts.map((p) => p.slice(0, 60)))}`,
    );
    check(
      partials.every((p) => LONG.startsWith(p) && p.length < LONG.length) &&
        resumed.parts.slice(at + 1).every((p) => p === FOLLOW_UP),
      `the chat resume streamed text that is not the turn, its interrupted partial or the followUp: ${JSON.stringify(resumed.parts.map((p) => p.slice(0, 60)))}`,
    );
  }
  note(
    `chat: the stream open before the switch got ${(await f.chat).length} characters; the resume after it answered ${resume.status}${resume.status === 200 ? `, streamed the whole answer once (${LONG.length} characters)${partials.length === 0 ? "" : ` after the interrupted display-only partial (${partials.map((p) => p.length).join(", ")} characters, its own text part)`}, and ${resumed.ended ? "ended" : "did not end"}` : " (the turn had finished)"}`,
  );

  // The turn finishes (its answer whole, once) and the queued input runs after it.
  const longAnswer = await done(a, S.main, f.inputs.long, "the long input", 90_000);
  const followAnswer = await done(a, S.main, f.inputs.followUp, "the followUp", 60_000);
  check(followAnswer > longAnswer, "the followUp was answered before the long input");
  const entries = (
    await a.get<{ items: Entry[] }>(`${m}/conversations/root/entries?limit=200`, "client", "GET entries")
  ).items;
  const finals = entries.filter((e) => e.model?.[0]?.role === "assistant" && e.model[0].stopReason !== "aborted");
  check(finals.filter((e) => textOf(e) === LONG).length === 1, "the long answer is not there exactly once");
  check(finals.filter((e) => textOf(e) === FOLLOW_UP).length === 1, "the followUp's answer is not there exactly once");
  note(
    `the long turn finished whole once (entry ${longAnswer}); the followUp answered after it (entry ${followAnswer})`,
  );

  // The approval answered over the new code runs its tool once.
  const items = (await a.get<{ items: PendingItem[] }>(`${m}/pending`, "client", "GET pending after")).items;
  check(
    items.some((i) => i.id === f.pending.approve),
    "the approval is not pending after the upgrade",
  );
  check(
    items.some((i) => i.id === f.pending.confirm),
    "the client tool is not pending after the upgrade",
  );
  await a.send("POST", `${m}/pending/${f.pending.approve}`, "client", { approve: true }, "approve", 200);
  await done(a, S.main, f.inputs.approve, "the approved call's input", 60_000);
  const approved = tools.requests.filter((q) => q.name === "upgrade_approve").length;
  check(approved === 1, `upgrade_approve reached the endpoint ${approved} times, not once`);
  check((await toolResults(a, f.conversations.approve)).length === 1, "the approved call has not exactly one result");
  // The client tool answered over the new code.
  await a.send(
    "POST",
    `${m}/pending/${f.pending.confirm}`,
    "client",
    { output: "confirmed" },
    "answer the client tool",
    200,
  );
  await done(a, S.main, f.inputs.confirm, "the client tool's input", 60_000);
  check((await toolResults(a, f.conversations.confirm)).length === 1, "the client tool has not exactly one result");
  note(
    `pending: the approval and the client tool kept their ids (${f.pending.approve}, ${f.pending.confirm}); answered, each ran once`,
  );

  // The late result, posted with the old key (the 202'd request's webhook-id), is accepted.
  const held = tools.requests.filter((q) => q.name === "upgrade_later");
  check(held.length === 1, `upgrade_later reached the endpoint ${held.length} times, not once`);
  const call = held[0];
  check(call !== undefined, "no upgrade_later request");
  const result = JSON.stringify({ output: { id: 1, status: "late and fine" }, isError: false });
  const now = new Date();
  const posted = await fetch(`${BASE}/v1/tool-results/${TENANT}/${S.main}/${call.taskId}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": call.webhookId,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(toolSecret(WEBHOOK_MASTER_SECRET, TENANT, "upgrade_later")).sign(
        call.webhookId,
        now,
        result,
      ),
    },
    body: result,
  });
  const postedText = await posted.text();
  check(posted.status >= 200 && posted.status < 300, `the late result was refused: ${posted.status} ${postedText}`);
  await done(a, S.main, f.inputs.later, "the 202'd call's input", 60_000);
  const lateResults = await toolResults(a, f.conversations.later);
  check(lateResults.length === 1, `the 202'd call has ${lateResults.length} results, not one`);
  check(JSON.stringify(lateResults[0]).includes("late and fine"), "the 202'd call's result is not the late one");
  note(
    `the late result of task ${call.taskId}, posted under the previous release's webhook-id ${call.webhookId}: ${posted.status}, one result`,
  );

  // The job wakes (one more run, the same task), the schedule fires once.
  const job = await until(
    `the job did not wake after the upgrade (runs stayed ${f.jobRuns})`,
    JOB_EVERY_MS + 30_000,
    async () => {
      const t = (await liveTasks(a, S.main)).find((row) => row.id === f.jobTask);
      return t !== undefined && (t.state?.runs ?? 0) > f.jobRuns ? t : undefined;
    },
  );
  check(
    (job.state?.runs ?? 0) === f.jobRuns + 1,
    `the job ran ${(job.state?.runs ?? 0) - f.jobRuns} times on waking, not once`,
  );
  const sched = await until("the schedule did not fire after the upgrade", 60_000, async () => {
    const s = await a.get<{ runs: number; lastInputId?: number }>(
      `${m}/schedules/${f.schedule}`,
      "client",
      "GET schedule",
    );
    return s.runs > 0 && s.lastInputId !== undefined ? s : undefined;
  });
  check(sched.runs === 1, `the schedule fired ${sched.runs} times, not once`);
  await done(a, S.main, sched.lastInputId ?? 0, "the schedule's input", 30_000);
  const scheduled = (
    await a.get<{ items: Entry[] }>(
      `${m}/conversations/${f.conversations.schedule}/entries?limit=200`,
      "client",
      "GET entries",
    )
  ).items.filter((e) => e.kind === "user" && JSON.stringify(e.model).includes(SCHEDULED));
  check(scheduled.length === 1, `the scheduled input is in its conversation ${scheduled.length} times, not once`);
  note(`the job woke once (runs ${f.jobRuns} -> ${job.state?.runs ?? 0}, task ${f.jobTask}); the schedule fired once`);

  // The witness keeps one patrol (the same task), and the hook is still active.
  const hook = await a.get<{ status: string }>(
    `/v1/sessions/${S.rig}/rig/agents/polecat-alpha/hook`,
    "mayor",
    "GET hook",
  );
  check(hook.status === "active", `the hook is ${hook.status} after the upgrade, not active`);
  await sleep(PATROL_MS * 2);
  const witness = (await liveTasks(a, S.rig)).filter((t) => t.kind.includes("witness")).map((t) => t.id);
  check(
    JSON.stringify(witness) === JSON.stringify(f.witnessTasks),
    `live witness tasks ${JSON.stringify(witness)} after the upgrade, not the one from before ${JSON.stringify(f.witnessTasks)}`,
  );
  note(`rig: the hook is still active; one witness task (${witness.join(", ")}), the same as before`);

  // The endpoint receives the delivery under its original webhook-id, and no second event.
  const delivered = await until("the delivery never reached the endpoint after the upgrade", 150_000, async () =>
    receiver.attempts.some((x) => x.status === 200) ? true : undefined,
  );
  check(delivered, "no delivery");
  const ids = new Set(receiver.attempts.map((x) => x.webhookId));
  const events = new Set(receiver.attempts.map((x) => x.eventId));
  check(ids.size === 1, `the endpoint saw webhook-ids ${JSON.stringify([...ids])}, not one`);
  check(events.size === 1, `the endpoint saw events ${JSON.stringify([...events])}, not one`);
  note(
    `outbox: ${receiver.attempts.filter((x) => x.status === 503).length} attempts answered 503, then ${receiver.attempts.filter((x) => x.status === 200).length} delivered, all under ${[...ids][0] ?? "?"}`,
  );

  // Counts and quotas unchanged, the profile still at version 2, the retention timer the same.
  const usage = await usageOf(a);
  check(usage === f.usage, `usage changed across the upgrade: ${f.usage} -> ${usage}`);
  const limits = JSON.stringify(await a.get<unknown>("/v1/limits", "operator", "GET limits after"));
  check(limits === f.limits, `the limits changed across the upgrade: ${f.limits} -> ${limits}`);
  const profile = await a.get<{ version: number }>("/v1/profiles/upgrade", "operator", "GET profile after");
  check(profile.version === 2, `the profile is at version ${profile.version} after the upgrade, not 2`);
  const retained = await a.get<{ retention?: { expiresAt: number } }>(
    `/v1/sessions/${S.retained}`,
    "client",
    "GET the retained session after",
  );
  check(
    retained.retention?.expiresAt === f.retentionExpiresAt,
    `the retention expiry moved: ${f.retentionExpiresAt} -> ${String(retained.retention?.expiresAt)}`,
  );
  note(
    `usage of two users unchanged (${usage}) and the limits (${limits}); profile at version 2; retention expiry unchanged (${new Date(f.retentionExpiresAt).toISOString()})`,
  );
}

/** Every object's SQLite file: each session and the directory at this tree's schema versions. */
function schemaVersions(persist: string): string {
  const sessionVersion = readdirSync(join(root, "migrations")).filter((f) => /^\d{4}_.*\.sql$/.test(f)).length;
  const directorySource = readFileSync(join(root, "src/worker/directory/sessions.ts"), "utf8");
  const directoryVersion = (directorySource.match(/^ {4}additive: (true|false),$/gm) ?? []).length;
  const doRoot = join(persist, "v3", "do");
  check(existsSync(doRoot), `no Durable Object state under ${doRoot}`);
  let sessions = 0;
  let directories = 0;
  for (const dir of readdirSync(doRoot)) {
    const kind = dir.endsWith("-SessionObject")
      ? "session"
      : dir.endsWith("-DirectoryObject")
        ? "directory"
        : undefined;
    if (kind === undefined) continue;
    for (const file of readdirSync(join(doRoot, dir)).filter((f) => f.endsWith(".sqlite"))) {
      const db = new DatabaseSync(join(doRoot, dir, file), { readOnly: true });
      try {
        if (kind === "session") {
          const tables = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'session_metadata'").all();
          if (tables.length === 0) continue;
          const row = db.prepare("SELECT value FROM session_metadata WHERE name = 'schema_version'").get() as
            { value: number } | undefined;
          check(
            row?.value === sessionVersion,
            `session ${file} is at schema version ${String(row?.value)}, not ${sessionVersion}`,
          );
          sessions += 1;
        } else {
          const tables = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'directory_schema'").all();
          if (tables.length === 0) continue;
          const row = db.prepare("SELECT version FROM directory_schema").get() as { version: number } | undefined;
          check(
            row?.version === directoryVersion,
            `directory ${file} is at version ${String(row?.version)}, not ${directoryVersion}`,
          );
          directories += 1;
        }
      } finally {
        db.close();
      }
    }
  }
  check(sessions >= 6 && directories >= 1, `found ${sessions} sessions and ${directories} directories in the state`);
  return `${sessions} sessions at schema version ${sessionVersion}, ${directories} director${directories === 1 ? "y" : "ies"} at version ${directoryVersion}`;
}

async function drill(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "pico-upgrade-drill-"));
  const envFile = join(dir, "drill.env");
  writeFileSync(
    envFile,
    [
      `JWT_SECRET=${JWT_SECRET}`,
      `WEBHOOK_MASTER_SECRET=${WEBHOOK_MASTER_SECRET}`,
      `SECRETS_SEALING_KEY=${SECRETS_SEALING_KEY}`,
      // Both releases start with it: the one before ignores it, the new one hashes erasures with it.
      "SUBJECT_HASH_KEY=upgrade-drill-only-subject-hash-key-0123456789",
      "",
    ].join("\n"),
  );
  const persist = join(dir, "state");
  let previous: { commit: string; tree: string; own: boolean } | undefined;
  let dev: Dev | undefined;
  let tools: ToolEndpoint | undefined;
  let receiver: Receiver | undefined;
  const t0 = Date.now();
  try {
    previous = previousRelease(root, dir, note);
    tools = await startToolEndpoint({
      port: TOOLS_PORT,
      tenant: TENANT,
      api: BASE,
      masterSecret: WEBHOOK_MASTER_SECRET,
      // The drill posts the late result itself, after the switch.
      delayMs: 3_600_000,
      holdMs: 0,
      log: () => undefined,
    });
    receiver = await startReceiver(EVENTS_PORT);
    const tokens: Record<string, string> = {
      client: token("client"),
      operator: token("operator"),
      mayor: token("mayor"),
      agent: token("agent", ["--agent", "polecat-alpha", "--session", S.rig]),
    };
    for (const sub of USERS) tokens[sub] = token("user", ["--sub", sub, "--act", "read,write,watch,create"]);
    const a = api(tokens);

    const prevEnv = devEnvOf(previous.tree);
    const started = Date.now();
    dev = startDev({
      root: previous.tree,
      port: PORT,
      inspector: INSPECTOR,
      persist,
      envFile,
      ...(prevEnv === undefined ? {} : { env: prevEnv }),
    });
    await waitHealthy(dev, BASE, 180_000);
    note(
      `previous release up in ${seconds(Date.now() - started)} (wrangler dev --local${prevEnv === undefined ? "" : ` --env ${prevEnv}`})`,
    );
    const drillStart = Date.now();
    const inFlight = await before(a, tools, receiver, tokens);
    note(
      `in flight after ${seconds(Date.now() - drillStart)}: a long turn mid-answer (chat stream open), a queued followUp, an approval and a client tool pending, a 202'd call, a sleeping job, a schedule due in ${seconds(SCHEDULE_DUE_MS)}, a rig hook active with its witness, a delivery retrying (${receiver.attempts.length} attempt answered 503), usage of two users, profile v2, a retention timer`,
    );

    const stoppedAt = Date.now();
    const stopped = await stopDev(dev, "SIGTERM", 15_000);
    note(
      `SIGTERM took the previous release down in ${stopped.ms} ms${stopped.forced ? " (SIGKILL followed after 15 s)" : ""}`,
    );
    receiver.up = true;
    const currentEnv = devEnvOf(root);
    const restarted = Date.now();
    dev = startDev({
      root,
      port: PORT,
      inspector: INSPECTOR,
      persist,
      envFile,
      ...(currentEnv === undefined ? {} : { env: currentEnv }),
    });
    await waitHealthy(dev, BASE, 180_000);
    note(
      `the schedule was due ${seconds(inFlight.scheduleDueAt - stoppedAt)} after the SIGTERM, ${seconds(Date.now() - inFlight.scheduleDueAt)} before this tree answered /health`,
    );
    note(
      `this tree up on the same state in ${seconds(Date.now() - restarted)} (wrangler dev --local${currentEnv === undefined ? "" : ` --env ${currentEnv}`})`,
    );
    await after(a, inFlight, tools, receiver, tokens);
    note(`checks after the switch took ${seconds(Date.now() - restarted)}`);
    await stopDev(dev, "SIGTERM", 15_000);
    dev = undefined;
    note(schemaVersions(persist));
    note(
      `drill ${seconds(Date.now() - drillStart)} from the previous release's first request (${seconds(Date.now() - t0)} with the build)`,
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new DrillFailure(
      `${message}\n${figures.map((f) => `  ${f}`).join("\n")}${dev === undefined ? "" : `\n--- wrangler dev (last 40 lines) ---\n${dev.log.split("\n").slice(-40).join("\n")}`}`,
    );
  } finally {
    if (dev !== undefined) await stopDev(dev, "SIGTERM", 10_000);
    await tools?.close();
    await receiver?.close();
    // The previous release's node_modules take a minute to delete on a busy machine: deleted after the drill.
    removeInBackground(root, dir);
  }
}

const started = Date.now();
try {
  await drill();
  console.log(`upgrade drill: PASS: ${NAME} (${seconds(Date.now() - started)})`);
  for (const f of figures) console.log(`  ${f}`);
  process.exit(0);
} catch (error) {
  console.log(
    `upgrade drill: FAIL: ${NAME} (${seconds(Date.now() - started)}): ${error instanceof Error ? error.message : String(error)}`,
  );
  process.exit(1);
}
