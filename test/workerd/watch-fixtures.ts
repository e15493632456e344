/**
 * Fixtures for a user's open watches (docs/users.md "Revocation", docs/operations.md "Deleting a user's data"): a
 * WebSocket or SSE watch opened over HTTP with a watch token, that tells whether and how it closed, and a watch token
 * minted with a user's token.
 */
import { SELF } from "cloudflare:test";
import { BASE, call, json } from "./http-fixtures.js";

export interface Watch {
  readonly status: number;
  /** The WebSocket's close (code and reason), or the SSE stream's end. */
  closed(): { readonly code: number; readonly reason: string } | undefined;
  /** Messages (WebSocket) or bytes of text (SSE) received so far. */
  received(): number;
  close(): void;
}

export async function wsWatch(path: string, watchToken: string): Promise<Watch> {
  const response = await SELF.fetch(`${BASE}${path}?access_token=${watchToken}`, { headers: { upgrade: "websocket" } });
  const ws = response.webSocket;
  if (ws === null)
    return { status: response.status, closed: () => undefined, received: () => 0, close: () => undefined };
  ws.accept();
  let closed: { code: number; reason: string } | undefined;
  let received = 0;
  ws.addEventListener("message", () => {
    received += 1;
  });
  ws.addEventListener("close", (event) => {
    closed = { code: event.code, reason: event.reason };
  });
  return { status: response.status, closed: () => closed, received: () => received, close: () => ws.close() };
}

/** An SSE response read to its end in the background (a watch, or any streamed answer such as a chat resume). */
export function sseOf(response: Response, controller: AbortController): Watch {
  let closed: { code: number; reason: string } | undefined;
  let received = 0;
  const reader = response.body?.getReader();
  if (response.status === 200 && reader !== undefined) {
    void (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          received += value.byteLength;
        }
        closed = { code: 0, reason: "ended" };
      } catch {
        closed = { code: -1, reason: "aborted" };
      }
    })();
  } else {
    void response.body?.cancel();
  }
  return { status: response.status, closed: () => closed, received: () => received, close: () => controller.abort() };
}

export async function sseWatch(path: string, watchToken: string): Promise<Watch> {
  const controller = new AbortController();
  const response = await SELF.fetch(`${BASE}${path}?access_token=${watchToken}`, { signal: controller.signal });
  return sseOf(response, controller);
}

export async function waitFor(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (let waited = 0; !check(); waited += 20) {
    if (waited > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function mintWatchToken(session: string, userToken: string, ttlSeconds?: number): Promise<string> {
  const response = await call("POST", `/v1/sessions/${session}/conversations/root/watch-token`, {
    token: userToken,
    ...(ttlSeconds === undefined ? {} : { body: { ttlSeconds } }),
  });
  if (response.status !== 201) throw new Error(`watch-token: ${response.status} ${await response.text()}`);
  return (await json<{ token: string }>(response)).token;
}
