/**
 * The console's rig view (docs/console.md): the rig's agents, hooks, stalls and the mayor's mail,
 * read-only (the rig itself is seeds 000 "Hook persistence" and 002 "Witness observer"; see
 * docs/rig.md). Each agent with its hook (status, bead, attempt, last activity) and health, the
 * witness's health report (stalled agents with their nudges, agents whose pending hook has not started),
 * its settings, and the mayor's mailbox with acks. It reads `GET .../rig/agents`, `/health`, `/witness`
 * and `/mail` (mayor and operator tokens; the newest 200 messages, paged by cursor) while the rig tab
 * is open, refreshing every few seconds: the rig has no watch of its own, and external agents change it
 * without a session commit the console sees.
 */
import type { MailView } from "../src/rig/mail.js";
import type { AgentRecord, HookFile, RigHealth, RigSettings } from "../src/rig/types.js";
import { el } from "./dom.js";

/** One row of `GET .../rig/agents`. */
export interface RigAgentRow extends AgentRecord {
  readonly hook: HookFile;
  readonly attempt: number;
  readonly version: number;
  readonly summary?: string;
  readonly health: "idle" | "pending" | "active" | "stalled" | "terminated";
}

/** Everything the rig view shows, read in one refresh. */
export interface RigSnapshot {
  readonly agents: readonly RigAgentRow[];
  readonly health: RigHealth;
  readonly settings: RigSettings;
  /** The newest messages of the mayor's mailbox (at most MAIL_SHOWN), oldest first. */
  readonly mail: readonly MailView[];
  /** The cursor the next read starts after: it reads the shown messages again (their acks) and any newer. */
  readonly mailAfter: number;
}

export type Get = <T>(path: string) => Promise<T>;

/** How often the open rig tab reads the rig again. */
const REFRESH_MS = 3000;

/** How many of the mayor's newest messages the rig tab shows. */
const MAIL_SHOWN = 200;

/**
 * The mayor's newest messages, by cursor: every page after `after` (the mailbox has no upper bound),
 * keeping the newest MAIL_SHOWN, and the cursor from which the next refresh reads them again.
 */
async function readMail(
  get: Get,
  sessionPath: string,
  after: number,
): Promise<{ readonly mail: readonly MailView[]; readonly mailAfter: number }> {
  let mail: MailView[] = [];
  let mailAfter = after;
  let cursor: number | undefined = after;
  while (cursor !== undefined) {
    const page: { readonly messages: readonly MailView[]; readonly next?: number } = await get<{
      messages: MailView[];
      next?: number;
    }>(`${sessionPath}/rig/mail?after=${cursor}`);
    mail = [...mail, ...page.messages];
    if (mail.length > MAIL_SHOWN) {
      mailAfter = mail[mail.length - MAIL_SHOWN - 1]?.id ?? mailAfter;
      mail = mail.slice(-MAIL_SHOWN);
    }
    cursor = page.next;
  }
  return { mail, mailAfter };
}

export async function readRig(get: Get, sessionPath: string, mailAfter = 0): Promise<RigSnapshot> {
  const [agents, health, settings, mail] = await Promise.all([
    get<{ agents: RigAgentRow[] }>(`${sessionPath}/rig/agents`),
    get<RigHealth>(`${sessionPath}/rig/health`),
    get<RigSettings>(`${sessionPath}/rig/witness`),
    readMail(get, sessionPath, mailAfter),
  ]);
  return { agents: agents.agents, health, settings, ...mail };
}

function minutes(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`;
}

/** An ISO 8601 time as the browser's time of day (the rig's records are UTC). */
function clock(iso: string): string {
  const time = Date.parse(iso);
  return Number.isNaN(time) ? iso : new Date(time).toLocaleTimeString();
}

function payloadText(payload: MailView["payload"]): string {
  return typeof payload === "string" ? payload : JSON.stringify(payload);
}

function cell(row: HTMLElement, text: string, name: string): void {
  row.append(el("td", text, { "data-field": name }));
}

/** Render a snapshot into the rig view's elements. */
export function renderRig(
  snapshot: RigSnapshot,
  target: { agents: HTMLElement; health: HTMLElement; stalls: HTMLElement; witness: HTMLElement; mail: HTMLElement },
): void {
  const { agents, health, settings, mail } = snapshot;
  const head = el("tr", "");
  for (const name of ["agent", "role", "runs as", "hook", "bead", "title", "attempt", "last activity", "health"])
    head.append(el("th", name));
  target.agents.replaceChildren(
    head,
    ...agents.map((agent) => {
      const row = el("tr", "", { "data-agent": agent.agent_id, "data-health": agent.health });
      cell(row, agent.agent_id, "agent");
      cell(row, agent.role, "role");
      cell(row, agent.conversationId === undefined ? "external" : `conversation #${agent.conversationId}`, "runs-as");
      cell(row, agent.hook.status, "status");
      cell(row, agent.hook.work_item?.bead_id ?? "", "bead");
      cell(row, agent.hook.work_item?.title ?? "", "title");
      cell(row, String(agent.attempt), "attempt");
      cell(row, clock(agent.hook.last_activity), "last-activity");
      cell(row, agent.terminated === undefined ? agent.health : `terminated by ${agent.terminated.by}`, "health");
      return row;
    }),
  );
  if (agents.length === 0) {
    const row = el("tr", "");
    row.append(el("td", "no agents registered: this session has no rig", { colspan: "9" }));
    target.agents.append(row);
  }
  target.health.textContent =
    `${health.totalAgents} agents: ${health.activeAgents} active, ${health.pendingAgents} pending, ${health.stalledAgents} stalled, ` +
    `${health.idleAgents} idle, ${health.terminatedAgents} terminated (as of ${clock(health.timestamp)})`;
  target.stalls.replaceChildren(
    ...health.stalledDetails.map((stall) =>
      el(
        "li",
        `stalled: ${stall.agentId} on ${stall.beadId}, ${stall.stalledMinutes} min without activity, ${stall.nudgesSent} nudge${stall.nudgesSent === 1 ? "" : "s"} sent`,
        { "data-stalled": stall.agentId, class: "error" },
      ),
    ),
    ...health.notStartedAgents.map((late) =>
      el("li", `not started: ${late.agentId} on ${late.beadId}, pending ${late.pendingMinutes} min`, {
        "data-not-started": late.agentId,
      }),
    ),
  );
  target.witness.textContent =
    `patrol every ${minutes(settings.patrolIntervalMs)}, stalled after ${minutes(settings.stallThresholdMs)}, alert after ${minutes(settings.alertAfterMs)}, ` +
    `spawn grace ${minutes(settings.spawnGraceMs)}, touch throttle ${minutes(settings.touchThrottleMs)}`;
  target.mail.replaceChildren(
    ...(mail.length === 0
      ? [el("li", "no mail")]
      : [...mail].reverse().map((message) => {
          const item = el("li", "", { "data-mail": String(message.id) });
          item.append(
            el(
              "small",
              `${clock(message.timestamp)} from ${message.from}${message.ack === undefined ? "" : ` · acked by ${message.ack.by}`} `,
            ),
            el("span", payloadText(message.payload)),
          );
          return item;
        })),
  );
}

/** The rig tab: reads and renders while open, every REFRESH_MS, until closed. */
export class RigView {
  readonly #get: Get;
  readonly #report: (error: unknown) => void;
  readonly #target: Parameters<typeof renderRig>[1];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #session: string | undefined;
  #generation = 0;
  #mailAfter = 0;

  constructor(get: Get, report: (error: unknown) => void, target: Parameters<typeof renderRig>[1]) {
    this.#get = get;
    this.#report = report;
    this.#target = target;
  }

  /** Show `sessionPath`'s rig, refreshing until `close`. */
  open(sessionPath: string): void {
    this.close();
    this.#session = sessionPath;
    this.#mailAfter = 0;
    for (const element of Object.values(this.#target)) element.replaceChildren();
    this.#target.health.textContent = "loading…";
    void this.#refresh(++this.#generation);
  }

  close(): void {
    this.#generation++;
    this.#session = undefined;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #refresh(generation: number): Promise<void> {
    const session = this.#session;
    if (session === undefined) return;
    try {
      const snapshot = await readRig(this.#get, session, this.#mailAfter);
      if (generation === this.#generation) {
        this.#mailAfter = snapshot.mailAfter;
        renderRig(snapshot, this.#target);
      }
    } catch (error) {
      if (generation === this.#generation) this.#report(error);
    }
    if (generation === this.#generation) this.#timer = setTimeout(() => void this.#refresh(generation), REFRESH_MS);
  }
}
