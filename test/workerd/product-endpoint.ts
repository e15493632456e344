/**
 * A product's endpoint for HTTP tools inside the workerd tests: it sits on `HostSeams.fetch` (what remote
 * calls send with), checks each request's Standard Webhooks signature with the tool's secret using the
 * `standardwebhooks` library (the secret derived here from the test master secret, not by the Worker's
 * code), records it, and answers as the test scripts it. `postResult` is the product's backend answering
 * a 202'd call: a signed `POST /v1/tool-results/{tenant}/{session}/{taskId}` through the Worker.
 */
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { base64 } from "../../src/worker/crypto/base64.js";
import { setHostSeams, type HostSeams } from "../../src/worker/platform/host-config.js";
import { call, token } from "./http-fixtures.js";

/** One request the endpoint saw, signature checked. */
export interface SeenRequest {
  readonly url: string;
  readonly path: string;
  readonly key: string;
  readonly webhookId: string;
  readonly body: {
    readonly session: string;
    readonly conversationId: number;
    readonly taskId: number;
    readonly toolCallId: string;
    readonly name: string;
    readonly arguments: Record<string, unknown>;
  };
}

export type Reply = (seen: SeenRequest) => Response | Promise<Response>;

/** `whsec_` + base64(HMAC-SHA256(master, "pico-edge tool:" + tenant + "/" + tool)), as docs/tools.md says. */
export async function toolSecretOf(tenant: string, tool: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(env.WEBHOOK_MASTER_SECRET),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return `whsec_${base64(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`pico-edge tool:${tenant}/${tool}`)))}`;
}

export const ok = (output: unknown): Response => Response.json({ output });

export class ProductEndpoint {
  readonly requests: SeenRequest[] = [];
  readonly refused: string[] = [];
  readonly #tenant: string;
  readonly #reply: Reply;

  constructor(tenant: string, reply: Reply) {
    this.#tenant = tenant;
    this.#reply = reply;
  }

  readonly fetch = async (request: Request): Promise<Response> => {
    const text = await request.text();
    const body = JSON.parse(text) as SeenRequest["body"];
    const headers = {
      "webhook-id": request.headers.get("webhook-id") ?? "",
      "webhook-timestamp": request.headers.get("webhook-timestamp") ?? "",
      "webhook-signature": request.headers.get("webhook-signature") ?? "",
    };
    try {
      new Webhook(await toolSecretOf(this.#tenant, body.name)).verify(text, headers);
    } catch (error) {
      this.refused.push(`${request.url}: ${error instanceof Error ? error.message : String(error)}`);
      return Response.json({ title: "Invalid signature" }, { status: 401 });
    }
    const seen: SeenRequest = {
      url: request.url,
      path: new URL(request.url).pathname,
      key: request.headers.get("idempotency-key") ?? "",
      webhookId: headers["webhook-id"],
      body,
    };
    this.requests.push(seen);
    return this.#reply(seen);
  };

  /** Install as the remote calls' fetch, beside other seams (a clock, the catalog's time-to-live). */
  install(other: Omit<HostSeams, "fetch"> = {}): void {
    setHostSeams({ ...other, fetch: this.fetch });
  }

  /** The product's backend posts the result of a 202'd call, signed with the tool's secret. */
  async postResult(
    seen: SeenRequest,
    result: { readonly output: unknown; readonly isError?: boolean },
    options: { readonly webhookId?: string } = {},
  ): Promise<Response> {
    const body = JSON.stringify(result);
    const id = options.webhookId ?? seen.webhookId;
    const seconds = Math.floor(Date.now() / 1000);
    const signature = new Webhook(await toolSecretOf(this.#tenant, seen.body.name)).sign(
      id,
      new Date(seconds * 1000),
      body,
    );
    return call("POST", `/v1/tool-results/${this.#tenant}/${seen.body.session}/${seen.body.taskId}`, {
      rawBody: body,
      headers: {
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(seconds),
        "webhook-signature": signature,
      },
    });
  }
}

/** An operator's PUT /v1/tools/{name}. */
export async function defineTool(tenant: string, name: string, definition: unknown): Promise<Response> {
  return call("PUT", `/v1/tools/${name}`, { token: await token(tenant, "operator"), body: definition });
}
