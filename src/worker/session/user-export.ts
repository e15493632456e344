/**
 * A user's export (docs/operations.md "Export and import"): the batch lines of session/transfer.ts as an end user
 * may read them. Tasks are shown as `presentTaskToUser` shows them (no remote tool's or MCP server's URL), and no
 * remote server's own text is carried: a product endpoint's or an MCP server's error message, error body or error
 * result is what an operator debugs with, not what a user keeps (it may name hosts, rows or internals). What a
 * failure was stays: the remote call's error code and HTTP status, the tool's name, that the result is an error.
 *
 * Where such text lands, and what replaces it:
 *   a `remote_call` task (kind remote-call.ts)   outcome.message -> our own sentence; outcome.problem dropped;
 *                                                an error result's output -> WITHHELD; retry_wait's lastError -> WITHHELD
 *   a tool task's output and its `tool_result`   details of a failed remote call keep error, remoteCall, mcp and
 *   entry (remote-call-tool.ts)                  http.status; the result's text -> our own sentence
 *   a late result's notice of an error           its first sentence (ours), then WITHHELD
 *   an inbound delivery's user entry              data.inbound keeps its source; the payload is left out
 *                                                (presentEntryToUser: payloadWithheld)
 * The line count, sequences and ids are the operator's export's: only texts change.
 * A redactor is made per export: a settle write names no kind, so it remembers the remote calls it has seen (a
 * task is exported at its creating sequence, before its settle).
 */
import { presentEntryToUser, presentTaskToUser } from "../../kinds/stored.js";
import type { Entry, Id, JsonObject, JsonValue, MainWrite, Task } from "../../storage/records.js";

/** What replaces a remote server's text in a user's export. */
export const WITHHELD = "[withheld: the remote server's text is shown to operators only]";

/** The task kind of remote calls (remote-call.ts). */
const REMOTE_CALL_KIND = "remote_call";

export class UserExportRedactor {
  readonly #remoteCalls = new Set<Id>();

  /** One batch line (with its "\n") as a user sees it. */
  line(line: string): string {
    const batch = JSON.parse(line) as { first: number; writes: MainWrite[] };
    const writes = batch.writes.map((w) => this.#write(w));
    return `${JSON.stringify({ first: batch.first, writes })}\n`;
  }

  #write(w: MainWrite): MainWrite {
    switch (w.type) {
      case "task": {
        const task = presentTaskToUser(w.task);
        if (task.kind === REMOTE_CALL_KIND) this.#remoteCalls.add(task.id);
        return { ...w, task: { ...task, state: this.#state(task.id, task.state) } };
      }
      case "patch":
      case "settle":
        return { ...w, state: this.#state(w.id, shownState(w.id, w.state)) };
      case "entry":
        if (w.entry.kind === "tool_result") return { ...w, entry: { ...w.entry, ...toolResult(w.entry) } };
        if (w.entry.kind === "notice") return { ...w, entry: { ...w.entry, ...remoteNotice(w.entry) } };
        // An inbound delivery's user entry: its source, never its payload (the operator's).
        return w.entry.kind === "user" ? { ...w, entry: withoutPayload(w.entry) } : w;
      case "value.set":
      case "value.delete":
      case "list.append":
      case "list.remove":
      case "list.clear":
      case "createConversation":
      case "deleteConversation":
        return w;
      default: {
        const never: never = w;
        return never;
      }
    }
  }

  #state(id: Id, state: Task["state"]): Task["state"] {
    if (this.#remoteCalls.has(id)) return remoteCallState(state);
    const output = state["output"];
    if (!isObject(output) || !remoteFailure(output)) return state;
    return { ...state, output: { ...output, details: failureDetails(output["details"]) } };
  }
}

/** A patch's or settle's state as `presentTaskToUser` shows it (no URL); its shape stays. */
function shownState(id: Id, state: Task["state"]): Task["state"] {
  const shown: Task = { id, conversationId: 0, kind: "settle", role: "terminal", state, after: [] };
  return presentTaskToUser(shown).state;
}

/** A remote call's state without its server's text (see the module comment). */
function remoteCallState(state: Task["state"]): Task["state"] {
  const out: JsonObject = { ...state };
  if (typeof out["lastError"] === "string") out["lastError"] = WITHHELD;
  const outcome = state["outcome"];
  if (isObject(outcome)) {
    if (outcome["type"] === "error") {
      const code = typeof outcome["code"] === "string" ? outcome["code"] : "failed";
      const status = typeof outcome["status"] === "number" ? outcome["status"] : undefined;
      out["outcome"] = {
        type: "error",
        code,
        message: failureText(state["name"], code, status),
        ...(status === undefined ? {} : { status }),
      };
    } else if (outcome["isError"] === true) {
      out["outcome"] = { ...outcome, output: WITHHELD };
    }
  }
  return out as Task["state"];
}

/** Whether a tool output (or a tool result's data) is a failed remote call's. */
function remoteFailure(data: JsonObject): boolean {
  const details = data["details"];
  return data["isError"] === true && isObject(details) && typeof details["remoteCall"] === "number";
}

/** A failed remote call's details: what failed, never what its server said. */
function failureDetails(details: JsonValue | undefined): JsonObject {
  if (!isObject(details)) return {};
  const out: JsonObject = {};
  for (const key of ["error", "remoteCall", "mcp"] as const) {
    const value = details[key];
    if (value !== undefined) out[key] = value;
  }
  const http = details["http"];
  if (isObject(http) && typeof http["status"] === "number") out["http"] = { status: http["status"] };
  return out;
}

/** A tool result entry of a failed remote call: its details and its text without the server's words. */
function toolResult(entry: Extract<MainWrite, { type: "entry" }>["entry"]): Partial<typeof entry> {
  const data = entry.data;
  if (!isObject(data) || !remoteFailure(data)) return {};
  const details = failureDetails(data["details"]);
  const status = isObject(details["http"]) ? details["http"]["status"] : undefined;
  const code = typeof details["error"] === "string" ? details["error"] : "error_result";
  const name = entry.model?.[0] !== undefined && "toolName" in entry.model[0] ? entry.model[0].toolName : undefined;
  const text = failureText(name, code, typeof status === "number" ? status : undefined);
  return {
    data: { ...data, details },
    ...(entry.model === undefined
      ? {}
      : {
          model: entry.model.map((message) =>
            message.role === "toolResult" ? { ...message, content: [{ type: "text" as const, text }] } : message,
          ),
        }),
  };
}

/**
 * A remote call's late-result notice (remote-call.ts `appendRemoteNotice`) of an error or an error result: its first
 * sentence (ours: which call, which tool, how it ended) without the server's text after it.
 */
function remoteNotice(entry: Extract<MainWrite, { type: "entry" }>["entry"]): Partial<typeof entry> {
  const data = entry.data;
  const remote = isObject(data) ? data["remoteCall"] : undefined;
  if (!isObject(remote) || remote["outcome"] === "output" || entry.model === undefined) return {};
  return {
    model: entry.model.map((message) => {
      if (message.role !== "system" || typeof message.content !== "string") return message;
      const stop = message.content.indexOf("\n");
      return { ...message, content: `${stop < 0 ? message.content : message.content.slice(0, stop)} ${WITHHELD}` };
    }),
  };
}

function failureText(name: JsonValue | undefined, code: string, status: number | undefined): string {
  const tool = typeof name === "string" ? `tool "${name}"` : "a remote tool";
  return `${tool} failed (${code}${status === undefined ? "" : `, HTTP ${status}`}); ${WITHHELD}`;
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return value !== undefined && value !== null && typeof value === "object" && !Array.isArray(value);
}

/** A user entry as a user's export carries it: an inbound delivery's payload left out, its stored shape kept. */
function withoutPayload(entry: Entry): Entry {
  const shown = presentEntryToUser(entry);
  return shown.data === entry.data ? entry : { ...entry, ...(shown.data === undefined ? {} : { data: shown.data }) };
}
