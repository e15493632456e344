/**
 * Compact stored shapes of the turn kinds' records (docs/performance.md "Cost per turn"): tool result
 * data (§9.3; a tool result entry's `data` and a settled tool task's `output`, §8.3) and usage elements
 * (§8.2, `pi.usage`). Writers store fields at their defaults as absent; readers fill the defaults back,
 * so every reader sees the full shape, and rows written before (every field present) read the same.
 * `presentEntry`, `presentTask` and `presentUsageEvent` do the same for what leaves the service (HTTP API,
 * watch): a tool result entry's data, a settled tool task's output, a session watch's usage row;
 * `presentTaskToUser` is a task as an end user sees it (no remote call's URL), `presentEntryToUser` an entry (no
 * inbound delivery's payload).
 */
import type { Usage } from "@earendil-works/pi-ai";
import { toolResultKind } from "../core/entries.js";
import type { SessionEvent } from "../core/watch-types.js";
import type { Entry, JsonObject, JsonValue, Task } from "../storage/records.js";
import type { StoredToolData, StoredUsage, StoredUsageRow, ToolResultData, UsageRow } from "./states.js";

// ---------------------------------------------------------------------------------------------
// Tool result data (§9.3)

function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

/** The stored form: defaults absent; an untruncated output keeps its character count as `chars` (absent when 0). */
export function compactToolData(data: ToolResultData): StoredToolData {
  const out: StoredToolData = {};
  if (!isEmptyObject(data.details)) out.details = data.details;
  if (data.usage !== null) out.usage = data.usage;
  if (data.addedTools !== null) out.addedTools = data.addedTools;
  if (data.terminate) out.terminate = true;
  if (data.handoff !== null) out.handoff = data.handoff;
  if (data.delegated !== null) out.delegated = data.delegated;
  if (data.diags.length > 0) out.diags = data.diags;
  const t = data.truncation;
  if (t.truncated || t.totalChars !== t.retainedChars) out.truncation = t;
  else if (t.totalChars !== 0) out.chars = t.totalChars;
  if (data.isError) out.isError = true;
  return out;
}

/** The full data of a stored tool result (compact or written whole by an earlier version). */
export function readToolData(stored: StoredToolData): ToolResultData {
  const chars = stored.chars ?? 0;
  return {
    details: stored.details === undefined ? {} : stored.details,
    usage: stored.usage ?? null,
    addedTools: stored.addedTools ?? null,
    terminate: stored.terminate ?? false,
    handoff: stored.handoff ?? null,
    delegated: stored.delegated ?? null,
    diags: stored.diags ?? [],
    truncation: stored.truncation ?? { totalChars: chars, retainedChars: chars, truncated: false },
    isError: stored.isError ?? false,
  };
}

const TOOL_DATA_FIELDS: ReadonlySet<string> = new Set([
  "details",
  "usage",
  "addedTools",
  "terminate",
  "handoff",
  "delegated",
  "diags",
  "truncation",
  "chars",
  "isError",
]);

/**
 * An entry as the service shows it (HTTP API, watch views and events): a tool result entry's `data` is
 * the whole `ToolResultData` (§9.3) however it was stored, any field it does not know kept as is; every
 * other entry is returned unchanged (the same object). Storage keeps the compact form (fewer bytes).
 */
export function presentEntry(entry: Entry): Entry {
  const data = entry.data;
  if (entry.kind !== toolResultKind.kind || !isObject(data)) return entry;
  return { ...entry, data: presentToolData(data) };
}

/**
 * An entry as an end user's token sees it (transcript pages, watch views and events, the user's export):
 * `presentEntry`'s view, except that the user entry of an inbound delivery keeps where it came from
 * (`data.inbound.source`) but not the delivery's payload (`payload`, or `payloadText` and `payloadBytes` for a large
 * one; worker/inbound/template.ts `inboundData`), which is the operator's: `payloadWithheld: true` says it exists.
 * Every other entry is `presentEntry`'s (the same object when nothing changes).
 */
export function presentEntryToUser(entry: Entry): Entry {
  const shown = presentEntry(entry);
  const data = shown.data;
  if (shown.kind !== "user" || !isObject(data)) return shown;
  const inbound = data["inbound"];
  if (!isObject(inbound)) return shown;
  const { payload: _payload, payloadText: _text, payloadBytes: _bytes, ...kept } = inbound;
  if (Object.keys(kept).length === Object.keys(inbound).length) return shown;
  return { ...shown, data: { ...data, inbound: { ...kept, payloadWithheld: true } } };
}

/** The kind of tool tasks (`toolDefinition.kind` in tool.ts, which imports this module). */
const TOOL_TASK_KIND = "tool";

/**
 * A task as the service shows it (HTTP API, watch views and events): a settled tool task's `output` is the
 * whole `ToolResultData` (§9.3) however it was stored, any field it does not know kept as is; every other
 * task is returned unchanged (the same object). Its `call` is served as stored: a settled call keeps only
 * `id`, `name` (and `namespace`); the assistant entry it names holds the arguments.
 */
export function presentTask(task: Task): Task {
  const state = task.state as JsonObject;
  const output = state["output"];
  if (
    task.kind !== TOOL_TASK_KIND ||
    (state["status"] !== "done" && state["status"] !== "aborted") ||
    !isObject(output)
  )
    return task;
  return { ...task, state: { ...task.state, output: presentToolData(output) } };
}

/**
 * A task as an end user's token sees it (GET .../tasks, a conversation's snapshot and watch): `presentTask`'s
 * view without any remote target's URL (an operator's setting, perhaps with a key in its query): a remote
 * call's `target` and a running tool call's captured definition (`handler`) keep their `type` and name the
 * tool (`target.tool`, the task's tool name), never `url`. Operator and client tokens see `presentTask`'s view.
 */
export function presentTaskToUser(task: Task): Task {
  const shown = presentTask(task);
  const state = withoutRemoteUrls(shown.state as JsonObject);
  return state === shown.state ? shown : { ...shown, state: state as Task["state"] };
}

/** The kinds of remote target (remote-call-state.ts `RemoteTarget`, catalog-types.ts handlers) that carry a URL. */
const REMOTE_TYPES: ReadonlySet<JsonValue> = new Set<JsonValue>(["http", "mcp"]);

/** `value` with the `url` of every remote target or handler in it removed (the same object when there is none). */
function withoutRemoteUrls(value: JsonValue): JsonValue {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    const items = value.map(withoutRemoteUrls);
    return items.some((item, i) => item !== value[i]) ? items : value;
  }
  const object = value as JsonObject;
  const remote = REMOTE_TYPES.has(object["type"] ?? null);
  let changed = false;
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(object)) {
    if (key === "url" && remote) {
      changed = true;
      continue;
    }
    const shown = item === undefined ? item : withoutRemoteUrls(item);
    if (shown !== item) changed = true;
    if (shown !== undefined) out[key] = shown;
  }
  return changed ? out : object;
}

function presentToolData(data: JsonObject): JsonObject {
  const extra: JsonObject = {};
  for (const [k, v] of Object.entries(data)) if (!TOOL_DATA_FIELDS.has(k)) extra[k] = v;
  return { ...readToolData(data as StoredToolData), ...extra };
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return value !== undefined && value !== null && typeof value === "object" && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// Usage elements (§8.2)

/**
 * The stored form of a usage element: `kind` absent when "generation"; the four token counts and the four cost
 * components are absent
 * when 0, `totalTokens` when it is the sum of the counts, `cost.total` when it is the sum of the
 * components, and `cost` when nothing of it is left. Any other field (`reasoning`, `cacheWrite1h`,
 * `totalFromProvider`, ...) is kept as the provider reported it.
 */
export function compactUsageRow(row: UsageRow): StoredUsageRow {
  const { usage, kind, ...rest } = row;
  const head = kind === "generation" ? rest : { ...rest, kind };
  return usage === null ? { ...head, usage: null } : { ...head, usage: compactUsage(usage) };
}

const COUNTS = ["input", "output", "cacheRead", "cacheWrite"] as const;

function compactUsage(u: Usage & JsonObject): StoredUsage {
  const { cost: fullCost, ...counts } = u;
  const out: StoredUsage = { ...counts };
  for (const k of COUNTS) if (u[k] === 0) delete out[k];
  if (u.totalTokens === sum(u)) delete out["totalTokens"];
  const cost: JsonObject = { ...fullCost };
  for (const k of COUNTS) if (fullCost[k] === 0) delete cost[k];
  if (fullCost.total === sum(fullCost)) delete cost["total"];
  if (Object.keys(cost).length > 0) out["cost"] = cost;
  return out;
}

/** The four counts (or cost components) added in one fixed order, so a reader gets the same float. */
function sum(v: { input: number; output: number; cacheRead: number; cacheWrite: number }): number {
  return v.input + v.output + v.cacheRead + v.cacheWrite;
}

/** The full usage element (compact, or written whole by an earlier version). */
export function readUsageRow(stored: StoredUsageRow): UsageRow {
  const { usage, kind, conversationId, taskId, model } = stored;
  const head = { conversationId, taskId, kind: kind ?? "generation", model };
  return usage === null ? { ...head, usage: null } : { ...head, usage: readUsage(usage) };
}

function num(value: JsonValue | undefined): number {
  return typeof value === "number" ? value : 0;
}

function readUsage(s: StoredUsage): Usage & JsonObject {
  const { cost: storedCost, ...rest } = s;
  const c: JsonObject =
    storedCost !== undefined && storedCost !== null && typeof storedCost === "object" && !Array.isArray(storedCost)
      ? (storedCost as JsonObject)
      : {};
  const counts = {
    input: num(s["input"]),
    output: num(s["output"]),
    cacheRead: num(s["cacheRead"]),
    cacheWrite: num(s["cacheWrite"]),
  };
  const parts = {
    input: num(c["input"]),
    output: num(c["output"]),
    cacheRead: num(c["cacheRead"]),
    cacheWrite: num(c["cacheWrite"]),
  };
  const totalTokens = typeof s["totalTokens"] === "number" ? s["totalTokens"] : sum(counts);
  const total = typeof c["total"] === "number" ? c["total"] : sum(parts);
  return { ...rest, ...counts, totalTokens, cost: { ...c, ...parts, total } };
}

/**
 * A session watch event as the service shows it: a `usage` event's row is the whole `UsageRow` (what
 * `GET /usage` serves, `readUsageRow`); every other event is returned unchanged (the same object).
 */
export function presentUsageEvent(event: SessionEvent): SessionEvent {
  if (event.type !== "usage") return event;
  const row: JsonObject = { ...readUsageRow(event.row as StoredUsageRow) };
  return { ...event, row };
}
