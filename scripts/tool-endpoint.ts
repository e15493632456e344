/**
 * `npm run tool-endpoint` runs a tiny product endpoint for HTTP tools on http://127.0.0.1:8788, the
 * endpoint of the "Your own tools" walk (docs/tools.md). Every request must carry a valid Standard
 * Webhooks signature made with the tool's secret, which it derives from WEBHOOK_MASTER_SECRET (environment
 * or .dev.vars) exactly as the Worker does and `npm run tool-secret` prints:
 *
 *   tool secret = "whsec_" + base64(HMAC-SHA256(WEBHOOK_MASTER_SECRET, "pico-edge tool:" + tenant + "/" + tool))
 *
 * (the tool is the body's `name`; the tenant is `--tenant`, default acme). It verifies with the
 * `standardwebhooks` library, not with the Worker's code. The path says how it answers:
 *
 *   POST /lookup  200 {"output": {"id", "status", "eta"}} at once
 *   POST /later   202, then after --delay-ms (default 2000) a signed POST of {"output", "isError": false}
 *                 to {--api}/v1/tool-results/{tenant}/{session}/{taskId}, as a product's backend answers later
 *   POST /hold    holds the first request of each Idempotency-Key for --hold-ms (default 20000), then 200;
 *                 a repeat of the key is answered at once (the restart drill's kill lands while one is held)
 *   GET /requests {"items": [...]} every tool request seen, in order (what the walk and the drill check)
 *
 * A bad or missing signature is 401. Flags: --port, --tenant, --api (default http://127.0.0.1:8787),
 * --delay-ms, --hold-ms. Run by Node directly (type stripping); it imports nothing from src/.
 */
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { devSecret, flags } from "./dev-secrets.ts";

/** One tool request as the endpoint saw it. */
export interface SeenRequest {
  readonly path: string;
  readonly at: number;
  /** The Idempotency-Key header: `{session}:{incarnation}:{taskId}`, the same on every retry of one call. */
  readonly key: string;
  readonly webhookId: string;
  readonly name: string;
  readonly session: string;
  readonly conversationId: number;
  readonly taskId: number;
  readonly toolCallId: string;
  readonly arguments: unknown;
}

/** What became of a `/later` result the endpoint posted back. */
export interface PostedResult {
  readonly taskId: number;
  readonly status: number;
  readonly body: string;
}

export interface ToolEndpointOptions {
  readonly port: number;
  readonly tenant: string;
  /** The pico-edge base URL a `/later` result is posted to. */
  readonly api: string;
  readonly masterSecret: string;
  readonly delayMs: number;
  readonly holdMs: number;
  readonly log?: (line: string) => void;
}

export interface ToolEndpoint {
  readonly url: string;
  readonly requests: SeenRequest[];
  readonly posted: PostedResult[];
  close(): Promise<void>;
}

/** A tool's signing secret, derived as the Worker derives it (`npm run tool-secret`). */
export function toolSecret(masterSecret: string, tenant: string, tool: string): string {
  return `whsec_${createHmac("sha256", masterSecret).update(`pico-edge tool:${tenant}/${tool}`).digest("base64")}`;
}

interface ToolBody {
  readonly session: string;
  readonly conversationId: number;
  readonly taskId: number;
  readonly toolCallId: string;
  readonly name: string;
  readonly arguments: unknown;
}

function toolBody(value: unknown): ToolBody | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const { session, conversationId, taskId, toolCallId, name } = v;
  if (
    typeof session !== "string" ||
    typeof conversationId !== "number" ||
    typeof taskId !== "number" ||
    typeof toolCallId !== "string" ||
    typeof name !== "string"
  )
    return undefined;
  return { session, conversationId, taskId, toolCallId, name, arguments: v["arguments"] };
}

function header(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return Array.isArray(value) ? (value[0] ?? "") : (value ?? "");
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": status >= 400 ? "application/problem+json" : "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function startToolEndpoint(options: ToolEndpointOptions): Promise<ToolEndpoint> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const requests: SeenRequest[] = [];
  const posted: PostedResult[] = [];
  const held = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();

  /** The product's backend answers a 202'd call: a signed POST of the result, with the same delivery id. */
  const answerLater = (body: ToolBody, webhookId: string): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      const result = JSON.stringify({
        output: { id: idOf(body.arguments), status: "refund approved", by: "the product's backend" },
        isError: false,
      });
      const signer = new Webhook(toolSecret(options.masterSecret, options.tenant, body.name));
      const now = new Date();
      const url = `${options.api}/v1/tool-results/${encodeURIComponent(options.tenant)}/${encodeURIComponent(body.session)}/${body.taskId}`;
      void fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": webhookId,
          "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
          "webhook-signature": signer.sign(webhookId, now, result),
        },
        body: result,
      })
        .then(async (response) => {
          const text = await response.text();
          posted.push({ taskId: body.taskId, status: response.status, body: text });
          log(`posted the result of task ${body.taskId}: ${response.status} ${text}`);
        })
        .catch((error: unknown) =>
          log(
            `posting the result of task ${body.taskId} failed: ${error instanceof Error ? error.message : String(error)}`,
          ),
        );
    }, options.delayMs);
    timers.add(timer);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? "/", "http://endpoint").pathname;
    if (req.method === "GET" && path === "/requests") return send(res, 200, { items: requests });
    if (req.method !== "POST" || !["/lookup", "/later", "/hold"].includes(path))
      return send(res, 404, { title: "Not found", detail: "POST /lookup, /later or /hold; GET /requests" });
    const text = await readBody(req);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return send(res, 400, { title: "Bad request", detail: "the body is not JSON" });
    }
    const body = toolBody(parsed);
    if (body === undefined)
      return send(res, 400, {
        title: "Bad request",
        detail: "the body is not a tool call {session, conversationId, taskId, toolCallId, name, arguments}",
      });
    const webhookId = header(req, "webhook-id");
    try {
      new Webhook(toolSecret(options.masterSecret, options.tenant, body.name)).verify(text, {
        "webhook-id": webhookId,
        "webhook-timestamp": header(req, "webhook-timestamp"),
        "webhook-signature": header(req, "webhook-signature"),
      });
    } catch (error) {
      log(
        `refused an unsigned or badly signed call of ${body.name}: ${error instanceof Error ? error.message : String(error)}`,
      );
      return send(res, 401, {
        title: "Invalid signature",
        detail: `not signed with the secret of tool ${body.name} of tenant ${options.tenant}`,
      });
    }
    const key = header(req, "idempotency-key");
    requests.push({ path, at: Date.now(), key, webhookId, ...body });
    log(`${path} ${body.name} ${JSON.stringify(body.arguments)} (Idempotency-Key ${key})`);
    switch (path) {
      case "/lookup":
        return send(res, 200, { output: { id: idOf(body.arguments), status: "shipped", eta: "2 days" } });
      case "/later":
        answerLater(body, webhookId);
        return send(res, 202, { accepted: true });
      case "/hold":
        if (!held.has(key)) {
          held.add(key);
          await sleep(options.holdMs);
        }
        return send(res, 200, { output: { id: idOf(body.arguments), held: true } });
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent)
        send(res, 500, { title: "Internal error", detail: error instanceof Error ? error.message : String(error) });
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : options.port;
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        posted,
        close: () =>
          new Promise<void>((done) => {
            for (const timer of timers) clearTimeout(timer);
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function idOf(args: unknown): unknown {
  return typeof args === "object" && args !== null ? (args as Record<string, unknown>)["id"] : undefined;
}

function number(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number`);
  return n;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const args = flags(process.argv.slice(2));
    const endpoint = await startToolEndpoint({
      port: number(args.get("port"), 8788, "port"),
      tenant: args.get("tenant") ?? "acme",
      api: args.get("api") ?? "http://127.0.0.1:8787",
      masterSecret: devSecret("WEBHOOK_MASTER_SECRET"),
      delayMs: number(args.get("delay-ms"), 2_000, "delay-ms"),
      holdMs: number(args.get("hold-ms"), 20_000, "hold-ms"),
    });
    process.stdout.write(
      `tool endpoint on ${endpoint.url}: POST /lookup (200), /later (202, then the result), /hold; GET /requests\n`,
    );
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
