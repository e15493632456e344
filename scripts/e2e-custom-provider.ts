/**
 * End-to-end check for CI (docs/models.md "Custom endpoints"): a custom OpenAI-compatible provider configured only
 * the way an operator would (an env file of wrangler vars and secrets: MODEL_PROVIDERS, its key
 * secret, DEFAULT_MODEL), served by `wrangler dev --local` (what `npm start` runs), pointing at a local
 * fake Chat Completions endpoint. Over HTTP: GET /v1/models lists the model, a session created with it
 * answers an input with the endpoint's streamed text, and the endpoint saw the key and the request; a
 * profile defined over HTTP (docs/users.md "Instructions") reaches the endpoint as the request's leading
 * system (or developer) message, with its variable filled in.
 * Offline; prints one line and exits non-zero on failure. Run by Node directly (type stripping).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sign } from "hono/jwt";
import { signalGroup, startDev } from "./drill-kit.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const JWT_SECRET = "e2e-only-jwt-secret-0123456789abcdef";
const KEY = "sk-e2e-custom-provider";

type SeenBody = { model?: string; stream?: boolean; messages?: { role: string; content: unknown }[] };
const seen: { path: string; authorization: string | undefined; body: SeenBody }[] = [];

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: "chatcmpl-e2e", object: "chat.completion.chunk", created: 1, model: "fake-chat", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

const fake = createServer((req, res) => {
  void readBody(req).then((text) => {
    seen.push({
      path: req.url ?? "",
      authorization: req.headers.authorization,
      body: text === "" ? {} : (JSON.parse(text) as SeenBody),
    });
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chunk({ role: "assistant", content: "" }));
    res.write(chunk({ content: "Hello from " }));
    res.write(chunk({ content: "the fake endpoint" }));
    res.write(chunk({}, "stop"));
    res.write(
      `data: ${JSON.stringify({ id: "chatcmpl-e2e", object: "chat.completion.chunk", created: 1, model: "fake-chat", choices: [], usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 } })}\n\n`,
    );
    res.end("data: [DONE]\n\n");
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.listen(0, "127.0.0.1", () => {
      const port = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(port));
    });
  });
}

async function waitFor(url: string, deadline: number): Promise<void> {
  while (Date.now() < deadline && !dev.exited) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`${url} did not come up`);
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
const fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}/v1`;
const dir = mkdtempSync(join(tmpdir(), "pico-e2e-"));
const envFile = join(dir, "operator.env");
const providers = [
  {
    id: "e2e-llm",
    name: "E2E fake",
    baseUrl: fakeUrl,
    api: "openai-completions",
    keySecret: "E2E_LLM_KEY",
    models: [{ id: "fake-chat", contextWindow: 32768 }],
  },
];
writeFileSync(
  envFile,
  [
    `JWT_SECRET=${JWT_SECRET}`,
    "WEBHOOK_MASTER_SECRET=e2e-only-webhook-master-secret",
    "SUBJECT_HASH_KEY=e2e-only-subject-hash-key-0123456789",
    `MODEL_PROVIDERS=${JSON.stringify(providers)}`,
    `E2E_LLM_KEY=${KEY}`,
    "DEFAULT_MODEL=e2e-llm/fake-chat",
    "",
  ].join("\n"),
);
const port = await freePort();
const inspector = await freePort();
// Its own state directory, so it runs beside the other CI stages (SQLite locks a shared .wrangler/state).
const dev = startDev({ root, port, inspector, persist: join(dir, "state"), envFile, env: "dev" });

let failed: unknown;
try {
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`${base}/health`, Date.now() + 120_000);
  const now = Math.floor(Date.now() / 1000);
  const token = await sign({ tenant: "e2e", role: "client", iat: now, exp: now + 600 }, JWT_SECRET, "HS256");
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };

  const listed = (await (await fetch(`${base}/v1/models`, { headers })).json()) as {
    defaultModel: string;
    models: { id: string }[];
  };
  check(
    listed.models.some((m) => m.id === "e2e-llm/fake-chat"),
    `GET /v1/models does not list e2e-llm/fake-chat: ${JSON.stringify(listed)}`,
  );
  check(listed.defaultModel === "e2e-llm/fake-chat", `the default model is ${listed.defaultModel}`);

  const created = await fetch(`${base}/v1/sessions/e2e-custom`, { method: "PUT", headers, body: "{}" });
  check(created.status === 201, `PUT session: ${created.status} ${await created.text()}`);
  const accepted = await fetch(`${base}/v1/sessions/e2e-custom/conversations/root/inputs?wait=30`, {
    method: "POST",
    headers,
    body: JSON.stringify({ input: "hello" }),
  });
  const answer = (await accepted.json()) as {
    result?: { status?: string };
    answer?: { model?: { content?: { type: string; text?: string }[] }[] };
  };
  const text = (answer.answer?.model?.[0]?.content ?? []).map((b) => b.text ?? "").join("");
  check(
    answer.result?.status === "done" && text === "Hello from the fake endpoint",
    `input answer: ${JSON.stringify(answer)}`,
  );
  check(seen.length === 1, `the fake endpoint saw ${seen.length} requests`);
  check(seen[0]?.path === "/v1/chat/completions", `request path ${seen[0]?.path}`);
  check(seen[0]?.authorization === `Bearer ${KEY}`, "the key secret was not sent");
  check(
    seen[0]?.body.model === "fake-chat" && seen[0]?.body.stream === true,
    `request body ${JSON.stringify(seen[0]?.body)}`,
  );

  // Instructions: a profile named at create is the request's leading system or developer message.
  const operator = await sign({ tenant: "e2e", role: "operator", iat: now, exp: now + 600 }, JWT_SECRET, "HS256");
  const profile = await fetch(`${base}/v1/profiles/e2e-agent`, {
    method: "PUT",
    headers: { ...headers, authorization: `Bearer ${operator}` },
    body: JSON.stringify({ sections: [{ id: "role", text: "You are the E2E agent of {{company}}." }] }),
  });
  check(profile.status === 201, `PUT profile: ${profile.status} ${await profile.text()}`);
  const instructed = await fetch(`${base}/v1/sessions/e2e-instructed`, {
    method: "PUT",
    headers,
    body: JSON.stringify({ profile: "e2e-agent", variables: { company: "Acme" } }),
  });
  check(instructed.status === 201, `PUT instructed session: ${instructed.status} ${await instructed.text()}`);
  const asked = await fetch(`${base}/v1/sessions/e2e-instructed/conversations/root/inputs?wait=30`, {
    method: "POST",
    headers,
    body: JSON.stringify({ input: "who are you?" }),
  });
  check(((await asked.json()) as { status?: string }).status === "done", "the instructed input was not answered");
  const lead = seen[1]?.body.messages?.[0];
  check(
    (lead?.role === "system" || lead?.role === "developer") &&
      JSON.stringify(lead.content).includes("You are the E2E agent of Acme."),
    `the request's leading message is not the profile's text: ${JSON.stringify(seen[1]?.body.messages?.slice(0, 2))}`,
  );
  console.log(
    "e2e custom provider: ok (GET /v1/models, PUT, accept -> answered by the fake endpoint over wrangler dev; a profile is the system message)",
  );
} catch (error) {
  failed = error;
  console.log(`e2e custom provider: FAILED: ${error instanceof Error ? error.message : String(error)}`);
  console.log(dev.log.split("\n").slice(-30).join("\n"));
} finally {
  signalGroup(dev, "SIGTERM");
  fake.closeAllConnections();
  fake.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed === undefined ? 0 : 1);
