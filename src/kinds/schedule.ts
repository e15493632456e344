/**
 * The schedule task kind (§8.6 "Jobs and schedules", §5.3 recurring tasks): a background task that
 * accepts one input into a conversation at every occurrence of an interval (`every`) or a cron
 * expression (parsed by `croner`, with a timezone), looping waiting -> firing -> waiting under one id.
 *
 *   waiting { spec, nextRunAt, runs, skipped, lastRunAt }   start: sleep until nextRunAt (the alarm
 *                                                           wakes an evicted object), then commit firing
 *   firing  { ..., occurrence }                             inflight: one commit accepts the input with
 *                                                           the request key `schedule:<id>:<occurrence>`
 *                                                           and returns to waiting with the next time
 *   ended   { ... }                                         terminal: abortTask / DELETE
 *
 * The request key names the occurrence, so a firing re-run after a crash (recover) or a redelivered
 * alarm accepts once. Missed occurrences after downtime are counted in `skipped`, never replayed: the
 * next one after now is scheduled. Pausing is a sticky session value keyed by schedule id (the host may
 * not patch a task's state, §10.2): a paused schedule keeps its times and accepts nothing.
 */
import { Cron } from "croner";
import type { Call } from "../core/call.js";
import { PicoError } from "../core/errors.js";
import { priorAcceptance, queueInput, type QueuedInput } from "../core/inbox.js";
import type { TaskRuntime } from "../core/runtime.js";
import { sessionValue, withKey } from "../core/state.js";
import { defineTaskKind, type TaskDefinition, type TypedTask } from "../core/task-kind.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { acceptInput } from "./placement.js";
import type { TurnOptions } from "./services.js";

export type ScheduleMode = "followUp" | "steer" | "nextRun";

/** What a schedule is: where, what, when (fixed at creation). */
export type ScheduleSpec = {
  conversationId: Id;
  input: string;
  mode: ScheduleMode;
  /** Interval in ms, or null for a cron schedule. */
  every: number | null;
  cron: string | null;
  timezone: string | null;
};

type ScheduleBase = ScheduleSpec & {
  nextRunAt: number;
  runs: number;
  /** Occurrences that passed while the object was asleep or down; recorded, never replayed. */
  skipped: number;
  lastRunAt: number | null;
  lastInputId: Id | null;
};

export type ScheduleState =
  | (ScheduleBase & { status: "waiting" })
  | (ScheduleBase & { status: "firing"; occurrence: number })
  | (ScheduleBase & { status: "ended" });

export const scheduleRoles = { waiting: "start", firing: "inflight", ended: "terminal" } as const;

export const scheduleDefinition: TaskDefinition<ScheduleState, typeof scheduleRoles> = { kind: "schedule", roles: scheduleRoles };

type ScheduleTask = TypedTask<ScheduleState, typeof scheduleRoles>;

const pausedBase = sessionValue<true>("pi.schedule.paused");

/** The pause flag of a schedule (set: paused; absent: running). */
export function schedulePaused(id: Id) {
  return withKey(pausedBase, String(id));
}

/** The request key of one occurrence: an alarm delivered twice accepts once (§3.4). */
export function occurrenceKey(id: Id, occurrence: number): string {
  return `schedule:${id}:${occurrence}`;
}

export const MIN_EVERY_MS = 1000;

/** A schedule that cannot run: bad interval, cron expression or timezone (the wire maps it to 400). */
export class InvalidSchedule extends Error {
  override readonly name = "InvalidSchedule";
}

/**
 * The first occurrence strictly after `after` (ms). Throws for a cron expression
 * or timezone croner rejects, or one that never fires again: InvalidSchedule.
 */
export function nextOccurrence(spec: Pick<ScheduleSpec, "every" | "cron" | "timezone">, from: number, after: number): number {
  if (spec.every !== null) {
    if (!(spec.every >= MIN_EVERY_MS)) throw new InvalidSchedule(`every must be at least ${MIN_EVERY_MS} ms`);
    if (from > after) return from;
    return from + (Math.floor((after - from) / spec.every) + 1) * spec.every;
  }
  if (spec.cron === null) throw new InvalidSchedule("a schedule needs every or cron");
  let next: Date | null;
  try {
    const cron = new Cron(spec.cron, { ...(spec.timezone === null ? {} : { timezone: spec.timezone }), paused: true });
    next = cron.nextRun(new Date(Math.max(after, from - 1)));
  } catch (error) {
    throw new InvalidSchedule(`invalid cron schedule: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (next === null) throw new InvalidSchedule(`cron ${spec.cron} has no future occurrence`);
  return next.getTime();
}

/** How many occurrences fall in (occurrence, now]: the ones a late wake skips (bounded count). */
function missed(spec: ScheduleSpec, occurrence: number, now: number): { skipped: number; next: number } {
  if (spec.every !== null) {
    const skipped = now > occurrence ? Math.floor((now - occurrence) / spec.every) : 0;
    return { skipped, next: nextOccurrence(spec, occurrence, now) };
  }
  let skipped = 0;
  let next = nextOccurrence(spec, occurrence, occurrence);
  while (next <= now && skipped < 100_000) {
    skipped += 1;
    next = nextOccurrence(spec, occurrence, next);
  }
  return { skipped, next };
}

export interface ScheduleServices {
  readonly turn: TurnOptions;
  /** Called in the accepting commit (the host indexes inputs for point reads). */
  readonly accepted?: (b: TxBuilder, conversationId: Id, inputId: Id) => void;
}

export function createScheduleKind(services: ScheduleServices) {
  const kind = defineTaskKind<ScheduleState, TaskRuntime>()({
    kind: "schedule",
    roles: scheduleRoles,
    initialStatus: "waiting",
    // A waiting schedule's execute only sleeps until nextRunAt first: asleep from its dispatch.
    sleepsUntil: (state) => (state.status === "waiting" ? state.nextRunAt : undefined),

    async execute(task, runtime, call) {
      if (task.state.status !== "waiting") throw new PicoError("contract", `schedule ${task.id} executes only from waiting, not ${task.state.status}`);
      const { status: _status, ...base } = task.state;
      await runtime.sleep(base.nextRunAt, call);
      await runtime.commit((tx) => tx.patch(task, "firing", { ...base, occurrence: base.nextRunAt }), call);
      await fire(task, runtime, { ...base, occurrence: base.nextRunAt }, call);
    },

    async recover(task, runtime, call) {
      if (task.state.status !== "firing") throw new PicoError("contract", `schedule ${task.id} recovers only from firing, not ${task.state.status}`);
      const { status: _status, ...firing } = task.state;
      await fire(task, runtime, firing, call);
    },

    async abort(task, runtime, call) {
      const { status: _status, ...rest } = task.state;
      const base = stripOccurrence(rest);
      await runtime.commitBuilder((b) => {
        b.value(schedulePaused(task.id)).delete();
        b.settle(task, "ended", base);
      }, call);
    },
  });

  /** One commit: accept this occurrence's input (once, by its request key) and wait for the next. */
  async function fire(task: ScheduleTask, runtime: TaskRuntime, firing: ScheduleBase & { occurrence: number }, call: Call): Promise<void> {
    const { occurrence, ...base } = firing;
    await runtime.commitBuilder(async (b) => {
      const now = runtime.now();
      const { skipped, next } = missed(base, occurrence, now);
      const paused = (await b.value(schedulePaused(task.id)).get()) === true;
      let inputId = base.lastInputId;
      let runs = base.runs;
      if (!paused) {
        const key = occurrenceKey(task.id, occurrence);
        const prior = await priorAcceptance(b, key);
        if (prior !== undefined) {
          inputId = prior.inputId;
        } else {
          if (base.mode === "nextRun") {
            const item: QueuedInput = { mode: "nextRun", input: base.input, requestId: key };
            inputId = queueInput(b, base.conversationId, item);
          } else {
            inputId = (await acceptInput(b, base.conversationId, { input: base.input, requestId: key, whenBusy: base.mode }, services.turn, now)).inputId;
          }
          services.accepted?.(b, base.conversationId, inputId);
          runs += 1;
        }
      }
      b.patch(task, "waiting", {
        ...base,
        nextRunAt: next,
        runs,
        skipped: base.skipped + skipped,
        lastRunAt: paused ? base.lastRunAt : occurrence,
        lastInputId: inputId,
      });
    }, call);
  }

  return kind;
}

function stripOccurrence(state: ScheduleBase & { occurrence?: number }): ScheduleBase {
  const { occurrence: _occurrence, ...base } = state;
  return base;
}

/** The initial state of a new schedule (validated: a bad cron or timezone throws PicoError invalid). */
export function newSchedule(spec: ScheduleSpec, now: number, startAt: number | null): ScheduleState {
  const from = startAt ?? now;
  const first = spec.every !== null ? (startAt === null ? now + spec.every : nextOccurrence(spec, from, now - 1)) : nextOccurrence(spec, from, Math.max(now, from - 1));
  return { status: "waiting", ...spec, nextRunAt: first, runs: 0, skipped: 0, lastRunAt: null, lastInputId: null };
}
