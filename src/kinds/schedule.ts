/**
 * The schedule task kind (§8.6 "Jobs and schedules", §5.3 recurring tasks): a background task that
 * accepts one input into a conversation at every occurrence of an interval (`every`) or a cron
 * expression (parsed by `croner`, with a timezone), looping waiting -> firing -> waiting under one id.
 *
 *   waiting { spec, nextRunAt, runs, skipped, lastRunAt }   start: sleep until nextRunAt (the alarm
 *                                                           wakes an evicted object), then commit firing
 *   paused  { ... }                                         start: sleep with no wake time (no alarm)
 *                                                           until a resume interrupts it
 *   firing  { ..., occurrence }                             inflight: one commit accepts the input with
 *                                                           the request key `schedule:<id>:<occurrence>`
 *                                                           and returns to waiting with the next time
 *   ended   { ... }                                         terminal: abortTask / DELETE
 *
 * The request key names the occurrence, so a firing re-run after a crash (recover) or a redelivered
 * alarm accepts once. The catch-up policy is in state (§8.6: a restart never launches a backlog): a wake
 * that finds several occurrences due (the object was down or asleep through them) runs at most one of
 * them, per `catchUp`: "one" (the default) runs the first for the whole gap, "none" runs none of a gap
 * (an occurrence is on time only while no later one is due and it is at most ON_TIME_GRACE_MS late).
 * The ones not run are counted in `skipped` (exact for `every`; for cron up to SKIPPED_COUNT_CAP per
 * gap, then a lower bound marked by `skippedCapped`), and the next occurrence is found from now in
 * bounded time, so the nextRunAt stored after a wake is always in the future. A schedule has at most
 * one pending occurrence: while its last accepted input is still queued (behind a turn that does not
 * end, among a failed group's waiting items), a due occurrence is counted in `skipped` instead of
 * queueing another input behind it. A nextRun input waits for the next accept by design, so a nextRun
 * schedule's due occurrence runs and its input replaces the earlier one still waiting (withdrawn).
 *
 * Pausing and editing: the host may not patch a task's state (§6.1, §10.2), so PATCH /schedules/{id}
 * commits sticky session values keyed by schedule id — the pause flag (`pi.schedule.paused`) and an
 * edit request (`pi.schedule.edit`: input, mode, catchUp, every or cron, timezone) — and then ends the
 * schedule's sleep (Driver.interruptSleep). A waiting or paused schedule reads both before it sleeps
 * and after every interrupted sleep, and applies them in its own commit: it moves between waiting and
 * paused, takes the edited spec (a new grid plans its first occurrence from now, a resume the first
 * occurrence of its grid after now; occurrences passed while paused are neither run nor counted) and
 * deletes the edit request. A paused schedule sleeps with no wake time, so it neither arms an alarm
 * nor wakes the object at its occurrences. The occurrence commit reads the flag too (a pause that
 * lands while an occurrence is due accepts nothing). A cron expression whose last occurrence has passed
 * (one with a year field) ends the schedule.
 *
 * One concept over 400 lines: the schedule kind. Its state machine needs its own occurrence arithmetic
 * (grids, catch-up, skipped counts) and its pause/edit records, and nothing else uses them.
 */
import { Cron } from "croner";
import type { Call } from "../core/call.js";
import { PicoError } from "../core/errors.js";
import {
  abortQueuedInput,
  bindInbox,
  bindResult,
  priorAcceptance,
  queueInput,
  type QueuedInput,
} from "../core/inbox.js";
import type { TaskRuntime } from "../core/runtime.js";
import { bindTo, sessionValue, withKey } from "../core/state.js";
import { defineTaskKind, type TaskDefinition, type TypedTask } from "../core/task-kind.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { generationConfig } from "./config.js";
import { acceptInput } from "./placement.js";
import type { TurnOptions } from "./services.js";

export type ScheduleMode = "followUp" | "steer" | "nextRun";

/** What a wake that finds a gap of missed occurrences runs: "one" run for the whole gap, or "none". */
export type ScheduleCatchUp = "one" | "none";

export const DEFAULT_CATCH_UP: ScheduleCatchUp = "one";

/** What a schedule is: where, what, when (fixed at creation). */
export type ScheduleSpec = {
  conversationId: Id;
  input: string;
  mode: ScheduleMode;
  /** Interval in ms, or null for a cron schedule. */
  every: number | null;
  cron: string | null;
  timezone: string | null;
  /** The catch-up policy; absent in schedules stored before it existed, which behave as "one". */
  catchUp?: ScheduleCatchUp;
};

type ScheduleBase = ScheduleSpec & {
  nextRunAt: number;
  runs: number;
  /** Occurrences that passed while the object was asleep or down; recorded, never replayed. */
  skipped: number;
  /** Present once a gap's cron count stopped at SKIPPED_COUNT_CAP: `skipped` is then a lower bound. */
  skippedCapped?: true;
  lastRunAt: number | null;
  lastInputId: Id | null;
};

export type ScheduleState =
  | (ScheduleBase & { status: "waiting" })
  | (ScheduleBase & { status: "paused" })
  | (ScheduleBase & { status: "firing"; occurrence: number })
  | (ScheduleBase & { status: "ended" });

export const scheduleRoles = { waiting: "start", paused: "start", firing: "inflight", ended: "terminal" } as const;

export const scheduleDefinition: TaskDefinition<ScheduleState, typeof scheduleRoles> = {
  kind: "schedule",
  roles: scheduleRoles,
};

type ScheduleTask = TypedTask<ScheduleState, typeof scheduleRoles>;

const pausedBase = sessionValue<true>("pi.schedule.paused");

/** The pause flag of a schedule (set: paused; absent: running). */
export function schedulePaused(id: Id) {
  return withKey(pausedBase, String(id));
}

/**
 * A requested change of what a schedule does: its input, accept mode, catch-up policy, or its grid
 * (`every`, or `cron` with an optional `timezone`; null: UTC). The route stores it (merged with one not
 * yet applied) and interrupts the schedule's sleep; the schedule applies it in its own commit (§6.1:
 * the host never patches a task) and deletes it there.
 */
export interface ScheduleEdit {
  readonly input?: string;
  readonly mode?: ScheduleMode;
  readonly catchUp?: ScheduleCatchUp;
  readonly every?: number;
  readonly cron?: string;
  readonly timezone?: string | null;
}

const editBase = sessionValue<ScheduleEdit>("pi.schedule.edit");

/** A schedule's edit request not yet applied (absent: none). */
export function scheduleEdit(id: Id) {
  return withKey(editBase, String(id));
}

/** A pending edit with a later one on top: a new grid replaces the pending grid as a whole. */
export function mergeEdit(pending: ScheduleEdit | undefined, next: ScheduleEdit): ScheduleEdit {
  if (pending === undefined) return next;
  const { every, cron, timezone, ...rest } = pending;
  const grid: ScheduleEdit =
    next.every !== undefined || next.cron !== undefined
      ? {}
      : {
          ...(every === undefined ? {} : { every }),
          ...(cron === undefined ? {} : { cron }),
          ...(timezone === undefined ? {} : { timezone }),
        };
  return { ...rest, ...grid, ...next };
}

/**
 * The spec after an edit: `every` makes an interval schedule (no cron, no timezone); `cron` a cron
 * schedule (in the edit's timezone, else the current cron schedule's, else UTC); a `timezone` alone
 * changes a cron schedule's zone. Throws InvalidSchedule (`timezone`) for a timezone on an interval
 * schedule.
 */
export function applyEdit(spec: ScheduleSpec, edit: ScheduleEdit): ScheduleSpec {
  let grid: Pick<ScheduleSpec, "every" | "cron" | "timezone">;
  if (edit.every !== undefined) {
    if (edit.timezone !== undefined && edit.timezone !== null)
      throw new InvalidSchedule("timezone applies to cron schedules only", "timezone");
    grid = { every: edit.every, cron: null, timezone: null };
  } else if (edit.cron !== undefined) {
    grid = {
      every: null,
      cron: edit.cron,
      timezone: edit.timezone !== undefined ? edit.timezone : spec.cron !== null ? spec.timezone : null,
    };
  } else if (edit.timezone !== undefined) {
    if (spec.cron === null) {
      if (edit.timezone !== null) throw new InvalidSchedule("timezone applies to cron schedules only", "timezone");
      grid = { every: spec.every, cron: null, timezone: null };
    } else grid = { every: null, cron: spec.cron, timezone: edit.timezone };
  } else grid = { every: spec.every, cron: spec.cron, timezone: spec.timezone };
  return {
    conversationId: spec.conversationId,
    input: edit.input ?? spec.input,
    mode: edit.mode ?? spec.mode,
    catchUp: edit.catchUp ?? spec.catchUp ?? DEFAULT_CATCH_UP,
    ...grid,
  };
}

/** Does the edit change when the schedule runs (not only what it accepts)? */
function changesGrid(spec: ScheduleSpec, edited: ScheduleSpec): boolean {
  return spec.every !== edited.every || spec.cron !== edited.cron || spec.timezone !== edited.timezone;
}

/**
 * Validate an edit of `spec` at `now` (the route's check before it stores the request): the edited grid
 * must parse and have an occurrence after now. Throws InvalidSchedule naming the field.
 */
export function checkEdit(spec: ScheduleSpec, edit: ScheduleEdit, now: number): ScheduleSpec {
  const edited = applyEdit(spec, edit);
  nextOccurrence(edited, now, now);
  return edited;
}

/**
 * What a waiting or paused schedule becomes under its current pause flag and edit request at `now`:
 * a new grid plans its first occurrence from now (like a new schedule), a resume the first occurrence
 * of its grid after now (occurrences that passed while paused are neither run nor counted in
 * `skipped`); otherwise the planned time stays. `undefined` for `next`: an edited cron expression has no
 * occurrence left (the schedule ends).
 */
export function replan(
  current: ScheduleBase,
  wasPaused: boolean,
  paused: boolean,
  edit: ScheduleEdit | undefined,
  now: number,
): { base: ScheduleBase; ends: boolean } {
  let spec: ScheduleSpec = specOf(current);
  let nextRunAt = current.nextRunAt;
  try {
    if (edit !== undefined) {
      const edited = applyEdit(spec, edit);
      if (changesGrid(spec, edited))
        nextRunAt = edited.every !== null ? now + edited.every : nextOccurrence(edited, now, now);
      spec = edited;
    }
    if (wasPaused && !paused && nextRunAt <= now) nextRunAt = nextOccurrence(spec, nextRunAt, now);
  } catch (error) {
    if (!(error instanceof InvalidSchedule)) throw error;
    // Validated by the route; a cron expression whose last occurrence passed since then ends it.
    return { base: { ...current, ...spec }, ends: true };
  }
  return { base: { ...current, ...spec, nextRunAt }, ends: false };
}

function specOf(state: ScheduleBase): ScheduleSpec {
  const { conversationId, input, mode, every, cron, timezone, catchUp } = state;
  return { conversationId, input, mode, every, cron, timezone, ...(catchUp === undefined ? {} : { catchUp }) };
}

/** The request key of one occurrence: an alarm delivered twice accepts once (§3.4). */
export function occurrenceKey(id: Id, occurrence: number): string {
  return `schedule:${id}:${occurrence}`;
}

export const MIN_EVERY_MS = 1000;

/** How far ahead a schedule's `startAt` may be: ten years (of 365.25 days). */
export const MAX_START_AHEAD_MS = 10 * 365.25 * 86_400_000;

/**
 * How late a wake may run its occurrence under catchUp "none": an alarm arrives a little after its time
 * and a restart (every deploy) delays it by seconds. Later than this, or once a later occurrence is due
 * too, the occurrence is part of a downtime gap.
 */
export const ON_TIME_GRACE_MS = 60_000;

/** Missed cron occurrences are counted one by one up to this many per gap; past it `skipped` is a lower bound. */
export const SKIPPED_COUNT_CAP = 10_000;

/** The request field an invalid schedule is refused for. */
export type ScheduleField = "every" | "cron" | "timezone" | "startAt";

/**
 * A schedule that cannot run: bad interval, cron expression, timezone or start (the wire maps it to 400 naming
 * `field`).
 */
export class InvalidSchedule extends Error {
  override readonly name = "InvalidSchedule";
  constructor(
    message: string,
    readonly field: ScheduleField,
  ) {
    super(message);
  }
}

/** Throws InvalidSchedule (field `timezone`) unless `timezone` is an IANA time zone the runtime knows. */
function checkTimezone(timezone: string): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new InvalidSchedule(
      `unknown timezone ${JSON.stringify(timezone)}: use an IANA time zone such as "Europe/Berlin"`,
      "timezone",
    );
  }
}

/** The occurrence grid of a schedule: an interval, or a parsed cron expression. */
type Grid = { readonly type: "every"; readonly every: number } | { readonly type: "cron"; readonly cron: Cron };

function gridOf(spec: Pick<ScheduleSpec, "every" | "cron" | "timezone">): Grid {
  if (spec.every !== null) {
    if (!(spec.every >= MIN_EVERY_MS)) throw new InvalidSchedule(`every must be at least ${MIN_EVERY_MS} ms`, "every");
    return { type: "every", every: spec.every };
  }
  if (spec.cron === null) throw new InvalidSchedule("a schedule needs every or cron", "every");
  // The timezone first: croner reports a bad one only when it computes a time, as a cron error.
  if (spec.timezone !== null) checkTimezone(spec.timezone);
  try {
    return {
      type: "cron",
      cron: new Cron(spec.cron, { ...(spec.timezone === null ? {} : { timezone: spec.timezone }), paused: true }),
    };
  } catch (error) {
    throw new InvalidSchedule(
      `invalid cron schedule: ${error instanceof Error ? error.message : String(error)}`,
      "cron",
    );
  }
}

/** The first cron occurrence strictly after `after` (ms), or null when the expression has none left. */
function cronAfter(cron: Cron, after: number): number | null {
  try {
    return cron.nextRun(new Date(after))?.getTime() ?? null;
  } catch (error) {
    // croner checks the timezone only when it computes a time (gridOf checked it before).
    throw new InvalidSchedule(
      `invalid cron schedule: ${error instanceof Error ? error.message : String(error)}`,
      "cron",
    );
  }
}

/**
 * The first occurrence strictly after `after` (ms). Throws for a cron expression
 * or timezone croner rejects, or one that never fires again: InvalidSchedule.
 */
export function nextOccurrence(
  spec: Pick<ScheduleSpec, "every" | "cron" | "timezone">,
  from: number,
  after: number,
): number {
  const grid = gridOf(spec);
  switch (grid.type) {
    case "every":
      if (from > after) return from;
      return from + (Math.floor((after - from) / grid.every) + 1) * grid.every;
    case "cron": {
      const next = cronAfter(grid.cron, Math.max(after, from - 1));
      if (next === null) throw new InvalidSchedule(`cron ${spec.cron} has no future occurrence`, "cron");
      return next;
    }
  }
}

/** What a wake at `now` does with the due occurrence it found: run it or not, what it skips, when next. */
export interface CatchUp {
  /** Accept this occurrence's input (unless the schedule is paused). */
  readonly fire: boolean;
  /** Occurrences at or before now not run (the due one too when it is not fired); see `capped`. */
  readonly skipped: number;
  /** The cron count stopped at SKIPPED_COUNT_CAP: `skipped` is a lower bound. */
  readonly capped: boolean;
  /** The first occurrence strictly after now (and after the due one); null: a cron expression has none left. */
  readonly next: number | null;
}

/**
 * The catch-up decision for the due `occurrence` woken at `now`, in bounded time whatever the gap: the
 * later occurrences already due are counted arithmetically for `every` (exact), one by one for cron up
 * to SKIPPED_COUNT_CAP, and the next occurrence is computed from now, never by walking the gap.
 */
export function catchUp(
  spec: Pick<ScheduleSpec, "every" | "cron" | "timezone" | "catchUp">,
  occurrence: number,
  now: number,
): CatchUp {
  const policy = spec.catchUp ?? DEFAULT_CATCH_UP;
  // Under "none" the due occurrence counts against the cap too when it turns out to be part of the gap.
  const cap = policy === "none" ? SKIPPED_COUNT_CAP - 1 : SKIPPED_COUNT_CAP;
  const later = laterDue(gridOf(spec), occurrence, now, cap);
  switch (policy) {
    case "one":
      return { fire: true, skipped: later.count, capped: later.capped, next: later.next };
    case "none": {
      const onTime = later.count === 0 && now - occurrence <= ON_TIME_GRACE_MS;
      return onTime
        ? { fire: true, skipped: 0, capped: false, next: later.next }
        : { fire: false, skipped: later.count + 1, capped: later.capped, next: later.next };
    }
  }
}

/** The occurrences in (occurrence, now] (counted up to `cap` for cron) and the first one after both. */
function laterDue(
  grid: Grid,
  occurrence: number,
  now: number,
  cap: number,
): { count: number; capped: boolean; next: number | null } {
  switch (grid.type) {
    case "every": {
      const count = now > occurrence ? Math.floor((now - occurrence) / grid.every) : 0;
      return { count, capped: false, next: occurrence + (count + 1) * grid.every };
    }
    case "cron": {
      let count = 0;
      let at = occurrence;
      for (;;) {
        const due = cronAfter(grid.cron, at);
        if (due === null || due > now) return { count, capped: false, next: due };
        if (count === cap) return { count, capped: true, next: cronAfter(grid.cron, now) };
        count += 1;
        at = due;
      }
    }
  }
}

/** What the tenant's limits say of one occurrence's input (the host asks them before the occurrence's commit). */
export type ScheduleAdmission =
  | {
      readonly type: "admitted";
      /** Gives the input back when the occurrence accepts none after all (skipped, paused, still queued). */
      readonly release?: () => Promise<void>;
    }
  | { readonly type: "refused"; readonly limit: string };

export interface ScheduleServices {
  readonly turn: TurnOptions;
  /** Called in the accepting commit (the host indexes inputs for point reads). */
  readonly accepted?: (b: TxBuilder, conversationId: Id, inputId: Id) => void;
  /**
   * Admits an occurrence's input by its request key, before the commit that accepts it (absent: nothing is
   * limited). A refused occurrence accepts nothing and is counted in `skipped`, like one that could not run.
   */
  readonly admit?: (requestId: string) => Promise<ScheduleAdmission>;
}

export function createScheduleKind(services: ScheduleServices) {
  const kind = defineTaskKind<ScheduleState, TaskRuntime>()({
    kind: "schedule",
    roles: scheduleRoles,
    initialStatus: "waiting",
    // A waiting schedule's execute only sleeps until nextRunAt first (after reading its pause flag and
    // edit request): asleep from its dispatch. A paused one sleeps with no wake time: no alarm.
    sleepsUntil: (state) =>
      state.status === "waiting" ? state.nextRunAt : state.status === "paused" ? Number.POSITIVE_INFINITY : undefined,

    async execute(task, runtime, call) {
      if (task.state.status !== "waiting" && task.state.status !== "paused") {
        throw new PicoError(
          "contract",
          `schedule ${task.id} executes only from waiting or paused, not ${task.state.status}`,
        );
      }
      const { status, ...initial } = task.state;
      let base: ScheduleBase = initial;
      let paused = status === "paused";
      for (;;) {
        // A pause, resume or edit is a route's commit of sticky state and an interrupt of this sleep;
        // this task applies it in its own commit (§6.1).
        const flag = (await runtime.value(schedulePaused(task.id)).get(call)) === true;
        const edit = await runtime.value(scheduleEdit(task.id)).get(call);
        if (edit !== undefined || flag !== paused) {
          const applied = await runtime.commitBuilder(async (b) => {
            const nowPaused = (await b.value(schedulePaused(task.id)).get()) === true;
            const nowEdit = await b.value(scheduleEdit(task.id)).get();
            const plan = replan(base, paused, nowPaused, nowEdit, runtime.now());
            if (nowEdit !== undefined) b.value(scheduleEdit(task.id)).delete();
            if (plan.ends) {
              b.value(schedulePaused(task.id)).delete();
              b.settle(task, "ended", plan.base);
              return undefined;
            }
            b.patch(task, nowPaused ? "paused" : "waiting", plan.base);
            return { base: plan.base, paused: nowPaused };
          }, call);
          if (applied === undefined) return;
          ({ base, paused } = applied);
          continue;
        }
        if (paused) {
          await runtime.sleep(Number.POSITIVE_INFINITY, call);
          continue;
        }
        await runtime.sleep(base.nextRunAt, call);
        if (runtime.now() >= base.nextRunAt) break;
        // Interrupted before its time: read the pause flag and edit request again.
      }
      const due: ScheduleBase & { occurrence: number } = { ...base, occurrence: base.nextRunAt };
      await runtime.commit((tx) => tx.patch(task, "firing", due), call);
      await fire(task, runtime, due, call);
    },

    async recover(task, runtime, call) {
      if (task.state.status !== "firing")
        throw new PicoError("contract", `schedule ${task.id} recovers only from firing, not ${task.state.status}`);
      const { status: _status, ...firing } = task.state;
      await fire(task, runtime, firing, call);
    },

    async abort(task, runtime, call) {
      const { status: _status, ...rest } = task.state;
      const base = stripOccurrence(rest);
      await runtime.commitBuilder((b) => {
        b.value(schedulePaused(task.id)).delete();
        b.value(scheduleEdit(task.id)).delete();
        b.settle(task, "ended", base);
      }, call);
    },
  });

  /**
   * One commit: accept this occurrence's input (once, by its request key) unless the catch-up policy
   * skips it as part of a gap, and wait for the next occurrence after now (or end, when a cron
   * expression has none left).
   */
  async function fire(
    task: ScheduleTask,
    runtime: TaskRuntime,
    firing: ScheduleBase & { occurrence: number },
    call: Call,
  ): Promise<void> {
    const { occurrence, ...base } = firing;
    const key = occurrenceKey(task.id, occurrence);
    // Asked outside the commit (it leaves the object); a retried fire finds its reservation by the same key.
    const admission = services.admit === undefined ? undefined : await services.admit(key);
    const accepted = await runtime.commitBuilder(async (b) => {
      const now = runtime.now();
      const decision = catchUp(base, occurrence, now);
      const paused = (await b.value(schedulePaused(task.id)).get()) === true;
      let inputId = base.lastInputId;
      let runs = base.runs;
      let runsNow = decision.fire && !paused;
      let pendingSkip = 0;
      if (runsNow) {
        const prior = await priorAcceptance(b, key);
        if (prior !== undefined) {
          inputId = prior.inputId;
        } else if (admission?.type === "refused") {
          // Over a limit of the tenant's: the occurrence accepts nothing.
          runsNow = false;
          pendingSkip = 1;
        } else if (base.mode === "nextRun" && (await waitingNextRun(b, base.conversationId, base.lastInputId))) {
          // A nextRun input waits for the next accept by design, not behind a stuck conversation: this
          // occurrence runs and its input takes the waiting one's place (withdrawn, unanswered `aborted`),
          // so the schedule still holds one pending input and the next run answers the latest occurrence.
          if (base.lastInputId !== null) await abortQueuedInput(b, base.conversationId, base.lastInputId);
          inputId = queueInput(b, base.conversationId, { mode: "nextRun", input: base.input, requestId: key });
          services.accepted?.(b, base.conversationId, inputId);
          runs += 1;
        } else if (await stillQueued(b, base.conversationId, base.lastInputId)) {
          // One pending occurrence per schedule: while the last one's input waits in the queue (behind a
          // turn that does not end, a failed group's waiting items, a nextRun queued before an edit),
          // this occurrence is skipped, not queued behind it.
          runsNow = false;
          pendingSkip = 1;
        } else if (!(await hasModel(b, base.conversationId))) {
          // A turn needs a model (§9.5). Creation refuses a conversation without one, but a schedule
          // stored before that check may aim at one: the occurrence is skipped, never a fault of the
          // session; it runs again once the conversation has a model.
          runsNow = false;
          pendingSkip = 1;
        } else {
          if (base.mode === "nextRun") {
            const item: QueuedInput = { mode: "nextRun", input: base.input, requestId: key };
            inputId = queueInput(b, base.conversationId, item);
          } else {
            inputId = (
              await acceptInput(
                b,
                base.conversationId,
                { input: base.input, requestId: key, whenBusy: base.mode },
                services.turn,
                now,
              )
            ).inputId;
          }
          services.accepted?.(b, base.conversationId, inputId);
          runs += 1;
        }
      }
      const after: ScheduleBase = {
        ...base,
        runs,
        skipped: base.skipped + decision.skipped + pendingSkip,
        ...(decision.capped ? { skippedCapped: true } : {}),
        lastRunAt: runsNow ? occurrence : base.lastRunAt,
        lastInputId: inputId,
      };
      if (decision.next === null) {
        b.value(schedulePaused(task.id)).delete();
        b.value(scheduleEdit(task.id)).delete();
        b.settle(task, "ended", after);
      } else {
        b.patch(task, "waiting", { ...after, nextRunAt: decision.next });
      }
      return runsNow;
    }, call);
    if (!accepted && admission?.type === "admitted") await admission.release?.();
  }

  return kind;
}

/** Does the conversation have a model to answer with (its `pi.model` config value)? */
async function hasModel(b: TxBuilder, conversationId: Id): Promise<boolean> {
  const model = await b.value(bindTo(generationConfig.model, conversationId)).get();
  return model !== undefined && model !== "";
}

/** Is the schedule's last accepted input still queued (not yet placed, answered or withdrawn)? */
async function stillQueued(b: TxBuilder, conversationId: Id, inputId: Id | null): Promise<boolean> {
  if (inputId === null) return false;
  return (await b.value(bindResult(conversationId, inputId)).get())?.status === "queued";
}

/** Is the schedule's last input a nextRun item still queued (waiting for the next accept to place it)? */
async function waitingNextRun(b: TxBuilder, conversationId: Id, inputId: Id | null): Promise<boolean> {
  if (inputId === null || !(await stillQueued(b, conversationId, inputId))) return false;
  const page = await b.list(bindInbox(conversationId)).read({ after: inputId - 1, limit: 1 });
  const item = page.items[0];
  return item !== undefined && item.id === inputId && item.value.mode === "nextRun";
}

function stripOccurrence(state: ScheduleBase & { occurrence?: number }): ScheduleBase {
  const { occurrence: _occurrence, ...base } = state;
  return base;
}

/**
 * The initial state of a new schedule (validated: a bad interval, cron, timezone, or a startAt more
 * than MAX_START_AHEAD_MS ahead throws InvalidSchedule naming the field). The catch-up policy is stored explicitly
 * ("one" unless the spec says otherwise).
 */
export function newSchedule(spec: ScheduleSpec, now: number, startAt: number | null): ScheduleState {
  if (startAt !== null && startAt > now + MAX_START_AHEAD_MS)
    throw new InvalidSchedule(
      `startAt may be at most ten years ahead (${new Date(now + MAX_START_AHEAD_MS).toISOString()})`,
      "startAt",
    );
  const from = startAt ?? now;
  const first =
    spec.every !== null
      ? startAt === null
        ? now + spec.every
        : nextOccurrence(spec, from, now - 1)
      : nextOccurrence(spec, from, Math.max(now, from - 1));
  return {
    status: "waiting",
    ...spec,
    catchUp: spec.catchUp ?? DEFAULT_CATCH_UP,
    nextRunAt: first,
    runs: 0,
    skipped: 0,
    lastRunAt: null,
    lastInputId: null,
  };
}
