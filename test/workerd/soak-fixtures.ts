/**
 * Fixtures of the soak test (session.soak.ts): a seeded random source, the profiles, the
 * instrumentation of the session object's storage (rows written per simulated hour, commits counted,
 * a kill right after a chosen commit), the occurrence oracles of the schedules (independent of the
 * product: a fixed grid, whole UTC hours, and a wall-clock time in Europe/Berlin found by scanning with
 * Intl), and a scripted model that answers its first request for each input with a long `retry-after`.
 *
 * The Durable Objects of the main worker run in the tests' isolate, so module state here is shared with
 * them: the instrumentation patches the object's own `ctx.storage` (the same object every time the
 * instance is reached) and the SqliteStorage class, before the object opens its session.
 */
import {
  createFauxCore,
  createProvider,
  fauxAssistantMessage,
  type AssistantMessage,
  type Message,
  type Provider,
} from "@earendil-works/pi-ai";
import type { Call } from "../../src/core/call.js";
import type { Harness } from "../../src/core/harness.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { erase, type AnyTaskKind } from "../../src/core/task-kind.js";
import type { TurnKit } from "../../src/kinds/turns.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import type { CommitBatch, Task } from "../../src/storage/records.js";
import type { SqlHost } from "../../src/storage/sql.js";

// -------------------------------------------------------------------------------------------------
// Seeded randomness

/** mulberry32: a small seeded generator, enough for a replayable schedule of events. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Exponentially distributed with this mean (the gaps of a Poisson process). */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }
}

// -------------------------------------------------------------------------------------------------
// Profiles

export interface SoakProfile {
  readonly name: "short" | "full";
  /** Simulated hours of the run proper (then the long outage and one more hour). */
  readonly hours: number;
  /** Start this many days before the UTC day of the next DST change in Europe/Berlin. */
  readonly daysBeforeChange: number;
  /** Rig agents (a third of them stall in every round). */
  readonly agents: number;
  /** Kills of the idle object per simulated day (abortAllDurableObjects between wakes). */
  readonly idleKillsPerDay: number;
  /** Kills right after a random commit of a wake or an input, per simulated day. */
  readonly commitKillsPerDay: number;
  /** Downtime gaps (the object down, its alarms withheld) per simulated day, and their length in hours. */
  readonly gapsPerDay: number;
  readonly gapHours: readonly [number, number];
  /** Mean time between webhook deliveries, ms. */
  readonly webhookEveryMs: number;
}

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/**
 * short (CI): 30 simulated hours from the midnight before the DST change: four work rounds of the rig,
 * its teardown, both slow-model retries of the first day, the daily cron before and on the change.
 * full: 14 simulated days, the change on the fourth.
 */
export const PROFILES: Readonly<Record<SoakProfile["name"], SoakProfile>> = {
  short: {
    name: "short",
    hours: 30,
    daysBeforeChange: 1,
    agents: 20,
    idleKillsPerDay: 15,
    commitKillsPerDay: 15,
    gapsPerDay: 1.5,
    gapHours: [1, 3],
    webhookEveryMs: 2 * HOUR,
  },
  full: {
    name: "full",
    hours: 14 * 24,
    daysBeforeChange: 3,
    agents: 20,
    idleKillsPerDay: 15,
    commitKillsPerDay: 15,
    gapsPerDay: 1,
    gapHours: [1, 6],
    webhookEveryMs: 2 * HOUR,
  },
};

// -------------------------------------------------------------------------------------------------
// Instrumentation: rows written, commits, a kill after commit k

interface PendingCursor {
  readonly cursor: { readonly rowsWritten: number };
  readonly hour: number;
}

/** What the instrumented storage measured (shared with the object: same isolate). */
export const meter = {
  /** Non-empty commits of the session's storage (one `transactionSync` each). */
  commits: 0,
  /** Rows written per simulated hour since the run's start (index = hour number), over every statement. */
  rowsByHour: [] as number[],
  /** Reads of the test itself (peeks) are not the object's cost. */
  paused: false,
  /** The simulated time, read when a statement runs. */
  now: (): number => 0,
  start: 0,
};

const pending: PendingCursor[] = [];

/** Fold the cursors of statements that have run into the per-hour totals. */
export function flushRows(): void {
  for (const { cursor, hour } of pending.splice(0)) {
    let written = 0;
    try {
      written = cursor.rowsWritten;
    } catch {
      // A cursor of an instance that was aborted meanwhile: its rows are not known.
    }
    if (written > 0 && hour >= 0) meter.rowsByHour[hour] = (meter.rowsByHour[hour] ?? 0) + written;
  }
}

/** The kill plan: armed for "right after commit number `at`" of the meter's count. */
export const kill = {
  at: undefined as number | undefined,
  /** Set once commit `at` is durable and the abort is on its way: later commits of that instance never land. */
  hanging: false,
  /** The abort was called. */
  landed: false,
  /** The state of the instance the test reached last (the one a kill aborts). */
  state: undefined as DurableObjectState | undefined,
};

export function armKill(afterCommits: number): void {
  kill.at = meter.commits + afterCommits;
  kill.hanging = false;
  kill.landed = false;
}

export function disarmKill(): void {
  kill.at = undefined;
  kill.hanging = false;
  kill.landed = false;
}

const instrumented = new WeakSet<object>();
/** The SQL host each SqliteStorage was opened over (the object's `ctx.storage`). */
const hosts = new WeakMap<SqliteStorage, SqlHost>();
/** Storage of killed instances: none of their commits lands any more. */
const dying = new WeakSet<object>();

function isObjectStorage(host: SqlHost): host is SqlHost & DurableObjectStorage {
  return "getAlarm" in host;
}

/** Count every statement's rows written, per simulated hour (idempotent per storage object). */
function countRows(storage: DurableObjectStorage): void {
  if (instrumented.has(storage)) return;
  instrumented.add(storage);
  const sql = storage.sql;
  const exec = sql.exec.bind(sql);
  const counted = <T extends Record<string, SqlStorageValue>>(
    query: string,
    ...bindings: SqlStorageValue[]
  ): SqlStorageCursor<T> => {
    flushRows();
    const cursor = exec<T>(query, ...bindings);
    if (!meter.paused) pending.push({ cursor, hour: Math.floor((meter.now() - meter.start) / HOUR) });
    return cursor;
  };
  Object.defineProperty(sql, "exec", { value: counted, configurable: true, writable: true });
}

/**
 * Count this instance's SQL (rows written by every statement: the storage's commits, the host's kill
 * counters, migrations) and remember it as the instance a kill aborts. Call it before the wake or input
 * it applies to. (An instance the runtime creates by itself, retrying a request a kill interrupted, is
 * counted from its first SqliteStorage.open on.)
 */
export function instrument(state: DurableObjectState): void {
  kill.state = state;
  countRows(state.storage);
}

let originals: { commit: SqliteStorage["commit"]; open: typeof SqliteStorage.open } | undefined;

/**
 * Count commits and hold a kill exactly at its boundary: once commit k of the instance the test is
 * driving is durable, that instance is aborted, and no later commit of it reaches storage (each waits
 * forever; the abort takes it), as the eviction harness does. Installed for the soak run only.
 */
export function installCommitHook(): void {
  if (originals !== undefined) return;
  const commit = SqliteStorage.prototype.commit;
  const open = SqliteStorage.open.bind(SqliteStorage);
  originals = { commit, open };
  SqliteStorage.open = (host, options) => {
    if (isObjectStorage(host)) countRows(host);
    const storage = open(host, options);
    hosts.set(storage, host);
    return storage;
  };
  SqliteStorage.prototype.commit = function (
    this: SqliteStorage,
    batch: CommitBatch,
  ): Promise<{ first: number; last: number }> {
    const host = hosts.get(this);
    if (host !== undefined && dying.has(host)) return new Promise<never>(() => undefined);
    const before = this.lastSeq;
    // The transaction runs synchronously inside: once this returns, the commit either happened or not.
    const result = commit.call(this, batch);
    if (this.lastSeq === before || meter.paused) return result;
    meter.commits += 1;
    const state = kill.state;
    if (
      kill.at !== undefined &&
      meter.commits >= kill.at &&
      !kill.hanging &&
      state !== undefined &&
      host === state.storage
    ) {
      kill.hanging = true;
      dying.add(state.storage);
      // Killed once commit k is durable: an abort before that would take the commit with it.
      void state.storage.sync().then(() => {
        kill.landed = true;
        state.abort("soak: killed after a commit");
      });
    }
    return result;
  };
}

export function uninstallCommitHook(): void {
  if (originals === undefined) return;
  SqliteStorage.prototype.commit = originals.commit;
  SqliteStorage.open = originals.open;
  originals = undefined;
}

// -------------------------------------------------------------------------------------------------
// Occurrence oracles

/** Occurrences of an interval schedule in (from, to]: `first` + n * every. */
export function gridOccurrences(first: number, every: number, from: number, to: number): number[] {
  const out: number[] = [];
  let n = Math.max(0, Math.ceil((from - first) / every));
  for (let t = first + n * every; t <= to; n += 1, t = first + n * every) if (t > from) out.push(t);
  return out;
}

/** Whole UTC hours in (from, to] (cron `0 * * * *` on a UTC runtime). */
export function hourlyOccurrences(from: number, to: number): number[] {
  const out: number[] = [];
  for (let t = Math.floor(from / HOUR) * HOUR + HOUR; t <= to; t += HOUR) out.push(t);
  return out;
}

const berlin = new Intl.DateTimeFormat("en-CA", {
  timeZone: "Europe/Berlin",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
});

/** The wall clock in Europe/Berlin at `t`: "YYYY-MM-DD" and minutes since local midnight. */
export function berlinWall(t: number): { readonly date: string; readonly minutes: number } {
  const parts = Object.fromEntries(berlin.formatToParts(new Date(t)).map((p) => [p.type, p.value]));
  return {
    date: `${parts["year"]}-${parts["month"]}-${parts["day"]}`,
    minutes: Number(parts["hour"]) * 60 + Number(parts["minute"]),
  };
}

/**
 * Occurrences in (from, to] of a daily wall-clock time in Europe/Berlin, found by scanning minutes
 * with Intl (not with the product's cron library): for each local day, the first instant whose local
 * time on that day is at or past `hh:mm`. A time skipped by the spring change fires at the first
 * instant after the jump; a time repeated in autumn fires once, at its first instance.
 */
export function berlinDailyOccurrences(hour: number, minute: number, from: number, to: number): number[] {
  const target = hour * 60 + minute;
  const out: number[] = [];
  const seen = new Set<string>();
  // From two days back, so the scan is in step with local dates when it reaches `from`.
  for (let t = Math.floor(from / MINUTE) * MINUTE - 2 * DAY; t <= to; t += MINUTE) {
    const wall = berlinWall(t);
    if (wall.minutes < target || seen.has(wall.date)) continue;
    seen.add(wall.date);
    if (t > from) out.push(t);
  }
  return out;
}

/** The first instant after `after` at which Europe/Berlin changes its UTC offset (a DST change). */
export function nextBerlinChange(after: number): number {
  const offset = (t: number): number => {
    const wall = berlinWall(t);
    const utc = new Date(t);
    const utcMinutes = utc.getUTCHours() * 60 + utc.getUTCMinutes();
    const sameDay = wall.date === utc.toISOString().slice(0, 10);
    return sameDay ? wall.minutes - utcMinutes : wall.minutes + 1440 - utcMinutes;
  };
  let t = Math.ceil(after / HOUR) * HOUR;
  const first = offset(t);
  for (let i = 0; i < 24 * 400; i++, t += HOUR) if (offset(t) !== first) return t;
  throw new Error("no DST change in Europe/Berlin within 400 days");
}

// -------------------------------------------------------------------------------------------------
// The scripted model

export const SLOW_PROVIDER = "soak";
export const SLOW_MODEL = "slow";
/** What the model asks for on its first answer to each input: "retry in 180 minutes". */
export const RETRY_AFTER_MINUTES = 180;

function lastUserText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "user") continue;
    return typeof m.content === "string" ? m.content : m.content.map((c) => (c.type === "text" ? c.text : "")).join("");
  }
  return "";
}

/**
 * A provider whose model answers each new user text first with a rate limit that names a long wait
 * (HTTP 429, "retry in 180 minutes": pi-ai's retryable error, the wait a retry hint), then with an echo.
 * Calls are counted per input text, so a retry after a kill sees the same script.
 */
export class SlowProvider {
  readonly calls = new Map<string, number>();

  provider(): Provider {
    const core = createFauxCore({
      api: "soak",
      provider: SLOW_PROVIDER,
      models: [
        {
          id: SLOW_MODEL,
          name: "Soak: slow to answer",
          reasoning: false,
          input: ["text"],
          contextWindow: 1_000_000,
          maxTokens: 100_000,
        },
      ],
      tokenSize: { min: 4, max: 4 },
    });
    const reply = (messages: readonly Message[]): AssistantMessage => {
      const text = lastUserText(messages);
      const n = this.calls.get(text) ?? 0;
      this.calls.set(text, n + 1);
      if (n === 0)
        return fauxAssistantMessage([], {
          stopReason: "error",
          errorMessage: `429 Too Many Requests: rate limited, retry in ${RETRY_AFTER_MINUTES} minutes`,
        });
      return fauxAssistantMessage(`answer: ${text}`);
    };
    return createProvider({
      id: SLOW_PROVIDER,
      name: "Soak",
      auth: { apiKey: { name: "none", resolve: async () => ({ auth: {} }) } },
      models: [...core.models],
      api: {
        stream: (model, context, options) => {
          core.appendResponses([() => reply(context.messages)]);
          return core.stream(model, context, options);
        },
        streamSimple: (model, context, options) => {
          core.appendResponses([() => reply(context.messages)]);
          return core.streamSimple(model, context, options);
        },
      },
    });
  }
}

/**
 * The generation kind of a turn kit made per opened harness, as the session object makes its own kit
 * at every open (its caches never outlive the instance): registered once as a test kind, it delegates
 * each invocation to the kit of the invocation's harness.
 */
export function perHarnessGeneration(makeKit: () => TurnKit): AnyTaskKind {
  const kits = new WeakMap<Harness, AnyTaskKind>();
  const template = erase(makeKit().generation);
  const kindFor = async (task: Task, runtime: TaskRuntime, call: Call): Promise<AnyTaskKind> => {
    const harness = (await runtime.conversation(task.conversationId, call))?.harness;
    if (harness === undefined) return template;
    let kind = kits.get(harness);
    if (kind === undefined) {
      kind = erase(makeKit().generation);
      kits.set(harness, kind);
    }
    return kind;
  };
  return {
    ...template,
    kind: template.kind,
    roles: template.roles,
    initialStatus: template.initialStatus,
    execute: async (task, runtime, call) =>
      (await kindFor(task, runtime as TaskRuntime, call)).execute(task, runtime, call),
    recover: async (task, runtime, call) =>
      (await kindFor(task, runtime as TaskRuntime, call)).recover(task, runtime, call),
    abort: async (task, runtime, call) =>
      (await kindFor(task, runtime as TaskRuntime, call)).abort(task, runtime, call),
  };
}
