/**
 * Fixtures for HTTP tools: a product endpoint on `HostSeams.fetch` that records every request, checks
 * its Standard Webhooks signature with the `standardwebhooks` library and the tool's derived secret,
 * and answers as scripted (200, 202, 500 or a hang); a signed result POST to /v1/tool-results; HTTP
 * tools defined in the tenant's catalog over HTTP (PUT /v1/tools), and reads of a session's tasks and
 * entries.
 */
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { expect } from "vitest";
import type { HttpToolDefinition } from "../../src/kinds/remote-call-tool.js";
import { toolSecret } from "../../src/worker/crypto/webhooks.js";
import { call, json, token } from "./http-fixtures.js";

export const PRODUCT = "https://product.test";

/** What the endpoint answers to one request (its 1-based number for that tool). */
export type Reply = { readonly status: number; readonly body?: unknown } | "hang";

export interface SeenRequest {
  readonly tool: string;
  readonly key: string | null;
  readonly id: string | null;
  readonly body: Record<string, unknown>;
  /** Did `standardwebhooks` verify the signature with the tool's secret? */
  readonly verified: boolean;
}

/**
 * The Idempotency-Key (= webhook-id) each remote call was last sent with, by `${session}/${taskId}`: what a
 * product's backend answers a 202 under (it includes the session's incarnation, so tests never build it).
 */
const sentKeys = new Map<string, string>();

/** A product's tool endpoints: `${PRODUCT}/<tool>`, one per catalog tool. */
export class ProductEndpoint {
  readonly requests: SeenRequest[] = [];
  readonly #tenant: string;
  readonly #replies = new Map<string, (n: number, body: Record<string, unknown>) => Reply>();

  constructor(tenant: string) {
    this.#tenant = tenant;
  }

  /** Script `tool`'s answers. */
  reply(tool: string, script: (n: number, body: Record<string, unknown>) => Reply): this {
    this.#replies.set(tool, script);
    return this;
  }

  seen(tool: string): SeenRequest[] {
    return this.requests.filter((r) => r.tool === tool);
  }

  readonly fetch = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const tool = url.pathname.slice(1);
    const text = await request.text();
    const headers = Object.fromEntries(request.headers);
    let verified = true;
    try {
      new Webhook(await toolSecret(env.WEBHOOK_MASTER_SECRET, this.#tenant, tool)).verify(text, headers);
    } catch {
      verified = false;
    }
    const body = JSON.parse(text) as Record<string, unknown>;
    this.requests.push({
      tool,
      key: request.headers.get("idempotency-key"),
      id: request.headers.get("webhook-id"),
      body,
      verified,
    });
    const key = request.headers.get("idempotency-key");
    if (key !== null) sentKeys.set(`${String(body["session"])}/${String(body["taskId"])}`, key);
    const script = this.#replies.get(tool);
    const reply: Reply = script === undefined ? { status: 404 } : script(this.seen(tool).length, body);
    if (reply === "hang") {
      return new Promise<Response>((_resolve, reject) => {
        request.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      });
    }
    return new Response(reply.body === undefined ? null : JSON.stringify(reply.body), {
      status: reply.status,
      headers: reply.body === undefined ? {} : { "content-type": "application/json" },
    });
  };
}

/** An HTTP tool definition at `${PRODUCT}/<name>` with one integer parameter `id`. */
export function httpDefinition(
  name: string,
  options: { readonly idempotent?: boolean; readonly timeoutMs?: number } = {},
): HttpToolDefinition {
  return {
    description: `Looks up a record (${name})`,
    parameters: {
      type: "object",
      properties: { id: { type: "integer" } },
      required: ["id"],
      additionalProperties: false,
    },
    handler: {
      type: "http",
      url: `${PRODUCT}/${name}`,
      timeoutMs: options.timeoutMs ?? 30_000,
      idempotent: options.idempotent ?? false,
    },
    approval: "never",
    onTimeout: "deny",
  };
}

/** Define (or replace) an HTTP tool in the tenant's catalog, as an operator does. */
export async function defineTool(
  tenant: string,
  name: string,
  options: { readonly idempotent?: boolean; readonly timeoutMs?: number } = {},
): Promise<void> {
  const response = await call("PUT", `/v1/tools/${name}`, {
    token: await token(tenant, "operator"),
    body: httpDefinition(name, options),
  });
  expect([200, 201], await response.clone().text()).toContain(response.status);
}

/**
 * POST a result to /v1/tool-results, signed by `standardwebhooks` with the tool's secret; its webhook-id is the
 * key the call was sent with (`options.webhookId` overrides it; a call never sent gets `{session}:{taskId}`).
 */
export async function postToolResult(
  tenant: string,
  session: string,
  taskId: number,
  tool: string,
  payload: unknown,
  options: { readonly webhookId?: string } = {},
): Promise<Response> {
  const body = JSON.stringify(payload);
  const id = options.webhookId ?? sentKeys.get(`${session}/${taskId}`) ?? `${session}:${taskId}`;
  const now = new Date();
  const signature = new Webhook(await toolSecret(env.WEBHOOK_MASTER_SECRET, tenant, tool)).sign(id, now, body);
  return call("POST", `/v1/tool-results/${tenant}/${session}/${taskId}`, {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": signature,
    },
  });
}

export interface TaskView {
  readonly id: number;
  readonly kind: string;
  readonly role: string;
  readonly state: Record<string, unknown> & { readonly status: string };
}

/** The session's tasks of one kind (operator route). */
export async function tasksOf(tenant: string, session: string, kind: string): Promise<TaskView[]> {
  const response = await call("GET", `/v1/sessions/${session}/tasks?limit=100`, {
    token: await token(tenant, "operator"),
  });
  return (await json<{ items: TaskView[] }>(response)).items.filter((task) => task.kind === kind);
}

export interface EntryView {
  readonly id: number;
  readonly kind: string;
  readonly data?: Record<string, unknown>;
  readonly model?: { role: string; content: unknown; isError?: boolean }[];
}

/** The root conversation's entries of one kind. */
export async function entriesOf(tenant: string, session: string, kind: string): Promise<EntryView[]> {
  const response = await call("GET", `/v1/sessions/${session}/conversations/root/entries?kind=${kind}&limit=100`, {
    token: await token(tenant, "client"),
  });
  return (await json<{ items: EntryView[] }>(response)).items;
}

/** The text of an entry's first message. */
export function textOf(entry: EntryView | undefined): string {
  const content = entry?.model?.[0]?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((part: { text?: string }) => part.text ?? "").join("") : "";
}
