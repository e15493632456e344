/**
 * The console's script (docs/console.md): sign in with a pasted token (sessionStorage), the
 * tenant's sessions from the directory (GET /v1/sessions), a session's conversation tree (forks and
 * children, from the session watch), a live transcript folded by the client's reducer (src/client, the
 * core's applyMessage) with streaming previews, both watched with EventSource and watch tokens, a composer for each
 * input mode, tasks, queued inputs
 * with withdraw, usage totals, the pending list (approvals and client tools, console/pending.ts), and the operator's
 * inspect view with release, clear fault, abort and
 * shutdown; a session's rig tab is console/rig.ts. Plain DOM; bundled by scripts/build-console.mjs into
 * public/console/app.js.
 */
import { applyMessage, applySessionMessage } from "../src/core/watch-reduce.js";
import type { ConversationView, SessionView, WatchMessage } from "../src/core/watch-types.js";
import type { Conversation, Entry, Id, JsonValue } from "../src/storage/records.js";
import type { UsageTotals } from "../src/kinds/states.js";
import { $, el } from "./dom.js";
import { pendingOf, renderPending } from "./pending.js";
import { RigView } from "./rig.js";
import { DeliveriesView } from "./deliveries.js";

interface Row {
  readonly session: string;
  readonly title?: string;
  readonly labels: readonly string[];
  readonly lastActivityAt: number;
  readonly liveTasks: number;
}

const TOKEN_KEY = "pico-edge.token";
let token = "";
let signedIn = false;
/** Signed in with a user token: the field next to Create names a template, not a session. */
let endUser = false;
let current: { name: string; conversation: Id | "root" } | undefined;
let conversationWatch: LiveWatch | undefined;
let sessionWatch: LiveWatch | undefined;
let view: ConversationView | undefined;
let cursor: string | undefined;
let tab: "conversation" | "rig" | "deliveries" = "conversation";

function status(message: string): void {
  $("status").textContent = message;
}

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  if (!signedIn) throw new Error("not signed in");
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  const parsed: unknown = text === "" ? undefined : JSON.parse(text);
  if (!response.ok) {
    const problem = parsed as { code?: string; detail?: string } | undefined;
    throw new Error(`${response.status} ${problem?.code ?? ""}: ${problem?.detail ?? text}`);
  }
  return parsed as T;
}

/** A live watch the console can close. */
interface LiveWatch {
  close(): void;
}

/**
 * Watch with EventSource, which cannot send headers: each connection gets a fresh watch token
 * (`POST {path}-token`) and carries it as `?access_token=` (the bearer token never goes into a URL).
 * While the token is valid the browser's own reconnect (with Last-Event-ID) resumes the stream; when the
 * token has expired, or the browser gives up (a 401 for an expired token), a new EventSource connects
 * with a fresh token and `?lastEventId=`, so the server resumes after the last message folded (or sends a
 * fresh view when it cannot). Every view and commit is folded with the client's reducer.
 */
function watch<View, Event>(
  path: string,
  fold: (view: View, message: WatchMessage<Event>) => View,
  onView: (view: View) => void,
): LiveWatch {
  let closed = false;
  let source: EventSource | undefined;
  let lastEventId: string | undefined;
  let folded: View | undefined;
  let attempt = 0;
  const received = (event: MessageEvent<string>, isView: boolean): void => {
    if (isView) folded = JSON.parse(event.data) as View;
    else if (folded !== undefined) folded = fold(folded, JSON.parse(event.data) as WatchMessage<Event>);
    if (event.lastEventId !== "") lastEventId = event.lastEventId;
    attempt = 0;
    if (folded !== undefined) onView(folded);
  };
  const retry = (delay: number): void => {
    source?.close();
    source = undefined;
    if (!closed) setTimeout(() => void connect(), delay);
  };
  const connect = async (): Promise<void> => {
    if (closed) return;
    try {
      const minted = await api<{ token: string; expiresAt: string }>("POST", `${path}-token`, {});
      if (closed) return;
      const expiresAt = Date.parse(minted.expiresAt);
      const params = new URLSearchParams({ access_token: minted.token });
      if (lastEventId !== undefined) params.set("lastEventId", lastEventId);
      const es = new EventSource(`${path}?${params.toString()}`);
      source = es;
      es.addEventListener("view", (event) => received(event, true));
      es.addEventListener("commit", (event) => received(event, false));
      es.onerror = () => {
        // CONNECTING: the browser retries by itself, which works while the token is valid. CLOSED: it gave up.
        if (es.readyState === EventSource.CLOSED || Date.now() >= expiresAt - 1000)
          retry(Math.min(10_000, 250 * 2 ** Math.min(attempt++, 6)));
      };
    } catch (error) {
      status(error instanceof Error ? error.message : String(error));
      retry(Math.min(10_000, 250 * 2 ** Math.min(attempt++, 6)));
    }
  };
  void connect();
  return {
    close: () => {
      closed = true;
      source?.close();
    },
  };
}

const rigView = new RigView(
  (path) => api("GET", path),
  (error) => status(error instanceof Error ? error.message : String(error)),
  {
    agents: $("rig-agents"),
    health: $("rig-health"),
    stalls: $("rig-stalls"),
    witness: $("rig-witness"),
    mail: $("rig-mail"),
  },
);

const deliveriesView = new DeliveriesView(
  api,
  (error) => status(error instanceof Error ? error.message : String(error)),
  {
    endpoint: $<HTMLSelectElement>("deliveries-endpoint"),
    status: $<HTMLSelectElement>("deliveries-status"),
    table: $("deliveries"),
  },
);

/** Show the open session's conversation, its rig or its event deliveries (read while shown). */
function showTab(next: "conversation" | "rig" | "deliveries"): void {
  tab = next;
  $("conversation-view").hidden = next !== "conversation";
  $("rig-view").hidden = next !== "rig";
  $("deliveries-view").hidden = next !== "deliveries";
  $("tab-conversation").classList.toggle("on", next === "conversation");
  $("tab-rig").classList.toggle("on", next === "rig");
  $("tab-deliveries").classList.toggle("on", next === "deliveries");
  if (next === "rig" && current !== undefined) rigView.open(sessionPath());
  else rigView.close();
  if (next === "deliveries" && current !== undefined) deliveriesView.open(sessionPath());
  else deliveriesView.close();
}

function guard(action: () => Promise<unknown>): () => void {
  return () => {
    status("");
    action().catch((error: unknown) => status(error instanceof Error ? error.message : String(error)));
  };
}

/** The text of an entry's model messages or data, for display. */
function entryText(entry: Entry): string {
  const parts: string[] = [];
  for (const message of entry.model ?? []) {
    parts.push(...contentText((message as { content?: unknown }).content));
    for (const [name, text] of Object.entries(sectionsOf(message)))
      parts.push(text === null ? `(${name} removed)` : `(${name}) ${text}`);
    const added = (message as { toolsAdded?: { name?: string }[] }).toolsAdded;
    if (Array.isArray(added) && added.length > 0)
      parts.push(`(tools: ${added.map((tool) => tool.name ?? "?").join(", ")})`);
  }
  if (parts.length === 0 && entry.data !== undefined) parts.push(JSON.stringify(entry.data));
  return parts.join("\n");
}

/** A system message's sections (name -> text, null: removed); none for other messages. */
function sectionsOf(message: unknown): Record<string, string | null> {
  const sections = (message as { sections?: unknown }).sections;
  return sections !== null && typeof sections === "object" ? (sections as Record<string, string | null>) : {};
}

/**
 * The instructions last prepared in the shown transcript: its system entries' sections folded in order (a
 * later entry replaces a section by name, null removes it), each section's text under its name.
 */
function instructionsText(entries: readonly Entry[]): string {
  const folded = new Map<string, string>();
  for (const entry of entries) {
    if (entry.kind !== "system") continue;
    for (const message of entry.model ?? [])
      for (const [name, text] of Object.entries(sectionsOf(message))) {
        if (text === null) folded.delete(name);
        else folded.set(name, text);
      }
  }
  return [...folded].map(([name, text]) => `[${name}]\n${text}`).join("\n\n") || "(none prepared yet)";
}

/** Text parts of message content (a string, or parts: text, thinking, tool calls). */
function contentText(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  const parts: string[] = [];
  for (const part of content as { type?: string; text?: string; thinking?: string; name?: string }[]) {
    if (part.type === "text" && part.text !== undefined) parts.push(part.text);
    else if (part.type === "thinking" && part.thinking !== undefined) parts.push(`(thinking) ${part.thinking}`);
    else if (part.type === "toolCall") parts.push(`[tool call ${part.name ?? ""}]`);
  }
  return parts;
}

/**
 * A live task's preview as text: a generation's is the partial assistant message (`{ content }`), other
 * kinds' previews may carry `text` (a job's output); anything else is shown as JSON.
 */
function previewText(preview: JsonValue): string {
  if (preview !== null && typeof preview === "object" && !Array.isArray(preview)) {
    const record = preview as Record<string, JsonValue>;
    if (typeof record["text"] === "string") return record["text"];
    if (record["content"] !== undefined) return contentText(record["content"]).join("\n");
  }
  return JSON.stringify(preview);
}

// Sign in ------------------------------------------------------------------------------------------

function signIn(value: string): void {
  token = value.trim();
  let claims: { tenant?: string; role?: string; sub?: string } = {};
  try {
    claims = JSON.parse(atob((token.split(".")[1] ?? "").replaceAll("-", "+").replaceAll("_", "/"))) as typeof claims;
  } catch {
    $("signin-error").textContent = "that is not a JWT";
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  signedIn = true;
  // An end user's token (docs/users.md) sees only that user's sessions and creates from a template.
  endUser = claims.role === "user";
  $("who").textContent = endUser
    ? `${claims.tenant ?? "?"} · ${claims.sub ?? "?"} (user)`
    : `${claims.tenant ?? "?"} (${claims.role ?? "?"})`;
  if (endUser) $<HTMLInputElement>("new-name").placeholder = "template";
  for (const id of ["top", "left", "center", "right"]) $(id).hidden = false;
  $("signin").hidden = true;
  void loadSessions(false).catch((error: unknown) => status(String(error)));
}

function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
}

// Sessions -----------------------------------------------------------------------------------------

async function loadSessions(more: boolean): Promise<void> {
  const q = $<HTMLInputElement>("filter").value.trim();
  const params = new URLSearchParams({ limit: "50" });
  if (q !== "") params.set("q", q);
  if (more && cursor !== undefined) params.set("cursor", cursor);
  const page = await api<{ items: Row[]; cursor?: string }>("GET", `/v1/sessions?${params.toString()}`);
  const list = $("sessions");
  if (!more) list.replaceChildren();
  for (const row of page.items) {
    const item = el("li", row.title === undefined ? row.session : `${row.title} (${row.session})`, {
      "data-session": row.session,
    });
    item.append(
      el(
        "small",
        ` ${row.labels.join(", ")} · ${new Date(row.lastActivityAt).toLocaleTimeString()} · ${row.liveTasks} live`,
      ),
    );
    item.addEventListener("click", () => void openSession(row.session, "root"));
    if (current?.name === row.session) item.classList.add("active");
    list.append(item);
  }
  cursor = page.cursor;
  $("more").hidden = cursor === undefined;
}

async function createSession(): Promise<void> {
  const name = $<HTMLInputElement>("new-name").value.trim();
  if (name === "") return;
  if (endUser) {
    // A user creates from the operator's template under a server-assigned name (POST /v1/sessions).
    const created = await api<{ session: string }>("POST", "/v1/sessions", { template: name });
    await loadSessions(false);
    await openSession(created.session, "root");
    return;
  }
  await api("PUT", `/v1/sessions/${encodeURIComponent(name)}`, {});
  await loadSessions(false);
  await openSession(name, "root");
}

async function openSession(name: string, conversation: Id | "root"): Promise<void> {
  if (!signedIn) return;
  conversationWatch?.close();
  if (current?.name !== name) {
    sessionWatch?.close();
    childOf.clear();
    lastSessionView = undefined;
    $("usage").textContent = "";
    $("pending").replaceChildren();
    sessionWatch = watch(`/v1/sessions/${encodeURIComponent(name)}/watch`, applySessionMessage, renderTree);
  }
  current = { name, conversation };
  showTab(tab);
  $("title").textContent = `${name} · ${conversation === "root" ? "root" : `conversation ${conversation}`}`;
  for (const item of $("sessions").children)
    item.classList.toggle("active", item.getAttribute("data-session") === name);
  view = undefined;
  renderConversation();
  conversationWatch = watch(
    `/v1/sessions/${encodeURIComponent(name)}/conversations/${conversation}/watch`,
    applyMessage,
    (v: ConversationView) => {
      view = v;
      renderConversation();
    },
  );
}

/** A child conversation (a subagent's) -> the conversation whose task created it, once looked up. */
const childOf = new Map<Id, Id>();
let lastSessionView: SessionView | undefined;

/**
 * The conversation a tree item hangs under: a fork's source (`parent.conversationId`), or for a child
 * the conversation of the task that owns it (`owner` is a task id, so the snapshot's `owner` names the
 * conversation: looked up once per child, the item stays at the top until then).
 */
function treeParent(c: Conversation): Id | undefined {
  if (c.parent !== undefined) return c.parent.conversationId;
  if (c.owner === undefined) return undefined;
  const known = childOf.get(c.id);
  if (known === undefined && current !== undefined) {
    const session = current.name;
    childOf.set(c.id, Number.NaN);
    api<{ owner: { conversationId: Id } | null }>("GET", `${sessionPath()}/conversations/${c.id}`)
      .then((snapshot) => {
        if (current?.name !== session || snapshot.owner === null) return;
        childOf.set(c.id, snapshot.owner.conversationId);
        if (lastSessionView !== undefined) renderTree(lastSessionView);
      })
      .catch((error: unknown) => {
        childOf.delete(c.id);
        status(error instanceof Error ? error.message : String(error));
      });
  }
  return known === undefined || Number.isNaN(known) ? undefined : known;
}

function treeLabel(c: Conversation): string {
  if (c.parent !== undefined) return `#${c.id} fork at ${c.parent.at === 0 ? "start" : `entry ${c.parent.at}`}`;
  if (c.owner !== undefined) return `#${c.id} child (task ${c.owner})`;
  return `#${c.id}`;
}

function renderTree(v: SessionView): void {
  lastSessionView = v;
  const ids = new Set(v.conversations.map((c) => c.id));
  const byParent = new Map<Id | undefined, Conversation[]>();
  for (const c of v.conversations) {
    const parent = treeParent(c);
    // Conversations whose parent is not listed (deleted, or not looked up yet) are roots of the tree.
    const key = parent !== undefined && ids.has(parent) ? parent : undefined;
    byParent.set(key, [...(byParent.get(key) ?? []), c]);
  }
  const build = (parent: Id | undefined): HTMLElement => {
    const list = document.createElement("ul");
    for (const c of byParent.get(parent) ?? []) {
      const item = el("li", treeLabel(c), { "data-conversation": String(c.id) });
      item.addEventListener("click", (event) => {
        event.stopPropagation();
        if (current !== undefined) void openSession(current.name, c.id);
      });
      if (
        current !== undefined &&
        (current.conversation === c.id ||
          (current.conversation === "root" && parent === undefined && c === v.conversations[0]))
      )
        item.classList.add("active");
      if (byParent.has(c.id)) item.append(build(c.id));
      list.append(item);
    }
    return list;
  };
  $("tree").replaceChildren(build(undefined));
  renderUsage(v);
  renderPending(
    $("pending"),
    pendingOf(v),
    (id, body) => api("POST", `${sessionPath()}/pending/${encodeURIComponent(id)}`, body),
    (error) => status(error instanceof Error ? error.message : String(error)),
  );
  if (v.faulted) status("the session is faulted: see Inspect");
}

function renderConversation(): void {
  const transcript = $("transcript");
  const previews = $("previews");
  if (view === undefined) {
    transcript.replaceChildren(el("p", "loading…"));
    previews.replaceChildren();
    return;
  }
  $("instructions").textContent = instructionsText(view.entries);
  transcript.replaceChildren(
    ...view.entries.map((entry) => {
      const row = el("div", "", { class: "entry", "data-entry": String(entry.id), "data-kind": entry.kind });
      row.append(el("span", `${entry.id} ${entry.kind}`, { class: "kind" }), document.createTextNode(entryText(entry)));
      return row;
    }),
  );
  previews.replaceChildren(
    ...Object.entries(view.previews)
      .filter(([, preview]) => previewText(preview) !== "")
      .map(([taskId, preview]) => el("div", `task ${taskId}: ${previewText(preview)}`, { class: "preview" })),
  );
  const tasks = $("tasks");
  tasks.replaceChildren(
    ...view.tasks.map((task) => {
      const item = el("li", `#${task.id} ${task.kind} ${task.role} ${task.state.status}`);
      const abort = el("button", "abort");
      abort.addEventListener(
        "click",
        guard(() => api("POST", `${sessionPath()}/tasks/${task.id}/abort`, {})),
      );
      const release = el("button", "release");
      release.addEventListener(
        "click",
        guard(() => api("POST", `${sessionPath()}/tasks/${task.id}/release`, {})),
      );
      item.append(" ", abort, " ", release);
      const preview = view?.previews[String(task.id)];
      if (preview !== undefined && previewText(preview) !== "")
        item.append(el("div", previewText(preview), { class: "preview" }));
      return item;
    }),
  );
  $("inbox").replaceChildren(
    ...view.inbox.map((element) => {
      const queued = element.value;
      const shown =
        queued.mode === "write"
          ? JSON.stringify(queued.entry)
          : typeof queued.input === "string"
            ? queued.input
            : JSON.stringify(queued.input);
      const item = el("li", `${queued.mode}: ${shown} `);
      const inputId = (queued as { inputId?: Id }).inputId ?? element.id;
      const withdraw = el("button", "withdraw");
      withdraw.addEventListener(
        "click",
        guard(() => api("DELETE", `${sessionPath()}/inputs/${inputId}`)),
      );
      item.append(withdraw);
      return item;
    }),
  );
}

function sessionPath(): string {
  if (current === undefined) throw new Error("no session is open");
  return `/v1/sessions/${encodeURIComponent(current.name)}`;
}

function conversationPath(): string {
  if (current === undefined) throw new Error("no session is open");
  return `${sessionPath()}/conversations/${current.conversation}`;
}

function showUsage(totals: UsageTotals | undefined): void {
  const t = totals ?? {
    attempts: 0,
    unknown: 0,
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: 0,
  };
  $("usage").textContent =
    `${t.attempts} attempt${t.attempts === 1 ? "" : "s"} (${t.unknown} unreported), ${t.totalTokens} tokens: ` +
    `${t.input} in, ${t.output} out, ${t.cacheRead} cache read, ${t.cacheWrite} cache write; cost ${t.cost}`;
}

/**
 * The session watch carries pi.usage.totals (absent until the first usage row), so usage follows every
 * settlement live; a separate read of GET .../usage could answer after a newer watch message and show
 * stale totals.
 */
function renderUsage(v: SessionView): void {
  const key = Object.keys(v.values).find((k) => (JSON.parse(k) as unknown[])[2] === "pi.usage.totals");
  showUsage(key === undefined ? undefined : (v.values[key] as unknown as UsageTotals));
}

async function send(): Promise<void> {
  const box = $<HTMLTextAreaElement>("input");
  const input = box.value;
  if (input.trim() === "") return;
  const mode = $<HTMLSelectElement>("mode").value;
  await api("POST", `${conversationPath()}/inputs`, mode === "accept" ? { input } : { input, mode });
  // Clear only what was sent: the user may have typed the next input while this one was in flight.
  if (box.value === input) box.value = "";
}

async function fork(): Promise<void> {
  const last = view?.entries[view.entries.length - 1];
  const forked = await api<{ conversationId: Id }>("POST", `${conversationPath()}/fork`, { at: last?.id ?? "start" });
  if (current !== undefined) await openSession(current.name, forked.conversationId);
}

async function inspect(): Promise<void> {
  const inspection = await api<{
    fault?: JsonValue;
    quarantined: { id: Id; kind: string }[];
    kills: JsonValue;
    busy: boolean;
  }>("GET", `${sessionPath()}/inspect`);
  $("inspection").textContent = JSON.stringify(
    { fault: inspection.fault ?? null, kills: inspection.kills, busy: inspection.busy },
    null,
    1,
  );
  $("quarantined").replaceChildren(
    ...inspection.quarantined.map((task) => {
      const item = el("li", `quarantined #${task.id} ${task.kind} `);
      const release = el("button", "release");
      release.addEventListener(
        "click",
        guard(() => api("POST", `${sessionPath()}/tasks/${task.id}/release`, {}).then(inspect)),
      );
      item.append(release);
      return item;
    }),
  );
}

// Wiring --------------------------------------------------------------------------------------------

$("signin-button").addEventListener("click", () => signIn($<HTMLTextAreaElement>("token").value));
$("signout").addEventListener("click", signOut);
$("filter").addEventListener(
  "input",
  guard(() => loadSessions(false)),
);
$("more").addEventListener(
  "click",
  guard(() => loadSessions(true)),
);
$("create").addEventListener("click", guard(createSession));
$("send").addEventListener("click", guard(send));
$("tab-conversation").addEventListener("click", () => showTab("conversation"));
$("tab-rig").addEventListener("click", () => showTab("rig"));
$("tab-deliveries").addEventListener("click", () => showTab("deliveries"));
$("abort").addEventListener(
  "click",
  guard(() => api("POST", `${conversationPath()}/abort`, {})),
);
$("fork").addEventListener("click", guard(fork));
$("inspect").addEventListener("click", guard(inspect));
$("clear-fault").addEventListener(
  "click",
  guard(() => api("POST", `${sessionPath()}/fault/clear`, {}).then(inspect)),
);
$("shutdown").addEventListener(
  "click",
  guard(() => api("POST", `${sessionPath()}/shutdown`, {}).then(inspect)),
);
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved !== null) signIn(saved);
