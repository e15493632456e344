/**
 * Records the previous release's object RPCs (docs/operations.md "Version skew"): runs the release named in
 * `.ci/upgrade-from` (a git worktree with its own `npm ci`, or `--previous DIR`) under `wrangler dev` with a
 * recording entry module around its own (its code unchanged): every binding of the session, directory and limits
 * namespaces, the Worker's and each object's (object-to-object calls included), is wrapped so that each RPC
 * method call prints its request and its answer as one JSON line. A workload over HTTP drives the usual flows;
 * the lines become `test/fixtures/rpc-previous.json`, which test/workerd/rpc-skew.test.ts replays against this
 * tree's objects. Calls whose arguments or answer are not JSON (a Request, a stream) are left out; an undefined
 * argument is recorded as `{ "$undefined": true }`.
 *
 * `node scripts/record-rpc.ts [--previous DIR]`; port 8817 (inspector 8917). Offline.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  check,
  devEnvOf,
  expectJson,
  previousRelease,
  removeInBackground,
  runScript,
  sleep,
  startDev,
  stopDev,
  waitHealthy,
  type Dev,
  type PreviousRelease,
} from "./drill-kit.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const PORT = 8817;
const BASE = `http://127.0.0.1:${PORT}`;
const TENANT = "skew";
const JWT_SECRET = "record-rpc-only-jwt-secret-0123456789abc";
const WEBHOOK_MASTER_SECRET = "record-rpc-only-webhook-master-secret";
const SECRETS_SEALING_KEY = "record-rpc-only-sealing-key-0123456789";

/** The recording entry module, written into the previous release's worktree (never into this repo). */
const RECORDER = `
import base, * as release from "./src/worker/index.ts";
const BINDINGS = new Set(["SESSIONS", "DIRECTORY", "LIMITS"]);
const SKIP = new Set(["fetch", "connect", "then", "dup", "__proto__"]);
function plain(value) {
  if (value === null || typeof value !== "object") return typeof value === "function" ? undefined : value;
  if (value instanceof ReadableStream || value instanceof Request || value instanceof Response) throw new Error("not JSON");
  // An array keeps its length: an undefined element (an optional argument left out) becomes a marker, not null.
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? { $undefined: true } : plain(v)));
  const out = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = plain(v);
  return out;
}
function record(caller, binding, name, method, args, answer) {
  let line;
  try {
    line = JSON.stringify({ type: "rpc-fixture", caller, binding, name, method, args: plain(args), answer: plain(answer) });
  } catch {
    return;
  }
  console.log(line);
}
function wrapStub(caller, binding, name, stub) {
  return new Proxy(stub, {
    get(target, prop) {
      const value = target[prop];
      if (typeof prop !== "string" || SKIP.has(prop) || typeof value !== "function") return value;
      return async (...args) => {
        let answer;
        try {
          answer = await target[prop](...args);
        } catch (error) {
          record(caller, binding, name, prop, args, { $threw: String(error && error.message) });
          throw error;
        }
        record(caller, binding, name, prop, args, answer);
        return answer;
      };
    },
  });
}
function wrapNamespace(caller, binding, ns) {
  return new Proxy(ns, {
    get(target, prop) {
      if (prop === "get") return (id, options) => wrapStub(caller, binding, id.name ?? id.toString(), target.get(id, options));
      const value = target[prop];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
function wrapEnv(caller, env) {
  return new Proxy(env, {
    get(target, prop) {
      const value = target[prop];
      return typeof prop === "string" && BINDINGS.has(prop) ? wrapNamespace(caller, prop, value) : value;
    },
  });
}
export class SessionObject extends release.SessionObject {
  constructor(ctx, env) { super(ctx, wrapEnv("SESSIONS", env)); }
}
export class DirectoryObject extends release.DirectoryObject {
  constructor(ctx, env) { super(ctx, wrapEnv("DIRECTORY", env)); }
}
export class LimitsObject extends release.LimitsObject {
  constructor(ctx, env) { super(ctx, wrapEnv("LIMITS", env)); }
}
export default {
  fetch(request, env, ctx) { return base.fetch(request, wrapEnv("worker", env), ctx); },
};
`;

export interface RpcFixture {
  /** "worker", or the binding of the object that made the call. */
  readonly caller: string;
  readonly binding: "SESSIONS" | "DIRECTORY" | "LIMITS";
  /** The object's name (idFromName). */
  readonly name: string;
  readonly method: string;
  readonly args: readonly unknown[];
  readonly answer: unknown;
}

function token(role: string, extra: readonly string[] = []): string {
  return runScript(root, "token.ts", ["--tenant", TENANT, "--role", role, "--ttl", "1800", ...extra], {
    JWT_SECRET,
    WEBHOOK_MASTER_SECRET,
  });
}

/** The flows whose RPCs are recorded: sessions, inputs, tools and the pending list, schedules, the rig, the directory, limits. */
async function workload(): Promise<void> {
  const tokens: Record<string, string> = {
    client: token("client"),
    operator: token("operator"),
    mayor: token("mayor"),
    agent: token("agent", ["--agent", "polecat-a", "--session", "skew-rig"]),
    user: token("user", ["--sub", "skew-user", "--act", "read,write,watch,create"]),
  };
  const call = async <T>(
    method: string,
    path: string,
    who: string,
    body?: unknown,
    expected: number | readonly number[] = [200, 201, 202, 204],
  ): Promise<T> =>
    expectJson<T>(
      await fetch(`${BASE}${path}`, {
        method,
        headers: { authorization: `Bearer ${tokens[who] ?? ""}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
      expected,
      `${method} ${path}`,
    );
  const s = "/v1/sessions/skew-main";
  await call("PUT", "/v1/retention", "operator", { retention: { deleteAfterDays: 30 } });
  await call("PUT", "/v1/profiles/skew", "operator", { sections: [{ id: "role", text: "first" }] });
  await call("PUT", "/v1/profiles/skew", "operator", { sections: [{ id: "role", text: "second" }] });
  await call("PUT", "/v1/limits", "operator", { user: { inputsPerDay: 50 } });
  await call("PUT", "/v1/templates/skew", "operator", { model: "echo/echo" });
  await call("PUT", "/v1/tools/skew_approve", "operator", {
    description: "skew: approval",
    parameters: { type: "object", properties: { id: { type: "integer" } } },
    handler: { type: "client" },
    approval: "always",
  });
  await call("PUT", s, "client", { model: "echo/echo", selectedTools: ["skew_approve"], title: "Skew" }, 201);
  await call("GET", s, "client");
  await call("POST", `${s}/conversations/root/inputs?wait=30`, "client", { input: "hello" });
  await call("POST", `${s}/conversations/root/inputs`, "client", { input: '/call skew_approve {"id":1}' });
  await sleep(1_000);
  const pending = await call<{ items: { id: string }[] }>("GET", `${s}/pending`, "client");
  const first = pending.items[0];
  check(first !== undefined, "no pending item");
  await call("POST", `${s}/pending/${first.id}`, "client", { approve: true });
  await sleep(1_000);
  const again = await call<{ items: { id: string }[] }>("GET", `${s}/pending`, "client");
  for (const item of again.items) await call("POST", `${s}/pending/${item.id}`, "client", { output: "ok" });
  await call("POST", `${s}/conversations/root/fork`, "client", { at: "start" }, 201);
  await call("PATCH", s, "client", { title: "Skew 2", labels: ["a"], metadata: { team: "blue" } });
  const sched = await call<{ id: number }>(
    "POST",
    `${s}/schedules`,
    "client",
    { input: "tick", every: 3_600_000, startAt: Date.now() + 600_000 },
    201,
  );
  await call("GET", `${s}/schedules`, "client");
  await call("DELETE", `${s}/schedules/${sched.id}`, "client");
  await call("GET", `${s}/usage`, "client");
  await call("GET", "/v1/sessions?limit=10", "operator");
  await call("GET", "/v1/sessions?metadata.team=blue", "operator");
  await call("GET", "/v1/stats", "operator");
  await call("GET", "/v1/usage", "operator");
  await call("GET", "/v1/limits", "operator");
  await call("PUT", "/v1/sessions/skew-user-s", "user", { template: "skew" }, 201);
  await call("POST", "/v1/sessions/skew-user-s/conversations/root/inputs?wait=30", "user", { input: "mine" });
  await call("GET", "/v1/sessions/skew-user-s", "user");
  const r = "/v1/sessions/skew-rig/rig";
  await call("PUT", "/v1/sessions/skew-rig", "mayor", {}, 201);
  await call("PUT", `${r}/agents/polecat-a`, "mayor", { role: "polecat" }, 201);
  await call("PUT", `${r}/agents/polecat-a/hook`, "mayor", { bead_id: "gt-s1", title: "Skew" });
  await call("POST", `${r}/hook/activate`, "agent", { attempt: 1 });
  await call("GET", `${r}/health`, "mayor");
  await call("POST", `${r}/mail`, "agent", { to: "mayor", payload: "hi" });
  await call("GET", `${r}/mail`, "mayor");
  // The sessions' usage reports reach the limits shards after the answers.
  await sleep(5_000);
  await call("DELETE", "/v1/sessions/skew-rig", "operator");
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "pico-record-rpc-"));
  const envFile = join(dir, "record.env");
  writeFileSync(
    envFile,
    `JWT_SECRET=${JWT_SECRET}\nWEBHOOK_MASTER_SECRET=${WEBHOOK_MASTER_SECRET}\nSECRETS_SEALING_KEY=${SECRETS_SEALING_KEY}\nSUBJECT_HASH_KEY=record-rpc-only-subject-hash-key-0123456789\n`,
  );
  const notes: string[] = [];
  let previous: PreviousRelease | undefined;
  let dev: Dev | undefined;
  try {
    previous = previousRelease(root, dir, (line) => notes.push(line));
    writeFileSync(join(previous.tree, "rpc-recorder.js"), RECORDER);
    const config = readFileSync(join(previous.tree, "wrangler.toml"), "utf8");
    check(/^main = "src\/worker\/index.ts"$/m.test(config), "the previous release's wrangler.toml names another main");
    writeFileSync(
      join(previous.tree, "wrangler.rpc.toml"),
      config.replace(/^main = "src\/worker\/index.ts"$/m, 'main = "rpc-recorder.js"'),
    );
    const env = devEnvOf(previous.tree);
    dev = startDev({
      root: previous.tree,
      port: PORT,
      inspector: 8917,
      persist: join(dir, "state"),
      envFile,
      config: "wrangler.rpc.toml",
      ...(env === undefined ? {} : { env }),
    });
    await waitHealthy(dev, BASE, 180_000);
    await workload();
    await stopDev(dev, "SIGTERM", 15_000);
    const calls: RpcFixture[] = [];
    for (const line of dev.log.split("\n")) {
      const start = line.indexOf('{"type":"rpc-fixture"');
      if (start < 0) continue;
      const { type: _type, ...fixture } = JSON.parse(line.slice(start)) as RpcFixture & { type: string };
      calls.push(fixture);
    }
    dev = undefined;
    check(calls.length > 0, "no RPC was recorded");
    const out = join(root, "test/fixtures/rpc-previous.json");
    writeFileSync(out, `${JSON.stringify({ release: previous.commit, calls }, null, 1)}\n`);
    const methods = new Set(calls.map((c) => `${c.caller}->${c.binding}.${c.method}`));
    console.log(
      `record-rpc: ${calls.length} calls (${methods.size} kinds) of ${previous.commit.slice(0, 7)} in ${out}`,
    );
    for (const m of [...methods].sort()) console.log(`  ${m}`);
  } catch (error) {
    console.log(`record-rpc: FAIL: ${error instanceof Error ? error.message : String(error)}`);
    if (dev !== undefined) console.log(dev.log.split("\n").slice(-40).join("\n"));
    process.exitCode = 1;
  } finally {
    if (dev !== undefined) await stopDev(dev, "SIGTERM", 10_000);
    removeInBackground(root, dir);
  }
}

await main();
