/**
 * Reading the session object's SSE watch (watch/transport.ts) inside the Worker, for the AG-UI route
 * (routes/ag-ui.ts): one message per blank-line-terminated block, `event:` and `data:` fields (data lines joined
 * with newlines), a comment block (the keep-alive) as its own message.
 */

export type SseMessage =
  { readonly type: "message"; readonly event: string; readonly data: string } | { readonly type: "comment" };

function parseBlock(block: string): SseMessage | undefined {
  let event = "message";
  const data: string[] = [];
  let comment = false;
  for (const line of block.split(/\r?\n/)) {
    if (line === "") continue;
    if (line.startsWith(":")) {
      comment = true;
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const raw = colon < 0 ? "" : line.slice(colon + 1);
    const value = raw.startsWith(" ") ? raw.slice(1) : raw;
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length > 0) return { type: "message", event, data: data.join("\n") };
  return comment ? { type: "comment" } : undefined;
}

/** The messages of an SSE body, in order, until it ends. */
export async function* readSseMessages(reader: ReadableStreamDefaultReader<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const message = parseBlock(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (message !== undefined) yield message;
    }
  }
}
