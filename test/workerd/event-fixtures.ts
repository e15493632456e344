/**
 * Fixtures for events out (docs/integrations.md "Events out"): a receiver that stands in for every
 * endpoint (installed as the host's fetch seam, so no network is used), an operator's endpoint
 * registration over HTTP, and verification with the `standardwebhooks` library.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, token } from "./http-fixtures.js";

/** One request a receiver got. */
export interface Received {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly event: {
    readonly id: string;
    readonly type: string;
    readonly timestamp: string;
    readonly data: Record<string, unknown>;
  };
  /** What it answered (0: it never answered). */
  readonly status: number;
}

/** What the receiver answers a request with: a status, or a hang that never answers. */
export type Reply = number | "hang";

export class Receiver {
  readonly received: Received[] = [];
  /** The reply per URL (default 200). */
  readonly replies = new Map<string, Reply>();

  readonly fetch = async (request: Request): Promise<Response> => {
    const body = await request.text();
    const headers: Record<string, string> = {};
    request.headers.forEach((value, key) => (headers[key] = value));
    const reply = this.replies.get(request.url) ?? 200;
    this.received.push({
      url: request.url,
      headers,
      body,
      event: JSON.parse(body) as Received["event"],
      status: reply === "hang" ? 0 : reply,
    });
    if (reply === "hang") {
      return new Promise<Response>((_resolve, reject) =>
        request.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }),
      );
    }
    return new Response(reply === 200 ? "ok" : "no", { status: reply });
  };

  to(url: string): Received[] {
    return this.received.filter((request) => request.url === url);
  }
}

/**
 * A fresh Receiver as the host's fetch seam before each test of the calling file; after each, the seams are reset and
 * every object is aborted (nothing a test left running reaches the next). Answers the current test's receiver.
 */
export function receiverPerTest(): () => Receiver {
  let receiver = new Receiver();
  beforeEach(() => {
    receiver = new Receiver();
    setHostSeams({ fetch: receiver.fetch });
  });
  afterEach(async () => {
    setHostSeams({});
    await abortAllDurableObjects();
  });
  return () => receiver;
}

export interface Registered {
  readonly id: string;
  readonly secret: string;
  readonly url: string;
}

/** POST /v1/webhook-endpoints as an operator of `tenant`. */
export async function registerEndpoint(
  tenant: string,
  body: { url: string; events: string[]; sessions?: string[]; description?: string },
): Promise<Registered> {
  const response = await call("POST", "/v1/webhook-endpoints", { token: await token(tenant, "operator"), body });
  if (response.status !== 201) throw new Error(`register: ${response.status} ${await response.text()}`);
  const created = await json<{ id: string; secret: string; url: string }>(response);
  return { id: created.id, secret: created.secret, url: created.url };
}

/**
 * Verify a received request with `standardwebhooks` as a receiver would, with the library's clock at
 * `atMs` (it checks the timestamp against Date.now within 5 minutes; tests on a manual clock pass its time).
 */
export function verifyAt(atMs: number | undefined, secret: string, request: Received): unknown {
  const verify = (): unknown => new Webhook(secret).verify(request.body, request.headers);
  if (atMs === undefined) return verify();
  const realNow = Date.now;
  Date.now = () => atMs;
  try {
    return verify();
  } finally {
    Date.now = realNow;
  }
}
