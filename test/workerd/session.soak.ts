/**
 * The soak test (docs/operations.md "Soak test"): one session in a real session Durable Object, run for simulated days
 * with
 * everything that sleeps at once, killed hundreds of times, and checked against oracles that do not
 * come from the code under test. `npm run test:soak` (SOAK_PROFILE=short|full, default full; SOAK_SEED
 * replays a run, SOAK_START fixes its simulated start). Not part of `npm test`; CI runs the short profile.
 *
 * The session: a schedule every minute (its own conversation, each occurrence a turn of the echo model)
 * and a cron every minute queueing `nextRun` input into the same conversation, an hourly cron, a daily
 * cron at 02:30 in Europe/Berlin across a DST change (the run starts before the next change; 02:30 does
 * not exist on the spring day and happens twice on the autumn one), a recurring job every 30 minutes
 * (started by a `job` tool call), a rig of 20 external agents with its witness (every 5 minutes; in four
 * work rounds a day a third of the agents go silent until the ladder has run: two nudges, then one
 * critical escalation), a generation on a scripted model that answers each input first with 429 "retry
 * in 180 minutes" (twice a day), and signed webhooks arriving now and then over HTTP (a quarter of them
 * delivered twice). Every evening the rig is taken down (every agent deregistered: the witness ends with
 * the last) and registered again half an hour later.
 *
 * Time: a driver loop advances the shared manual clock to the object's alarm (`getAlarm`) or the next
 * scripted input, whichever is first, and wakes the object only by running that alarm
 * (runDurableObjectAlarm) or by delivering that input. At seeded-random points the object is killed:
 * while idle (abortAllDurableObjects), right after a random commit of a wake or an input (`ctx.abort()`
 * once commit k is durable; later commits of the dying instance never land; the runtime then delivers
 * the interrupted request again, to a fresh instance, as the platform retries an alarm), or for a
 * downtime gap (killed, then hours pass with its alarms withheld and inputs held back; then the alarm
 * runs once; kills and gaps that fell due while it was down are dropped). After the run proper comes one long outage (70 days: more missed occurrences than any cap
 * on counting them) and one more hour.
 *
 * What is checked (each a soft assertion, so one run reports every kind of failure):
 * - every schedule fired exactly once per due occurrence while up (for that occurrence, within a minute),
 *   at most once per downtime gap, never for a time that is no occurrence, and is never overdue once
 *   the object is quiet; the recurring job ran at most once per interval and is never overdue;
 * - the witness patrolled at every interval (the registered witness is live while agents are registered
 *   and never overdue), never twice (patrols at least an interval apart, none on a rig without agents,
 *   and any other live witness, such as one a kill left behind at the rig's end, ends by its next wake);
 * - each stall escalated once per the ladder (per stall, an agent's silence until it answers: at most two
 *   nudges, each severity mailed at most once, no step sooner than an interval after the last; a silent
 *   agent whose bead saw no downtime got exactly two nudges and one critical mail, a healthy one none);
 * - no task quarantined and no session fault (the host's reports and, at the end, its inspection);
 * - every input has exactly one terminal result (schedule occurrences, webhooks and their redeliveries,
 *   the slow model's inputs, the job call) and was accepted once (one user entry each);
 * - live work always has a wake and the alarm is armed no later than the earliest one;
 * - rows written per idle simulated hour (no scripted input in it, no gap) are bounded and do not grow
 *   with history; the figure is printed. The run prints a table per simulated day.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject, SELF } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createModels } from "@earendil-works/pi-ai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { bindResult, requestKey, type InputResult } from "../../src/core/inbox.js";
import { bind } from "../../src/core/state.js";
import { generationConfig } from "../../src/kinds/config.js";
import { occurrenceKey } from "../../src/kinds/schedule.js";
import { WITNESS_KIND, type Actor } from "../../src/rig/index.js";
import { mailbox, witnessAgent, witnessPatrol, witnessTask } from "../../src/rig/state.js";
import { DEFAULT_SETTINGS, MAYOR_ID, type WitnessAgentRecord } from "../../src/rig/types.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { echoProvider } from "../../src/worker/platform/echo-model.js";
import { registerTestKinds, sessionTurnKit } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { sessionRpc, type SessionRpc } from "../../src/worker/session/rpc.js";
import { signWebhook, webhookSecret } from "../../src/worker/crypto/webhooks.js";
import { call, clockOf, installSeams, resetSeams, type Seams } from "./session-fixtures.js";
import {
  armKill,
  berlinDailyOccurrences,
  DAY,
  disarmKill,
  flushRows,
  gridOccurrences,
  HOUR,
  hourlyOccurrences,
  installCommitHook,
  instrument,
  kill,
  meter,
  MINUTE,
  nextBerlinChange,
  perHarnessGeneration,
  PROFILES,
  RETRY_AFTER_MINUTES,
  Rng,
  SLOW_MODEL,
  SLOW_PROVIDER,
  SlowProvider,
  uninstallCommitHook,
  type SoakProfile,
} from "./soak-fixtures.js";

// -------------------------------------------------------------------------------------------------
// The workload

const TENANT = "soak";
const JOB_EVERY = 30 * MINUTE;
const JOB_CMD = "echo tick";
const PATROL = DEFAULT_SETTINGS.patrolIntervalMs;
/** Work rounds of the rig (UTC hours); a round: set, activate, touches, complete, clear. */
const ROUNDS = [8, 11, 14, 17] as const;
/** Minutes into a round at which agents touch their hooks: healthy ones all along, silent ones after the ladder. */
const HEALTHY_TOUCHES = [20, 40, 60, 80, 100] as const;
const SILENT_TOUCHES = [70, 90] as const;
const COMPLETE_AT = 110;
const CLEAR_AT = 115;
/** The rig is taken down at 20:00 UTC and registered again at 20:30. */
const TEARDOWN_HOUR = 20;
const SLOW_HOURS = [3, 15] as const;
/** The long outage after the run proper: more missed minute occurrences than 100,000. */
const OUTAGE = 70 * DAY + 17_000;
/** A fire later than this after its occurrence (while up) is late: the object was not woken on time. */
const LATE_MS = MINUTE;
/**
 * Rows one idle hour may write, by what runs in it: 60 minute turns, 60 queued minute inputs, 1 hourly
 * turn, 2 job runs, 12 patrols, and a wake after each idle eviction. About 1.5 times today's cost
 * (about 2,700 rows an idle hour, printed by every run); what this bounds is growth, with history,
 * with evictions or per turn.
 */
const ROWS_PER_TURN = 55;
const ROWS_PER_QUEUED = 10;
const ROWS_PER_JOB_RUN = 20;
const ROWS_PER_PATROL = 10;
const ROWS_PER_WAKE = 40;

interface ScheduleSpec {
  readonly name: string;
  readonly conversation: "minute" | "hourly" | "daily";
  readonly text: string;
  readonly every?: number;
  readonly cron?: string;
  readonly timezone?: string;
  readonly mode?: "nextRun";
}

const SCHEDULES: readonly ScheduleSpec[] = [
  { name: "every minute", conversation: "minute", text: "minute tick", every: MINUTE },
  { name: "cron * * * * *", conversation: "minute", text: "minute note", cron: "* * * * *", mode: "nextRun" },
  { name: "cron 0 * * * *", conversation: "hourly", text: "hourly tick", cron: "0 * * * *" },
  {
    name: "cron 30 2 * * * Europe/Berlin",
    conversation: "daily",
    text: "daily tick",
    cron: "30 2 * * *",
    timezone: "Europe/Berlin",
  },
];

const mayor: Actor = { role: "mayor" };
const agentActor = (id: string): Actor => ({ role: "agent", agent: id });

type RigOp = "register" | "set" | "activate" | "touch" | "complete" | "clear" | "deregister";

type Action =
  | { readonly type: "webhook"; readonly id: string; readonly text: string }
  | { readonly type: "slow"; readonly key: string; readonly text: string }
  | {
      readonly type: "rig";
      readonly op: RigOp;
      readonly agent: string;
      readonly bead?: string;
      readonly last?: boolean;
    };

interface Scripted {
  at: number;
  readonly seq: number;
  readonly action: Action;
  /** A kill took an earlier delivery: the sender tries again, and may find it done. */
  retry: boolean;
}

function describeAction(action: Action): string {
  switch (action.type) {
    case "webhook":
      return `webhook ${action.id}`;
    case "slow":
      return `slow input ${action.key}`;
    case "rig":
      return `rig ${action.op} ${action.agent}${action.bead === undefined ? "" : ` ${action.bead}`}${action.last === true ? " (the last agent)" : ""}`;
    default: {
      const never: never = action;
      return String(never);
    }
  }
}

// -------------------------------------------------------------------------------------------------
// Findings: every check collects here and is asserted softly at the end

const CATEGORIES = [
  "every schedule fired exactly once per due occurrence while up",
  "every schedule fired at most once per downtime gap",
  "the recurring job ran once per interval",
  "the witness patrolled at every interval",
  "the witness never patrolled twice (one witness per rig)",
  "each stall escalated once per the ladder",
  "no task quarantined, no session fault",
  "every input has exactly one terminal result",
  "live work always has a wake and an armed alarm",
  "rows written per idle simulated hour are bounded",
] as const;
type Category = (typeof CATEGORIES)[number];

class Findings {
  readonly #found = new Map<Category, { count: number; examples: string[] }>();
  readonly #keys = new Set<string>();

  /** One finding; the same `key` (a task and its due time, say) is counted once however often it is seen. */
  add(category: Category, detail: string, key: string = detail): void {
    if (this.#keys.has(`${category}\u0000${key}`)) return;
    this.#keys.add(`${category}\u0000${key}`);
    const entry = this.#found.get(category) ?? { count: 0, examples: [] };
    entry.count += 1;
    if (entry.examples.length < 6) entry.examples.push(detail);
    this.#found.set(category, entry);
  }

  of(category: Category): { count: number; examples: string[] } {
    return this.#found.get(category) ?? { count: 0, examples: [] };
  }
}

// -------------------------------------------------------------------------------------------------
// One look at the durable state

interface ScheduleSeen {
  readonly id: Id;
  readonly status: string;
  readonly runs: number;
  readonly lastRunAt: number | null;
}

interface LiveSeen {
  readonly id: Id;
  readonly kind: string;
  readonly status: string;
  /** The durable wake time its state names, if any. */
  readonly wake: number | undefined;
}

interface Observation {
  readonly at: number;
  /** The instance had its session open and became quiet (false: a look at a dead object's rows). */
  readonly quiet: boolean;
  readonly alarm: number | null;
  readonly live: readonly LiveSeen[];
  readonly schedules: readonly ScheduleSeen[];
  readonly job: { readonly runs: number } | undefined;
  readonly registeredWitness: Id | undefined;
  readonly patrol: { readonly patrols: number; readonly last: number };
  /** Agents the witness keeps records for (its own state, read for the nudges). */
  readonly agents: readonly string[];
  readonly records: Readonly<Record<string, WitnessAgentRecord>>;
  readonly mail: readonly { readonly id: Id; readonly payload: unknown; readonly timestamp: string }[];
}

function wakeOf(task: Task): number | undefined {
  const state = task.state as { status: string; nextRunAt?: unknown; notBefore?: unknown; next_patrol_at?: unknown };
  if (task.kind === "schedule")
    return state.status === "waiting" && typeof state.nextRunAt === "number" ? state.nextRunAt : undefined;
  if (task.kind === WITNESS_KIND) return typeof state.next_patrol_at === "number" ? state.next_patrol_at : undefined;
  return typeof state.notBefore === "number" ? state.notBefore : undefined;
}

/** Every agent the script ever registered (the witness's records are read for these). */
const roster = new Set<string>();

/** Read what the checks need (through the open harness's storage, or a fresh one over the object's rows). */
async function observe(
  state: DurableObjectState,
  instance: SessionObject,
  quiet: boolean,
  at: number,
  mailCursor: Id,
): Promise<Observation> {
  const wasPaused = meter.paused;
  meter.paused = true;
  try {
    flushRows();
    const storage = instance.harness?.storage ?? SqliteStorage.open(state.storage);
    const live = (await storage.scanTasks({ live: true, limit: 200 })).items;
    const schedules = (await storage.scanTasks({ kind: "schedule", limit: 20 })).items.map((t): ScheduleSeen => {
      const s = t.state as { status: string; runs: number; lastRunAt: number | null };
      return { id: t.id, status: s.status, runs: s.runs, lastRunAt: s.lastRunAt };
    });
    const job = (await storage.scanTasks({ kind: "job", limit: 10 })).items[0]?.state as { runs?: number } | undefined;
    const agents = [...roster];
    const records: Record<string, WitnessAgentRecord> = {};
    for (const agent of agents) {
      const record = (await storage.getValue(bind(witnessAgent(agent), {})))?.value;
      if (record !== undefined) records[agent] = record;
    }
    const patrol = (await storage.getValue(bind(witnessPatrol, {})))?.value;
    const mail = (await storage.readList(bind(mailbox(MAYOR_ID), {}), { after: mailCursor, limit: 1000 })).items.map(
      (e) => ({ id: e.id, payload: e.value.payload as unknown, timestamp: e.value.timestamp }),
    );
    return {
      at,
      quiet,
      alarm: await state.storage.getAlarm(),
      live: live.map((t) => ({ id: t.id, kind: t.kind, status: t.state.status, wake: wakeOf(t) })),
      schedules,
      job: job === undefined ? undefined : { runs: job.runs ?? 0 },
      registeredWitness: (await storage.getValue(bind(witnessTask, {})))?.value,
      patrol: { patrols: patrol?.patrols ?? 0, last: patrol?.last_patrol_at ?? 0 },
      agents,
      records,
      mail,
    };
  } finally {
    meter.paused = wasPaused;
  }
}

/**
 * Until no invocation is busy and no commit lands for a few rounds; false once a kill is under way.
 * On a stall it throws with what is live (a hang is a finding of its own, not a flaky wait).
 */
async function settle(instance: SessionObject): Promise<boolean> {
  let stable = 0;
  let commits = meter.commits;
  for (let round = 0; round < 20_000; round++) {
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    if (kill.hanging) return false;
    const busy = instance.harness?.driver.busy ?? false;
    if (busy || meter.commits !== commits) {
      stable = 0;
      commits = meter.commits;
      continue;
    }
    stable += 1;
    if (stable >= 3) return true;
  }
  const live = instance.harness?.driver.inspect();
  throw new Error(
    `the session never became quiet: ${JSON.stringify({ start: live?.start.map((t) => [t.id, t.kind, t.state]), inflight: live?.inflight.map((t) => [t.id, t.kind, t.state]) })}`,
  );
}

// -------------------------------------------------------------------------------------------------
// The run's parameters

function profileOf(): SoakProfile {
  const name = env.SOAK_PROFILE ?? "full";
  if (name !== "short" && name !== "full") throw new Error(`SOAK_PROFILE must be short or full, got ${name}`);
  return PROFILES[name];
}

function seedOf(): number {
  const raw = env.SOAK_SEED ?? "";
  if (raw === "") return Math.floor(Math.random() * 2 ** 31);
  if (!/^\d+$/.test(raw)) throw new Error(`SOAK_SEED must be a non-negative integer, got ${raw}`);
  return Number(raw);
}

/** A UTC midnight before the next DST change in Europe/Berlin (alarms must lie ahead of the real clock). */
function startOf(profile: SoakProfile): number {
  const raw = env.SOAK_START ?? "";
  if (raw !== "") {
    const parsed = Date.parse(raw);
    if (!Number.isFinite(parsed) || parsed % DAY !== 0)
      throw new Error(`SOAK_START must be an ISO date at a UTC midnight, got ${raw}`);
    if (parsed < Date.now() + DAY)
      throw new Error(`SOAK_START must lie more than a day ahead of the real clock, got ${raw}`);
    return parsed;
  }
  const change = nextBerlinChange(Date.now() + (profile.daysBeforeChange + 2) * DAY);
  return Math.floor(change / DAY) * DAY - profile.daysBeforeChange * DAY;
}

function entryText(e: Entry): string {
  const message = e.model?.[0] as { content?: unknown } | undefined;
  const content = message?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((c: { type?: string; text?: string }) => (c.type === "text" ? (c.text ?? "") : "")).join("");
  return "";
}

const iso = (t: number): string => new Date(t).toISOString().replace(".000Z", "Z");

class SoakSession {
  readonly name: string;
  readonly id: DurableObjectId;

  constructor(seed: number) {
    this.name = `soak-${seed.toString(36)}-${Date.now().toString(36)}`;
    this.id = env.SESSIONS.idFromName(`${TENANT}:${this.name}`);
  }

  /** A stub that reached an aborted object stays broken: every access makes a fresh one. */
  get stub(): DurableObjectStub<SessionObject> {
    return env.SESSIONS.get(this.id);
  }

  get rpc(): SessionRpc {
    return sessionRpc(this.stub);
  }
}

interface Fire {
  readonly schedule: string;
  /** The occurrence it accepted (undefined: an earlier fire of a wake that fired more than once). */
  readonly occurrence: number | undefined;
  readonly at: number;
}

interface Gap {
  readonly from: number;
  readonly to: number;
}

interface LadderEvent {
  readonly agent: string;
  readonly bead: string;
  /** The agent's stall number: a stall ends when the witness drops its record (the agent answered). */
  readonly stall: number;
  readonly what: "nudge" | "warning" | "alert" | "critical";
  readonly at: number;
}

interface Episode {
  readonly agent: string;
  readonly bead: string;
  readonly silent: boolean;
  /** From activation to the agent's next sign of life (its first touch). */
  readonly from: number;
  readonly to: number;
  /** The hook is cleared then. */
  readonly until: number;
}

interface Kill {
  readonly at: number;
  readonly how: "idle" | "commit" | "gap";
  /** The wake or input a kill after a commit interrupted. */
  readonly during?: string;
}

let seams: Seams;

beforeAll(() => {
  installCommitHook();
});

afterAll(() => {
  uninstallCommitHook();
});

afterEach(async () => {
  disarmKill();
  await abortAllDurableObjects();
  resetSeams();
});

describe("soak", () => {
  it("a session with schedules, a recurring job, a rig with its witness, a long retry and webhooks survives simulated days of kills and downtime", async () => {
    const profile = profileOf();
    const seed = seedOf();
    const start = startOf(profile);
    const end = start + profile.hours * HOUR;
    console.log(
      `soak: profile ${profile.name} (${profile.hours} simulated hours from ${iso(start)}), seed ${seed}; replay: SOAK_PROFILE=${profile.name} SOAK_SEED=${seed} SOAK_START=${iso(start)} npm run test:soak`,
    );
    const wall = Date.now();
    const rng = new Rng(seed);
    const findings = new Findings();

    // The host's seams: one manual time and a report log. The generation kind runs over the echo model
    // and the scripted slow one, with a kit per opened harness; the rest of the session is as deployed.
    seams = installSeams();
    seams.time.now = start;
    meter.now = () => seams.time.now;
    meter.start = start;
    meter.rowsByHour = [];
    const slow = new SlowProvider();
    const models = createModels();
    models.setProvider(echoProvider());
    models.setProvider(slow.provider());
    registerTestKinds([perHarnessGeneration(() => sessionTurnKit(models, { turn: { retryMaxDelayMs: 6 * HOUR } }))]);

    const session = new SoakSession(seed);
    const ok = async <T>(
      what: string,
      outcome: Promise<{ ok: true; value: T } | { ok: false; problem: { detail: string } }>,
    ): Promise<T> => {
      const result = await outcome;
      if (!result.ok) throw new Error(`${what}: ${result.problem.detail}`);
      return result.value;
    };

    // ---------------------------------------------------------------------------------------------
    // Setup (no kill yet): conversations, schedules, the slow model, the recurring job

    await runInDurableObject(session.stub, (_instance, state) => instrument(state));
    await ok("create", session.rpc.createSession({ model: "echo", selectedTools: ["echo", "job"] }));
    const fork = async (): Promise<Id> =>
      (await ok("fork", session.rpc.op("fork", "root", { at: "start" }))).conversationId;
    const conv = { minute: await fork(), hourly: await fork(), daily: await fork(), slow: await fork() };
    // A fork at the start has no values of its own.
    for (const id of [conv.minute, conv.hourly, conv.daily])
      await ok("config", session.rpc.op("patchConfig", id, { model: "echo", selectedTools: ["echo"] }));
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const handle = await instance.harness?.conversation(conv.slow, call);
      if (handle === undefined) throw new Error("no slow conversation");
      await handle.commit((tx) => tx.value(generationConfig.model).set(`${SLOW_PROVIDER}/${SLOW_MODEL}`), call);
    });
    const schedules = new Map<Id, ScheduleSpec & { readonly conversationId: Id; readonly first: number }>();
    for (const spec of SCHEDULES) {
      const view = await ok(
        "schedule",
        session.rpc.op("createSchedule", {
          conversation: conv[spec.conversation],
          input: spec.text,
          ...(spec.every === undefined ? {} : { every: spec.every }),
          ...(spec.cron === undefined ? {} : { cron: spec.cron }),
          ...(spec.timezone === undefined ? {} : { timezone: spec.timezone }),
          ...(spec.mode === undefined ? {} : { mode: spec.mode }),
        }),
      );
      schedules.set(view.id, { ...spec, conversationId: conv[spec.conversation], first: view.nextRunAt ?? start });
    }
    const nameOf = (id: Id): string => schedules.get(id)?.name ?? `schedule ${id}`;
    const jobCall = `/call job ${JSON.stringify({ cmd: JOB_CMD, every: JOB_EVERY, rerun: "safe", background: true })}`;
    await ok(
      "job",
      session.rpc.op("accept", "root", { input: jobCall, source: { type: "idempotency", key: "recurring-job" } }),
    );

    // ---------------------------------------------------------------------------------------------
    // The script: every input, with its time

    const script: Scripted[] = [];
    let seq = 0;
    const add = (at: number, action: Action): void => {
      if (at < end) script.push({ at, seq: seq++, action, retry: false });
    };
    const agents = Array.from({ length: profile.agents }, (_, i) => `polecat-${String(i).padStart(2, "0")}`);
    const silent = (i: number): boolean => i % 3 === 2;
    const episodes: Episode[] = [];
    agents.forEach((agent, i) => add(start + MINUTE + i * 1000, { type: "rig", op: "register", agent }));
    for (let day = start; day < end; day += DAY) {
      const d = Math.round((day - start) / DAY);
      for (const [r, hour] of ROUNDS.entries()) {
        const at = day + hour * HOUR;
        agents.forEach((agent, i) => {
          const bead = `gt-d${d}r${r}a${i}`;
          const s = i * 1000;
          const touches = silent(i) ? SILENT_TOUCHES : HEALTHY_TOUCHES;
          add(at + s, { type: "rig", op: "set", agent, bead });
          add(at + MINUTE + s, { type: "rig", op: "activate", agent });
          for (const m of touches) add(at + m * MINUTE + s, { type: "rig", op: "touch", agent });
          add(at + COMPLETE_AT * MINUTE + s, { type: "rig", op: "complete", agent });
          add(at + CLEAR_AT * MINUTE + s, { type: "rig", op: "clear", agent });
          if (at + CLEAR_AT * MINUTE + s < end)
            episodes.push({
              agent,
              bead,
              silent: silent(i),
              from: at + MINUTE + s,
              to: at + touches[0] * MINUTE + s,
              until: at + CLEAR_AT * MINUTE + s,
            });
        });
      }
      agents.forEach((agent, i) =>
        add(day + TEARDOWN_HOUR * HOUR + i * 1000, {
          type: "rig",
          op: "deregister",
          agent,
          last: i === agents.length - 1,
        }),
      );
      agents.forEach((agent, i) =>
        add(day + TEARDOWN_HOUR * HOUR + 30 * MINUTE + i * 1000, { type: "rig", op: "register", agent }),
      );
      for (const hour of SLOW_HOURS) {
        const at = day + hour * HOUR;
        // Inputs near the end would still be waiting out their retry when the run stops.
        if (at < end - (RETRY_AFTER_MINUTES + 60) * MINUTE)
          add(at, { type: "slow", key: `slow-${d}-${hour}`, text: `slow question ${d}-${hour}` });
      }
    }
    const webhooks: string[] = [];
    for (
      let t = start + 10 * MINUTE + rng.exponential(profile.webhookEveryMs);
      t < end - HOUR;
      t += rng.exponential(profile.webhookEveryMs)
    ) {
      const id = `msg_${seed.toString(36)}_${webhooks.length}`;
      const at = Math.floor(t / 1000) * 1000;
      add(at, { type: "webhook", id, text: `webhook ${id}` });
      // Some senders deliver twice (a lost acknowledgement): the delivery id makes it run once.
      if (rng.next() < 0.25) add(at + rng.int(1, 10) * MINUTE, { type: "webhook", id, text: `webhook ${id}` });
      webhooks.push(id);
    }
    script.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const slowInputs = script.flatMap((s) => (s.action.type === "slow" ? [s.action] : []));

    // Kills and gaps: Poisson processes in simulated time, from the first hour on.
    const poisson = (perDay: number): number[] => {
      const out: number[] = [];
      for (let t = start + HOUR + rng.exponential(DAY / perDay); t < end; t += rng.exponential(DAY / perDay))
        out.push(t);
      return out;
    };
    const idleKills = poisson(profile.idleKillsPerDay);
    const commitKills = poisson(profile.commitKillsPerDay);
    const gapStarts = poisson(profile.gapsPerDay);

    // ---------------------------------------------------------------------------------------------
    // What happened

    const gaps: Gap[] = [];
    /** The rig's agents, as the script's registrations and deregistrations left it. */
    const registered = new Set<string>();
    roster.clear();
    /** Per agent, how many stalls ended (the witness dropped its record or moved to another bead). */
    const stalls = new Map<string, number>();
    /** Live witnesses that are not the rig's, with the wake they had when first seen. */
    const orphans = new Map<Id, number>();
    const fires: Fire[] = [];
    const jobRuns: number[] = [];
    const patrols: number[] = [];
    const ladder: LadderEvent[] = [];
    const kills: Kill[] = [];
    const busyHours = new Set<number>();
    const steps: number[] = [];
    let mailCursor = 0;
    let reportsSeen = 0;

    const hourOf = (t: number): number => Math.floor((t - start) / HOUR);
    const dayOf = (t: number): number => Math.floor((t - start) / DAY);
    const inGap = (t: number): Gap | undefined => gaps.find((g) => t > g.from && t <= g.to);

    /** Changes since the last look, attributed to the wake or input at `stepAt`. */
    const account = (before: Observation, after: Observation, stepAt: number): void => {
      for (const s of after.schedules) {
        const delta = s.runs - (before.schedules.find((b) => b.id === s.id)?.runs ?? 0);
        if (delta > 1) {
          const afterGap = gaps.some((g) => g.to === stepAt);
          findings.add(
            afterGap
              ? "every schedule fired at most once per downtime gap"
              : "every schedule fired exactly once per due occurrence while up",
            `${nameOf(s.id)} fired ${delta} times in one wake at ${iso(stepAt)}${afterGap ? " (the end of a downtime gap)" : ""}, the last for ${iso(s.lastRunAt ?? 0)}`,
          );
        }
        for (let i = 1; i < delta; i++) fires.push({ schedule: nameOf(s.id), occurrence: undefined, at: stepAt });
        if (delta >= 1 && s.lastRunAt !== null)
          fires.push({ schedule: nameOf(s.id), occurrence: s.lastRunAt, at: stepAt });
      }
      const jobDelta = (after.job?.runs ?? 0) - (before.job?.runs ?? 0);
      if (jobDelta > 1)
        findings.add(
          "the recurring job ran once per interval",
          `the job ran ${jobDelta} times in one wake at ${iso(stepAt)}`,
        );
      for (let i = 0; i < jobDelta; i++) jobRuns.push(stepAt);
      const patrolDelta = after.patrol.patrols - before.patrol.patrols;
      if (patrolDelta > 1)
        findings.add(
          "the witness never patrolled twice (one witness per rig)",
          `${patrolDelta} patrols in one wake at ${iso(stepAt)}`,
        );
      for (let i = 0; i < patrolDelta; i++) patrols.push(after.patrol.last);
      if (patrolDelta > 0 && registered.size === 0)
        findings.add(
          "the witness never patrolled twice (one witness per rig)",
          `${iso(after.patrol.last)}: a witness patrolled a rig with no agent registered`,
        );
      for (const [agent, was] of Object.entries(before.records)) {
        const record = after.records[agent];
        if (record === undefined || record.bead_id !== was.bead_id) stalls.set(agent, (stalls.get(agent) ?? 0) + 1);
      }
      for (const [agent, record] of Object.entries(after.records)) {
        const was = before.records[agent];
        const previous = was !== undefined && was.bead_id === record.bead_id ? was.nudges : 0;
        if (record.nudges - previous > 1)
          findings.add(
            "each stall escalated once per the ladder",
            `${agent} nudged ${record.nudges - previous} times in one wake at ${iso(stepAt)} (${record.bead_id})`,
          );
        if (record.nudges > previous)
          ladder.push({
            agent,
            bead: record.bead_id,
            stall: stalls.get(agent) ?? 0,
            what: "nudge",
            at: record.last_nudge_at,
          });
      }
      for (const m of after.mail) {
        mailCursor = Math.max(mailCursor, m.id);
        const match =
          typeof m.payload === "string"
            ? /^STALL_(WARNING|ALERT|CRITICAL): (\S+) idle \d+m on (\S+)$/.exec(m.payload)
            : null;
        const agent = match?.[2] ?? "";
        if (match !== null)
          ladder.push({
            agent,
            bead: match[3] ?? "",
            stall: stalls.get(agent) ?? 0,
            what: (match[1] ?? "").toLowerCase() as LadderEvent["what"],
            at: Date.parse(m.timestamp),
          });
      }
      const reports = seams.reports.filter((r) => r.type === "quarantined" || r.type === "session_faulted");
      for (const r of reports.slice(reportsSeen)) {
        const key = r.type === "quarantined" ? `quarantined ${r.taskId}` : `fault ${r.message}`;
        findings.add("no task quarantined, no session fault", `${iso(stepAt)}: ${JSON.stringify(r)}`, key);
      }
      reportsSeen = reports.length;
    };

    /** Checks that hold whenever the object is quiet after a wake or an input. */
    const checkQuiet = (o: Observation): void => {
      // The rig's membership as the script made it; unknown while a kill left a registration undelivered.
      const pending = script[next];
      const rigKnown = !(
        pending?.retry === true &&
        pending.action.type === "rig" &&
        (pending.action.op === "register" || pending.action.op === "deregister")
      );
      const now = o.at;
      let earliest: number | undefined;
      for (const t of o.live) {
        if (t.wake === undefined) {
          findings.add(
            "live work always has a wake and an armed alarm",
            `${iso(now)}: live ${t.kind} ${t.id} is ${t.status} with no wake while the object is quiet`,
            `nowake ${t.id} ${t.status}`,
          );
          continue;
        }
        if (t.wake > now) {
          earliest = earliest === undefined ? t.wake : Math.min(earliest, t.wake);
          continue;
        }
        const what = `${iso(now)}: ${t.kind} ${t.id} (${t.status}) was due at ${iso(t.wake)} and did not run`;
        const key = `overdue ${t.id} ${t.wake}`;
        if (t.kind === "schedule")
          findings.add("every schedule fired exactly once per due occurrence while up", what, key);
        else if (t.kind === WITNESS_KIND) findings.add("the witness patrolled at every interval", what, key);
        else if (t.kind === "job") findings.add("the recurring job ran once per interval", what, key);
        else findings.add("live work always has a wake and an armed alarm", what, key);
      }
      if (earliest !== undefined && (o.alarm === null || o.alarm > earliest)) {
        findings.add(
          "live work always has a wake and an armed alarm",
          `${iso(now)}: the earliest wake is ${iso(earliest)} but the alarm is ${o.alarm === null ? "not set" : iso(o.alarm)}`,
          `alarm ${earliest}`,
        );
      }
      // One witness per rig: while agents are registered the registered witness is live; any other live
      // witness (a kill between the rig's end and the witness's abort leaves one) must end by its next
      // wake without patrolling: still live past that wake, it patrols as a second witness.
      if (!rigKnown) return;
      const witnesses = o.live.filter((t) => t.kind === WITNESS_KIND);
      const one = "the witness never patrolled twice (one witness per rig)";
      if (registered.size > 0 && !witnesses.some((w) => w.id === o.registeredWitness)) {
        findings.add(
          "the witness patrolled at every interval",
          `${iso(now)}: ${registered.size} agents registered and the registered witness (${o.registeredWitness ?? "none"}) is not live (live: ${witnesses.map((w) => w.id).join(", ") || "none"})`,
          `nowitness ${o.registeredWitness ?? "-"}`,
        );
      }
      for (const w of witnesses) {
        if (registered.size > 0 && w.id === o.registeredWitness) continue;
        const wake = orphans.get(w.id) ?? w.wake ?? now;
        orphans.set(w.id, wake);
        if (now >= wake)
          findings.add(
            one,
            `${iso(now)}: witness ${w.id} is still live past its wake at ${iso(wake)} though it is not the rig's witness (${registered.size === 0 ? "no agent is registered" : `the registered one is ${o.registeredWitness ?? "none"}`})`,
            `orphan ${w.id}`,
          );
      }
    };

    // ---------------------------------------------------------------------------------------------
    // Driving the object

    const look = async (afterKill = false): Promise<Observation | undefined> => {
      try {
        return await runInDurableObject(session.stub, async (instance: SessionObject, state) => {
          instrument(state);
          // After a kill the runtime delivers the interrupted request again, to a fresh instance (the
          // alarm, at least once; or the input): let it open the session before looking.
          for (let i = 0; afterKill && instance.harness === undefined && i < 50; i++)
            await new Promise<void>((resolve) => setTimeout(resolve, 0));
          const quiet = instance.harness !== undefined ? await settle(instance) : false;
          if (!quiet && kill.hanging) return undefined;
          return observe(state, instance, quiet, seams.time.now, mailCursor);
        });
      } catch (error) {
        if (kill.hanging) return undefined;
        throw error;
      }
    };
    /** Until a kill under way has landed (the abort is called once its commit is durable). */
    const landed = async (): Promise<void> => {
      for (let i = 0; i < 10_000 && kill.hanging && !kill.landed; i++)
        await new Promise<void>((resolve) => setTimeout(resolve, 1));
      if (kill.hanging && !kill.landed) throw new Error("a kill never landed");
    };

    /** Deliver one scripted input; "retry" when a kill took it (the sender tries again). */
    const perform = async (action: Action, retry: boolean): Promise<"done" | "retry"> => {
      try {
        switch (action.type) {
          case "webhook": {
            const body = JSON.stringify({ input: action.text });
            const timestamp = Math.floor(Date.now() / 1000);
            const secret = await webhookSecret(env.WEBHOOK_MASTER_SECRET, TENANT, session.name);
            const signature = await signWebhook(secret, action.id, timestamp, body);
            const response = await SELF.fetch(
              new Request(`https://pico.test/v1/webhooks/${TENANT}/${session.name}/root`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "webhook-id": action.id,
                  "webhook-timestamp": String(timestamp),
                  "webhook-signature": signature,
                },
                body,
              }),
            );
            const text = await response.text();
            if (response.status === 202 || response.status === 200) return "done";
            if (kill.hanging || response.status >= 500) return "retry";
            findings.add(
              "every input has exactly one terminal result",
              `webhook ${action.id} refused: ${response.status} ${text}`,
            );
            return "done";
          }
          case "slow": {
            const outcome = await session.rpc.op("accept", conv.slow, {
              input: action.text,
              source: { type: "idempotency", key: action.key },
            });
            if (!outcome.ok)
              findings.add(
                "every input has exactly one terminal result",
                `slow input ${action.key} refused: ${outcome.problem.detail}`,
              );
            return "done";
          }
          case "rig": {
            const rpc = session.rpc;
            const { agent } = action;
            const outcome =
              action.op === "register"
                ? await rpc.op("rigRegister", mayor, agent, { role: "polecat" })
                : action.op === "deregister"
                  ? await rpc.op("rigDeregister", mayor, agent)
                  : action.op === "set"
                    ? await rpc.op("rigTransition", mayor, agent, "set", {
                        work: { bead_id: action.bead ?? "", title: `work on ${action.bead ?? ""}` },
                      })
                    : action.op === "clear"
                      ? await rpc.op("rigTransition", mayor, agent, "clear", {})
                      : await rpc.op("rigTransition", agentActor(agent), agent, action.op, {});
            // A delivery again after a kill may find its transition made: that is the durable outcome.
            if (!outcome.ok && !retry)
              throw new Error(`rig ${action.op} ${agent} at ${iso(seams.time.now)} refused: ${outcome.problem.detail}`);
            if (action.op === "register") {
              registered.add(agent);
              roster.add(agent);
            }
            if (action.op === "deregister") registered.delete(agent);
            return "done";
          }
          default: {
            const never: never = action;
            throw new Error(`unknown action ${JSON.stringify(never)}`);
          }
        }
      } catch (error) {
        if (kill.hanging) return "retry";
        throw error;
      }
    };

    const first = await look();
    if (first === undefined || !first.quiet) throw new Error("the session is not quiet after its setup");
    let prev: Observation = first;
    let alive = true;
    let next = 0;
    let sameTime = 0;
    let lastProgress = "";

    /**
     * One step at time `at`: wake the object by its alarm or deliver one input, then look once it is
     * quiet. With `killAfter`, the object is killed right after that many more commits.
     */
    const step = async (at: number, how: "alarm" | "input", killAfter: number | undefined): Promise<void> => {
      const input = how === "input" ? script[next] : undefined;
      if (killAfter !== undefined) armKill(killAfter);
      seams.time.now = at;
      steps[dayOf(at)] = (steps[dayOf(at)] ?? 0) + 1;
      try {
        await runInDurableObject(session.stub, (instance: SessionObject, state) => {
          instrument(state);
          if (instance.harness !== undefined) clockOf(instance).advanceTo(at);
        });
        if (how === "alarm") {
          await runDurableObjectAlarm(session.stub);
        } else if (input !== undefined) {
          busyHours.add(hourOf(at));
          if ((await perform(input.action, input.retry)) === "retry") input.retry = true;
          else next += 1;
        }
      } catch (error) {
        if (!kill.hanging) throw error;
      }
      let after = kill.hanging ? undefined : await look();
      if (kill.hanging) {
        await landed();
        kills.push({
          at,
          how: "commit",
          during: input === undefined ? "a wake by the alarm" : describeAction(input.action),
        });
        disarmKill();
        after = await look(true);
      }
      disarmKill();
      if (after === undefined) throw new Error(`no look after the step at ${iso(at)}`);
      account(prev, after, at);
      if (after.quiet) checkQuiet(after);
      else if (after.live.length > 0 && after.alarm === null) {
        findings.add(
          "live work always has a wake and an armed alarm",
          `${iso(at)}: killed with live work (${after.live.map((l) => `${l.kind}:${l.status}`).join(", ")}) and no alarm`,
        );
      }
      alive = after.quiet;
      prev = after;
    };

    /** A downtime gap from now to `to`: killed, inputs held back, no alarm delivered until then. */
    const gap = async (to: number): Promise<void> => {
      const from = seams.time.now;
      await abortAllDurableObjects();
      alive = false;
      kills.push({ at: from, how: "gap" });
      gaps.push({ from, to });
      for (let h = hourOf(from); h <= hourOf(to); h++) busyHours.add(h);
      for (let i = next; i < script.length && (script[i]?.at ?? to) < to; i++) (script[i] as Scripted).at = to;
      // Kills and gaps that fell due while the object was down did not happen (it was down): they are
      // dropped, not stacked onto the first wake after the gap, where every sleeper wakes at once.
      for (const times of [idleKills, commitKills, gapStarts])
        while (times[0] !== undefined && times[0] <= to) times.shift();
      seams.time.now = to;
    };

    const run = async (until: number, withKills: boolean): Promise<void> => {
      for (;;) {
        const input = script[next];
        const alarm = prev.alarm;
        const wake = Math.min(alarm ?? Number.POSITIVE_INFINITY, input?.at ?? Number.POSITIVE_INFINITY);
        if (wake === Number.POSITIVE_INFINITY) {
          if (prev.live.length > 0)
            findings.add(
              "live work always has a wake and an armed alarm",
              `${iso(seams.time.now)}: live work and no alarm, nothing left to wake it`,
            );
          return;
        }
        const at = Math.max(seams.time.now, wake);
        if (!(at < until)) return;
        // Progress: time moves, an input is delivered, or something commits. (After a gap many held-back
        // inputs are delivered at one time.)
        const progress = `${at} ${next} ${meter.commits}`;
        sameTime = progress === lastProgress ? sameTime + 1 : 0;
        lastProgress = progress;
        if (sameTime > 100) {
          throw new Error(
            `no progress at ${iso(at)}: it keeps waking at the same time and nothing commits (alarm ${alarm === null ? "none" : iso(alarm)}, next input ${input === undefined ? "none" : `${describeAction(input.action)} at ${iso(input.at)}${input.retry ? ", delivered again" : ""}`}, live ${prev.live.map((t) => `${t.kind} ${t.id} ${t.status}${t.wake === undefined ? "" : ` wakes ${iso(t.wake)}`}`).join("; ")}; quiet ${prev.quiet})`,
          );
        }
        if (withKills && alive && gapStarts[0] !== undefined && gapStarts[0] <= at) {
          while (gapStarts[0] !== undefined && gapStarts[0] <= at) gapStarts.shift();
          const to = Math.min(
            until - MINUTE,
            seams.time.now + rng.int(profile.gapHours[0] * 60, profile.gapHours[1] * 60) * MINUTE + 17_000,
          );
          if (to > at) {
            await gap(to);
            continue;
          }
        }
        if (withKills && alive && idleKills[0] !== undefined && idleKills[0] <= at) {
          while (idleKills[0] !== undefined && idleKills[0] <= at) idleKills.shift();
          await abortAllDurableObjects();
          alive = false;
          kills.push({ at: seams.time.now, how: "idle" });
        }
        const how = alarm !== null && alarm <= at ? "alarm" : "input";
        const scripted = how === "input" ? script[next] : undefined;
        // The end of the rig (its last deregistration: the witness ends) is rare in time: a hot spot.
        const hot =
          withKills &&
          scripted?.action.type === "rig" &&
          scripted.action.last === true &&
          scripted.action.op === "deregister" &&
          !scripted.retry &&
          rng.next() < 0.5;
        let killAfter: number | undefined;
        if (hot) killAfter = 1;
        else if (withKills && commitKills[0] !== undefined && commitKills[0] <= at) {
          while (commitKills[0] !== undefined && commitKills[0] <= at) commitKills.shift();
          killAfter = rng.int(1, 4);
        }
        await step(at, how, killAfter);
      }
    };

    // The run proper, then the long outage and one more hour (no kills, no inputs).
    await run(end, true);
    const outageFrom = seams.time.now;
    await gap(outageFrom + OUTAGE);
    const finalUntil = seams.time.now + HOUR;
    await run(finalUntil, false);
    const finalAt = seams.time.now;

    // ---------------------------------------------------------------------------------------------
    // Over the whole run

    const inspection = await session.rpc.inspect();
    if (inspection.quarantined.length > 0)
      findings.add(
        "no task quarantined, no session fault",
        `inspect() at the end: quarantined ${inspection.quarantined.map((t) => `${t.kind} ${t.id} (${t.state.status})`).join(", ")}; kill counters ${JSON.stringify(inspection.kills)}`,
      );
    if (inspection.fault !== undefined)
      findings.add(
        "no task quarantined, no session fault",
        `inspect() at the end: session fault ${JSON.stringify(inspection.fault)}`,
      );

    // Schedules: each due occurrence while up fired once, on time; each gap at most once.
    for (const [, spec] of schedules) {
      const occurrences = (from: number, to: number): number[] =>
        spec.every !== undefined
          ? gridOccurrences(spec.first, spec.every, from, to)
          : spec.timezone !== undefined
            ? berlinDailyOccurrences(2, 30, from, to)
            : spec.cron === "0 * * * *"
              ? hourlyOccurrences(from, to)
              : gridOccurrences(spec.first, MINUTE, from, to);
      const due = [...occurrences(start, outageFrom), ...occurrences(outageFrom + OUTAGE, finalAt)];
      const mine = fires.filter((f) => f.schedule === spec.name);
      const byOccurrence = new Map<number, Fire[]>();
      for (const f of mine)
        if (f.occurrence !== undefined) byOccurrence.set(f.occurrence, [...(byOccurrence.get(f.occurrence) ?? []), f]);
      const all = new Set([...due, ...gaps.flatMap((g) => (g.to - g.from > 7 * DAY ? [] : occurrences(g.from, g.to)))]);
      for (const f of mine) {
        const o = f.occurrence;
        if (o === undefined) continue;
        const g = inGap(o);
        const known = all.has(o) || (g !== undefined && g.to - g.from > 7 * DAY && occurrences(o - 1, o).includes(o));
        if (!known)
          findings.add(
            "every schedule fired exactly once per due occurrence while up",
            `${spec.name} fired for ${iso(o)}, which is no occurrence of it (at ${iso(f.at)})`,
          );
      }
      for (const o of due) {
        if (inGap(o) !== undefined) continue;
        const got = byOccurrence.get(o) ?? [];
        if (got.length !== 1)
          findings.add(
            "every schedule fired exactly once per due occurrence while up",
            `${spec.name}: the occurrence ${iso(o)} fired ${got.length} times`,
          );
        else if ((got[0]?.at ?? 0) > o + LATE_MS)
          findings.add(
            "every schedule fired exactly once per due occurrence while up",
            `${spec.name}: the occurrence ${iso(o)} fired late, at ${iso(got[0]?.at ?? 0)}`,
          );
      }
      for (const g of gaps) {
        // Fires for occurrences in the gap, and the unnamed extra fires of the wake that ended it.
        const inside = mine.filter((f) =>
          f.occurrence === undefined
            ? f.at >= g.to && f.at <= g.to + LATE_MS
            : f.occurrence > g.from && f.occurrence <= g.to,
        );
        if (inside.length > 1)
          findings.add(
            "every schedule fired at most once per downtime gap",
            `${spec.name}: ${inside.length} fires for the gap ${iso(g.from)}..${iso(g.to)} (for ${inside
              .slice(0, 3)
              .map((f) => (f.occurrence === undefined ? "an earlier occurrence" : iso(f.occurrence)))
              .join(", ")}${inside.length > 3 ? ", ..." : ""})`,
          );
      }
    }
    const dailyFires = fires.flatMap((f) =>
      f.schedule === "cron 30 2 * * * Europe/Berlin" && f.occurrence !== undefined
        ? [`${iso(f.occurrence)}${inGap(f.occurrence) === undefined ? "" : " (after a gap)"}`]
        : [],
    );

    // The recurring job: never twice within an interval (after a gap it runs once, then every interval).
    for (let i = 1; i < jobRuns.length; i++) {
      const a = jobRuns[i - 1] ?? 0;
      const b = jobRuns[i] ?? 0;
      if (b - a < JOB_EVERY)
        findings.add(
          "the recurring job ran once per interval",
          `runs at ${iso(a)} and ${iso(b)}, less than ${JOB_EVERY / MINUTE} minutes apart`,
        );
    }

    // The witness: patrols at least an interval apart (two witnesses patrol out of step).
    const sortedPatrols = [...patrols].sort((a, b) => a - b);
    for (let i = 1; i < sortedPatrols.length; i++) {
      const a = sortedPatrols[i - 1] ?? 0;
      const b = sortedPatrols[i] ?? 0;
      if (b - a < PATROL)
        findings.add(
          "the witness never patrolled twice (one witness per rig)",
          `patrols at ${iso(a)} and ${iso(b)}, ${Math.round((b - a) / 1000)} s apart (the interval is ${PATROL / MINUTE} minutes)`,
        );
    }

    // The ladder, per stall (an agent, a bead, until it answers): at most two nudges, each severity
    // mailed at most once, no step sooner than an interval after the last (one patrol may nudge and
    // mail: an alert nudges too). A bead's life undisturbed by downtime: a silent agent gets exactly two
    // nudges and one critical mail, a healthy agent nothing.
    const ladderFinding = "each stall escalated once per the ladder";
    for (const episode of episodes) {
      const events = ladder
        .filter((e) => e.agent === episode.agent && e.bead === episode.bead)
        .sort((a, b) => a.at - b.at);
      const disturbed = gaps.some((g) => g.from < episode.until + PATROL && g.to > episode.from);
      const label = `${episode.agent} on ${episode.bead} (${episode.silent ? "silent" : "healthy"}, no activity ${iso(episode.from)}..${iso(episode.to)}${disturbed ? ", downtime during the bead" : ""})`;
      for (const stall of new Set(events.map((e) => e.stall))) {
        const mine = events.filter((e) => e.stall === stall);
        const count = (what: LadderEvent["what"]): number => mine.filter((e) => e.what === what).length;
        for (const what of ["warning", "alert", "critical"] as const)
          if (count(what) > 1) findings.add(ladderFinding, `${label}: ${count(what)} ${what} mails in one stall`);
        if (count("nudge") > 2) findings.add(ladderFinding, `${label}: ${count("nudge")} nudges in one stall`);
        const times = [...new Set(mine.map((e) => e.at))];
        for (let i = 1; i < times.length; i++) {
          const a = times[i - 1] ?? 0;
          const b = times[i] ?? 0;
          const what = (t: number): string =>
            mine
              .filter((e) => e.at === t)
              .map((e) => e.what)
              .join("+");
          if (b - a < PATROL)
            findings.add(
              ladderFinding,
              `${label}: ${what(a)} at ${iso(a)}, then ${what(b)} at ${iso(b)}: the ladder ran faster than the patrol interval`,
            );
        }
      }
      if (disturbed) continue;
      const count = (what: LadderEvent["what"]): number => events.filter((e) => e.what === what).length;
      if (episode.silent && (count("nudge") !== 2 || count("critical") !== 1 || count("alert") !== 0)) {
        findings.add(
          ladderFinding,
          `${label}: ${count("nudge")} nudges, ${count("critical")} critical and ${count("alert")} alert mails (the ladder: 2, 1, 0)`,
        );
      }
      if (!episode.silent && events.length > 0)
        findings.add(
          ladderFinding,
          `${label}: a healthy agent got ${events.map((e) => `${e.what} at ${iso(e.at)}`).join(", ")}`,
        );
    }

    // Every input: accepted once, one terminal result.
    const inputKeys = [
      ...fires.flatMap((f) =>
        f.occurrence === undefined
          ? []
          : [
              {
                key: occurrenceKey([...schedules].find(([, s]) => s.name === f.schedule)?.[0] ?? 0, f.occurrence),
                at: f.at,
              },
            ],
      ),
      ...webhooks.map((id) => ({ key: `webhook:${id}`, at: start })),
      ...slowInputs.map((s) => ({ key: `idem:${s.key}`, at: start })),
      { key: "idem:recurring-job", at: start },
    ];
    const seen = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = instance.harness;
      if (h === undefined) throw new Error("the session is not open at the end");
      const statuses: { key: string; at: number; status: string }[] = [];
      for (const { key, at } of inputKeys) {
        const acceptance = (await h.storage.getValue(bind(requestKey(key), {})))?.value;
        const result: InputResult | undefined =
          acceptance === undefined
            ? undefined
            : (await h.storage.getValue(bindResult(acceptance.conversationId, acceptance.inputId)))?.value;
        statuses.push({ key, at, status: result?.status ?? "never accepted" });
      }
      const users = async (conversationId: Id): Promise<Map<string, number>> => {
        const counts = new Map<string, number>();
        let after: Id | undefined;
        for (;;) {
          const page = await h.storage.scanEntries({
            conversationId,
            kind: "user",
            limit: 1000,
            ...(after === undefined ? {} : { after }),
          });
          for (const e of page.items) counts.set(entryText(e), (counts.get(entryText(e)) ?? 0) + 1);
          if (page.next === undefined || page.items.length === 0) break;
          after = page.next;
        }
        return counts;
      };
      const userEntries: Record<string, number> = {};
      for (const [id, spec] of schedules)
        userEntries[`schedule ${id}`] = (await users(spec.conversationId)).get(spec.text) ?? 0;
      const root = await users(h.rootId);
      for (const id of webhooks) userEntries[`webhook:${id}`] = root.get(`webhook ${id}`) ?? 0;
      const slowUsers = await users(conv.slow);
      for (const s of slowInputs) userEntries[`idem:${s.key}`] = slowUsers.get(s.text) ?? 0;
      return { statuses, userEntries };
    });
    for (const { key, at, status } of seen.statuses) {
      // A nextRun input of the last minutes may still wait for the next turn.
      const young = at > finalAt - 2 * MINUTE && status === "queued";
      if (status !== "done" && status !== "unanswered" && !young)
        findings.add("every input has exactly one terminal result", `${key}: ${status}`);
    }
    const final = prev;
    for (const s of final.schedules) {
      const users = seen.userEntries[`schedule ${s.id}`] ?? 0;
      // Queued nextRun input has no user entry until its turn, and one an occurrence replaced never has.
      if (users !== s.runs && !(schedules.get(s.id)?.mode === "nextRun" && users <= s.runs)) {
        findings.add(
          "every input has exactly one terminal result",
          `${nameOf(s.id)}: ${s.runs} runs but ${users} user entries`,
        );
      }
    }
    for (const [key, n] of Object.entries(seen.userEntries)) {
      if (!key.startsWith("schedule ") && n !== 1)
        findings.add("every input has exactly one terminal result", `${key}: accepted as ${n} user entries`);
    }

    // Rows written per idle hour: every full hour of the run proper with no input and no gap in it.
    flushRows();
    const idle: { hour: number; rows: number }[] = [];
    for (let h = 1; h < hourOf(outageFrom); h++)
      if (!busyHours.has(h)) idle.push({ hour: h, rows: meter.rowsByHour[h] ?? 0 });
    for (const { hour, rows } of idle) {
      const evictions = kills.filter((k) => hourOf(k.at) === hour).length;
      const bound =
        61 * ROWS_PER_TURN +
        60 * ROWS_PER_QUEUED +
        (HOUR / JOB_EVERY) * ROWS_PER_JOB_RUN +
        (HOUR / PATROL) * ROWS_PER_PATROL +
        (1 + evictions) * ROWS_PER_WAKE;
      if (rows > bound)
        findings.add(
          "rows written per idle simulated hour are bounded",
          `the hour from ${iso(start + hour * HOUR)} wrote ${rows} rows (bound ${bound} with ${evictions} evictions)`,
        );
    }
    const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
    const firstDay = idle.filter((i) => i.hour < 24).map((i) => i.rows);
    const lastDay = idle.filter((i) => i.hour >= hourOf(outageFrom) - 24).map((i) => i.rows);
    if (profile.hours > 48 && firstDay.length > 0 && lastDay.length > 0 && mean(lastDay) > mean(firstDay) * 1.25 + 50) {
      findings.add(
        "rows written per idle simulated hour are bounded",
        `idle hours write more as history grows: ${mean(firstDay).toFixed(0)} rows per hour on the first day, ${mean(lastDay).toFixed(0)} on the last`,
      );
    }

    // ---------------------------------------------------------------------------------------------
    // The report

    const idleRows = idle.map((i) => i.rows);
    const killsOf = (how: Kill["how"], inDay: (t: number) => boolean = () => true): number =>
      kills.filter((k) => k.how === how && inDay(k.at)).length;
    const atTheEnd = kills.filter((k) => k.during?.includes("(the last agent)") === true);
    const lines: string[] = [
      `soak ${profile.name}: ${profile.hours} simulated hours (then a ${Math.round(OUTAGE / DAY)}-day outage and one hour), seed ${seed}, ${profile.agents} agents, ` +
        `${steps.reduce((a, b) => a + b, 0)} wakes and inputs, ${kills.length} kills (${killsOf("idle")} idle, ${killsOf("commit")} after a commit, ${killsOf("gap")} for downtime: ` +
        `${gaps.map((g) => `${((g.to - g.from) / HOUR).toFixed(1)} h`).join(", ")}), ${((Date.now() - wall) / 1000).toFixed(0)} s of real time`,
      `rows written per idle simulated hour: mean ${mean(idleRows).toFixed(0)}, max ${Math.max(0, ...idleRows)} over ${idle.length} idle hours`,
      `daily cron 30 2 * * * Europe/Berlin fired for: ${dailyFires.join(", ") || "none"}`,
      `kills right after the last agent's deregistration (the witness ends there): ${atTheEnd.length === 0 ? "none" : atTheEnd.map((k) => iso(k.at)).join(", ")}`,
      "day | date       | steps | minute | minute cron | hourly | daily | job | patrols | nudges | escalations | kills idle/commit/gap | gap h | idle h | rows/idle h   (gap h: downtime begun that day, the long outage not counted)",
    ];
    for (let d = 0; d <= dayOf(outageFrom - 1); d++) {
      const inDay = (t: number): boolean => dayOf(t) === d && t <= outageFrom;
      const dayIdle = idle.filter((i) => Math.floor(i.hour / 24) === d).map((i) => i.rows);
      const n = (name: string): number => fires.filter((f) => f.schedule === name && inDay(f.at)).length;
      lines.push(
        [
          String(d + 1).padStart(3),
          iso(start + d * DAY).slice(0, 10),
          String(steps[d] ?? 0).padStart(5),
          String(n("every minute")).padStart(6),
          String(n("cron * * * * *")).padStart(11),
          String(n("cron 0 * * * *")).padStart(6),
          String(n("cron 30 2 * * * Europe/Berlin")).padStart(5),
          String(jobRuns.filter(inDay).length).padStart(3),
          String(patrols.filter(inDay).length).padStart(7),
          String(ladder.filter((e) => e.what === "nudge" && inDay(e.at)).length).padStart(6),
          String(ladder.filter((e) => e.what !== "nudge" && inDay(e.at)).length).padStart(11),
          `${killsOf("idle", inDay)}/${killsOf("commit", inDay)}/${killsOf("gap", inDay)}`.padStart(21),
          gaps
            .filter((g) => inDay(g.from) && g.to - g.from < OUTAGE)
            .reduce((a, g) => a + (g.to - g.from) / HOUR, 0)
            .toFixed(1)
            .padStart(5),
          String(dayIdle.length).padStart(6),
          `${mean(dayIdle).toFixed(0)} (max ${Math.max(0, ...dayIdle)})`.padStart(11),
        ].join(" | "),
      );
    }
    const after = fires.filter((f) => f.at > outageFrom);
    lines.push(
      `after the ${Math.round(OUTAGE / DAY)}-day outage: ${SCHEDULES.map((s) => `${s.name} fired ${after.filter((f) => f.schedule === s.name && f.at === outageFrom + OUTAGE).length}x at the wake`).join(", ")}`,
    );
    for (const category of CATEGORIES) {
      const { count, examples } = findings.of(category);
      lines.push(
        `${count === 0 ? "ok  " : "FAIL"} ${category}${count === 0 ? "" : `: ${count} findings, e.g.\n       ${examples.join("\n       ")}`}`,
      );
    }
    console.log(lines.join("\n"));
    for (const category of CATEGORIES)
      expect.soft(findings.of(category).examples, `${category} (seed ${seed})`).toEqual([]);
  });
});
