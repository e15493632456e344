/**
 * Schedules inside the session Durable Object (§8.6, docs/api.md "Schedules"): the operations behind
 * `POST/GET .../schedules` and `GET/PATCH/DELETE .../schedules/{id}`, over the open session's SessionApi,
 * and a schedule as the HTTP API shows it. A schedule is a background task (kinds/schedule.ts); the host
 * never patches it (§6.1): a pause or an edit is a request the schedule applies in its own commit.
 */
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import { bind, bindTo } from "../../core/state.js";
import {
  checkEdit,
  DEFAULT_CATCH_UP,
  InvalidSchedule,
  mergeEdit,
  newSchedule,
  scheduleDefinition,
  scheduleEdit,
  schedulePaused,
  type ScheduleCatchUp,
  type ScheduleEdit,
  type ScheduleMode,
  type ScheduleSpec,
  type ScheduleState,
} from "../../kinds/schedule.js";
import { generationConfig } from "../../kinds/config.js";
import type { Id, Page, Task } from "../../storage/records.js";
import { Problem } from "../problems.js";
import type { ConversationRef, SessionApi } from "./api.js";

/** A schedule as the HTTP API shows it. */
export interface ScheduleView {
  readonly id: Id;
  readonly conversationId: Id;
  readonly input: string;
  readonly mode: ScheduleMode;
  readonly every: number | null;
  readonly cron: string | null;
  readonly timezone: string | null;
  readonly status: "active" | "paused" | "ended";
  readonly nextRunAt: number | null;
  readonly lastRunAt: number | null;
  readonly lastInputId: Id | null;
  readonly catchUp: ScheduleCatchUp;
  readonly runs: number;
  readonly skipped: number;
  readonly skippedCapped: boolean;
}

export interface ScheduleRequest {
  readonly conversation: ConversationRef;
  readonly input: string;
  readonly every?: number;
  readonly cron?: string;
  readonly timezone?: string;
  readonly startAt?: number;
  readonly mode?: ScheduleMode;
  readonly catchUp?: ScheduleCatchUp;
}

/** PATCH /schedules/{id}: pause or resume, and/or edit what the schedule does. */
export interface SchedulePatch extends ScheduleEdit {
  readonly paused?: boolean;
}

/** The schedule operations of the session's op table (session/ops.ts): arguments and results. */
export interface ScheduleSessionOps {
  createSchedule: { readonly args: [request: ScheduleRequest]; readonly result: ScheduleView };
  schedules: {
    readonly args: [query: { after?: Id; limit?: number; all?: boolean }];
    readonly result: Page<ScheduleView>;
  };
  schedule: { readonly args: [id: Id]; readonly result: ScheduleView };
  deleteSchedule: { readonly args: [id: Id]; readonly result: ScheduleView };
  patchSchedule: { readonly args: [id: Id, patch: SchedulePatch]; readonly result: ScheduleView };
}

/** How long PATCH /schedules/{id} waits for the schedule to apply the change in its own commit. */
const SCHEDULE_APPLY_BUDGET_MS = 5000;

const call: Call = BACKGROUND_CONTEXT;

/** POST /schedules: a recurring background task that accepts `input` at every occurrence. */
async function createSchedule(api: SessionApi, request: ScheduleRequest): Promise<ScheduleView> {
  const harness = api.harness;
  const handle = await api.conversation(request.conversation);
  // Every occurrence asks for a turn, and a turn needs a model (§9.5): refuse now, not at the first fire.
  // A conversation's model can be set but never unset over HTTP, so the check holds for its life.
  const model = (await harness.storage.getValue(bindTo(generationConfig.model, handle.id)))?.value;
  if (model === undefined || model === "") {
    throw new Problem(
      "invalid_body",
      `conversation ${handle.id} has no model configured (pi.model); set one with PATCH .../config before scheduling inputs into it`,
      "conversation",
    );
  }
  const spec: ScheduleSpec = {
    conversationId: handle.id,
    input: request.input,
    mode: request.mode ?? "followUp",
    every: request.every ?? null,
    cron: request.cron ?? null,
    timezone: request.timezone ?? null,
    catchUp: request.catchUp ?? DEFAULT_CATCH_UP,
  };
  let state: ScheduleState;
  try {
    state = newSchedule(spec, harness.now(), request.startAt ?? null);
  } catch (error) {
    if (error instanceof InvalidSchedule) throw new Problem("invalid_body", error.message, error.field);
    throw error;
  }
  const id = await harness.commit(
    (tx) => tx.task(scheduleDefinition, { conversationId: handle.id, background: true, state }),
    call,
  );
  return schedule(api, id);
}

async function schedules(
  api: SessionApi,
  query: { after?: Id; limit?: number; all?: boolean },
): Promise<Page<ScheduleView>> {
  const page = await api.harness.storage.scanTasks({
    kind: scheduleDefinition.kind,
    limit: query.limit ?? 100,
    ...(query.all === true ? {} : { live: true }),
    ...(query.after === undefined ? {} : { after: query.after }),
  });
  const items = await Promise.all(page.items.map((task) => scheduleView(api, task)));
  return { ...page, items };
}

async function schedule(api: SessionApi, id: Id): Promise<ScheduleView> {
  const task = await api.harness.getTask(id, call);
  if (task === undefined || task.kind !== scheduleDefinition.kind)
    throw new Problem("schedule_not_found", `schedule ${id} does not exist`, "scheduleId");
  return scheduleView(api, task);
}

/** DELETE /schedules/{id}: end it wherever it is (abort mark, then its abort handler). */
async function deleteSchedule(api: SessionApi, id: Id): Promise<ScheduleView> {
  const view = await schedule(api, id);
  if (view.status === "ended") return view;
  await api.harness.abortTask(id, call);
  // The abort handler settles it in a moment; a mid-occurrence firing finishes unwinding first.
  await api.harness.driver.waitForTask(id, { budgetMs: 5000 }, call);
  return schedule(api, id);
}

/**
 * PATCH /schedules/{id} { paused?, input?, mode?, catchUp?, every? | cron?, timezone? }. The host never
 * patches the schedule's task (§6.1): one commit stores the pause flag and the edit request (merged
 * with one not yet applied, validated against the schedule as it will be), then the schedule's sleep
 * is interrupted and the schedule applies both in its own commit. Answers once that commit is in (or
 * after SCHEDULE_APPLY_BUDGET_MS, with the view as it is then). A bad edit is a 400 naming the field
 * and writes nothing.
 */
async function patchSchedule(api: SessionApi, id: Id, patch: SchedulePatch): Promise<ScheduleView> {
  const harness = api.harness;
  await schedule(api, id);
  const { paused, ...edit } = patch;
  const edits = Object.keys(edit).length > 0;
  await harness.commit(async (tx) => {
    const task = (await harness.storage.getTasks([id])).get(id);
    if (task === undefined || task.role === "terminal") throw new Problem("conflict", `schedule ${id} has ended`);
    if (edits) {
      const pending = await tx.value(scheduleEdit(id)).get();
      const merged = mergeEdit(pending, edit);
      const { status: _status, ...state } = task.state as ScheduleState;
      try {
        checkEdit(state, merged, harness.now());
      } catch (error) {
        if (error instanceof InvalidSchedule) throw new Problem("invalid_body", error.message, error.field);
        throw error;
      }
      tx.value(scheduleEdit(id)).set(merged);
    }
    if (paused === true) tx.value(schedulePaused(id)).set(true);
    else if (paused === false) tx.value(schedulePaused(id)).delete();
  }, call);
  await harness.driver.interruptSleep(id);
  await scheduleApplied(api, id);
  return schedule(api, id);
}

/** Until the schedule has applied its pause flag and edit request (or ended), within the budget. */
async function scheduleApplied(api: SessionApi, id: Id): Promise<void> {
  const storage = api.harness.storage;
  const applied = async (): Promise<boolean> => {
    const task = (await storage.getTasks([id])).get(id);
    if (task === undefined || task.role === "terminal") return true;
    if ((await storage.getValue(bind(scheduleEdit(id), {}))) !== undefined) return false;
    const paused = (await storage.getValue(bind(schedulePaused(id), {})))?.value === true;
    return (task.state.status === "paused") === paused;
  };
  if (await applied()) return;
  const clock = api.harness.driver.clock;
  const budget = new AbortController();
  await new Promise<void>((resolve) => {
    let stop: () => void = () => undefined;
    const finish = (): void => {
      stop();
      budget.abort();
      resolve();
    };
    const check = (): void => {
      applied().then(
        (done) => {
          if (done) finish();
        },
        () => finish(),
      );
    };
    stop = api.harness.onCommit(check);
    clock.sleep(clock.now() + SCHEDULE_APPLY_BUDGET_MS, budget.signal).then(finish, () => undefined);
    check();
  });
}

async function scheduleView(api: SessionApi, task: Task): Promise<ScheduleView> {
  const state = task.state as ScheduleState | { status: "orphaned" };
  if (state.status === "orphaned") throw new Problem("conflict", `schedule ${task.id} is orphaned`);
  const paused = (await api.harness.storage.getValue(bind(schedulePaused(task.id), {})))?.value === true;
  const {
    status,
    conversationId,
    input,
    mode,
    every,
    cron,
    timezone,
    catchUp,
    nextRunAt,
    lastRunAt,
    runs,
    skipped,
    skippedCapped,
    lastInputId,
  } = state;
  return {
    id: task.id,
    conversationId,
    input,
    mode,
    every,
    cron,
    timezone,
    status: status === "ended" ? "ended" : paused ? "paused" : "active",
    // A paused schedule runs nothing until it is resumed.
    nextRunAt: status === "ended" || paused ? null : nextRunAt,
    lastRunAt,
    lastInputId,
    // Schedules stored before the policy existed catch up with one run.
    catchUp: catchUp ?? DEFAULT_CATCH_UP,
    runs,
    skipped,
    skippedCapped: skippedCapped === true,
  };
}

/** The schedule entries of the SessionObject's op table, over the open session's SessionApi. */
export function scheduleOps<S extends { readonly api: SessionApi }>(): {
  readonly [K in keyof ScheduleSessionOps]: (
    session: S,
    ...args: ScheduleSessionOps[K]["args"]
  ) => Promise<ScheduleSessionOps[K]["result"]>;
} {
  return {
    createSchedule: (s, request) => createSchedule(s.api, request),
    schedules: (s, query) => schedules(s.api, query),
    schedule: (s, id) => schedule(s.api, id),
    deleteSchedule: (s, id) => deleteSchedule(s.api, id),
    patchSchedule: (s, id, patch) => patchSchedule(s.api, id, patch),
  };
}
