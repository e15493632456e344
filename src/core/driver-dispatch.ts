/**
 * Scheduling and the invocation lifecycle (§6.1, §6.2, §6.5): after every durable batch, completion or
 * attachment, the changed tasks are reconsidered on the line. A served, unblocked live task whose kind
 * and needs are registered gets its one invocation slot reserved (execute for start, recover for
 * inflight, abort once marked), the host's bookkeeping first; after the line the invocation is
 * dispatched outside it with a span and its runtime (through the harness's wiring), and its completion
 * enters the line again to check it made progress, fail-stop otherwise, and reconsider.
 */
import type { Id } from "../storage/records.js";
import { BACKGROUND_CONTEXT, withAbortSignal, withContextValue, type Call } from "./call.js";
import { PicoError, TaskCancelled } from "./errors.js";
import type { InvocationMethod } from "./host.js";
import { invocationSpanKey, invocationTracerKey, noopTracer, type InvocationOutcome, type Span } from "./telemetry.js";
import { endTurnIfOver, turnSpanOf } from "./driver-turn-spans.js";
import { describeError, invocationKey, type Action, type Invocation } from "./driver-types.js";
import type { DriverState } from "./driver-state.js";
import { checkWaiters } from "./driver-waiters.js";

/** On the line: reserve task `id`'s invocation slot if it is due and may run now (§6.1, §6.2). */
function reserve(s: DriverState, id: Id, out: Invocation[]): void {
  if (s.phase !== "open" && s.phase !== "stopping") return;
  const lt = s.live.get(id);
  if (lt === undefined || s.running.has(id) || s.parked.has(id)) return;
  if (!s.served(lt.task)) return;
  let method: InvocationMethod;
  if (lt.task.abort === true) method = "abort";
  else if (s.phase === "stopping" || s.withheld.has(id)) return;
  else if (lt.task.role === "start") {
    if (lt.task.after.some((dep) => s.live.has(dep))) return;
    method = "execute";
  } else if (lt.task.role === "inflight") method = "recover";
  else return;
  const kind = s.session.taskKinds.get(lt.task.kind);
  // A missing kind, or a kind whose declared needs are not all registered, parks the task until a
  // registration supplies them (§6.4, §9.6).
  if (kind === undefined || !s.needsMet(kind)) {
    s.parked.add(id);
    return;
  }
  // An execute (or recover) whose kind declares it sleeps until a durable time first is parked from
  // its dispatch: its wake is known now, it is not busy (no transient heartbeat), and it is
  // not working, so the host counts no kill for it until it wakes. Its runtime.sleep takes over the
  // entry; completion (or a sleep already due) removes it.
  const sleepsUntil = method === "abort" ? undefined : kind.sleepsUntil?.(lt.task.state);
  const startsParked = sleepsUntil !== undefined && sleepsUntil > s.clock.now();
  let allowed: boolean;
  try {
    allowed = s.host.beforeInvoke?.(lt.task, method, { parked: startsParked }) !== false;
  } catch (error) {
    // The host could not make its bookkeeping durable: running the task without it would defeat the
    // safety valve it exists for. Nothing starts; the session fail-stops once reservation ends.
    s.hostFailure ??= {
      taskId: id,
      kind: lt.task.kind,
      method,
      error,
      message: `host bookkeeping before task ${id} (${lt.task.kind}) ${method} failed: ${describeError(error)}`,
    };
    return;
  }
  if (!allowed && method !== "abort") {
    s.withheld.add(id);
    return;
  }
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const number = (s.invocations.get(id) ?? 0) + 1;
  s.invocations.set(id, number);
  const inv: Invocation = {
    taskId: id,
    conversationId: lt.task.conversationId,
    method,
    controller: new AbortController(),
    initialStatusEpoch: lt.statusEpoch,
    number,
    kind,
    task: lt.task,
    done,
  };
  s.finish.set(inv, finish);
  s.running.set(id, inv);
  s.stretch.set(id, "start");
  // Infinity: parked with no wake time (a route's commit and interruptSleep end that sleep).
  if (startsParked) s.sleepers.set(id, Number.isFinite(sleepsUntil) ? sleepsUntil : undefined);
  out.push(inv);
}

/** Reconsider changed tasks and waiters; returns what to do after the line. */
export function reconsider(s: DriverState, ids: Iterable<Id>): Action {
  const reserved: Invocation[] = [];
  for (const id of ids) reserve(s, id, reserved);
  const failure = s.hostFailure;
  if (failure !== undefined) {
    s.hostFailure = undefined;
    // Nothing reserved in this round was dispatched: release the slots so close does not wait on them.
    for (const inv of reserved) {
      s.running.delete(inv.taskId);
      s.finish.get(inv)?.();
    }
    return s.failStop(failure);
  }
  const waiterActions = checkWaiters(s);
  const notify = s.notifyHost();
  return () => {
    for (const inv of reserved) dispatch(s, inv);
    waiterActions();
    notify();
  };
}

/** After the line: run a reserved invocation outside it; its completion re-enters the line. */
function dispatch(s: DriverState, inv: Invocation): void {
  const span = startSpan(s, inv);
  s.invocationSpans.set(inv.taskId, span);
  const ended = (): void => {
    if (s.invocationSpans.get(inv.taskId) === span) s.invocationSpans.delete(inv.taskId);
  };
  const base = withContextValue(invocationKey, inv, withAbortSignal(inv.controller.signal, BACKGROUND_CONTEXT));
  const tracer = s.host.telemetry?.tracer;
  const call = withContextValue(
    invocationSpanKey,
    span,
    tracer === undefined ? base : withContextValue(invocationTracerKey, tracer, base),
  );
  // The runtime is made, its preview started and the method run by the harness's wiring (runtime.ts).
  void s.wiring
    .invoke(inv, call)
    .then(
      () => complete(s, inv, undefined, false),
      (error: unknown) => complete(s, inv, error, true),
    )
    // The span ends exactly once, here, whichever way the invocation and its completion went.
    .then(
      (outcome) => {
        ended();
        endSpan(span, outcome.outcome, outcome.error);
        endTurnIfOver(s, inv.conversationId);
      },
      (error: unknown) => {
        ended();
        endSpan(span, "failed", error);
        endTurnIfOver(s, inv.conversationId);
        throw error;
      },
    )
    // A failing host hook in the completion must not become an unhandled rejection.
    .catch((error: unknown) => s.session.report({ type: "listener_error", error }))
    .finally(() => s.finish.get(inv)?.());
}

/**
 * One span per invocation (§6.5), through the host's tracer, a child of its turn's `invoke_agent` span for
 * a turn task (driver-turn-spans.ts); a throwing tracer degrades to no-op.
 */
function startSpan(s: DriverState, inv: Invocation): Span {
  const telemetry = s.host.telemetry;
  const turn = turnSpanOf(s, inv);
  try {
    return (telemetry?.tracer ?? noopTracer).startSpan(
      `pico.task.${inv.method}`,
      {
        ...(telemetry?.session === undefined ? {} : { "pico.session": telemetry.session }),
        "pico.conversation": inv.conversationId,
        "pico.task.id": inv.taskId,
        "pico.task.kind": inv.task.kind,
        "pico.task.status": inv.task.state.status,
        "pico.method": inv.method,
        "pico.phase": s.phase,
        "pico.invocation": inv.number,
      },
      turn,
    );
  } catch (error) {
    s.session.report({ type: "listener_error", error });
    return noopTracer.startSpan("", {});
  }
}

/** Invocation completion enters the line (§6.1); resolves with how the invocation ended. */
function complete(
  s: DriverState,
  inv: Invocation,
  error: unknown,
  threw: boolean,
): Promise<{ outcome: InvocationOutcome; error?: unknown }> {
  let outcome: InvocationOutcome = "closed";
  return s.session.line
    .run(() => {
      const settledStatus = s.settledStatus.get(inv.taskId);
      s.settledStatus.delete(inv.taskId);
      if (s.running.get(inv.taskId) !== inv) return () => undefined;
      s.running.delete(inv.taskId);
      s.sleepers.delete(inv.taskId);
      s.stretch.delete(inv.taskId);
      s.answerWaiters.delete(inv.taskId);
      s.arrived.delete(inv.taskId);
      s.pendingInterrupts.delete(inv.taskId);
      s.host.afterInvoke?.(
        inv.taskId,
        inv.method,
        s.live.get(inv.taskId)?.task.state.status ?? settledStatus ?? inv.task.state.status,
      );
      if (s.phase === "closing" || s.phase === "closed" || s.phase === "faulted") {
        return s.notifyHost();
      }
      const lt = s.live.get(inv.taskId);
      const kind = inv.kind.kind;
      if (threw) {
        if (!isCancellation(error, inv)) {
          outcome = "failed";
          return s.failStop({
            taskId: inv.taskId,
            kind,
            method: inv.method,
            error,
            message: `task ${inv.taskId} (${kind}) ${inv.method} threw: ${describeError(error)}`,
          });
        }
        outcome = "cancelled";
      } else if (inv.method === "abort") {
        if (lt !== undefined) {
          outcome = "contract";
          return s.failStop({
            taskId: inv.taskId,
            kind,
            method: inv.method,
            error: undefined,
            message: `task ${inv.taskId} (${kind}) abort returned without settling`,
          });
        }
        outcome = "settled";
      } else if (
        lt !== undefined &&
        lt.statusEpoch === inv.initialStatusEpoch &&
        !inv.controller.signal.aborted &&
        lt.task.abort !== true
      ) {
        outcome = "contract";
        return s.failStop({
          taskId: inv.taskId,
          kind,
          method: inv.method,
          error: undefined,
          message: `task ${inv.taskId} (${kind}) ${inv.method} returned without a committed status transition (§5.3)`,
        });
      } else if (lt === undefined) outcome = "settled";
      else if (lt.task.abort === true || inv.controller.signal.aborted) outcome = "cancelled";
      else outcome = "progressed";
      s.pruneLinks();
      return reconsider(s, [inv.taskId]);
    })
    .then((after) => {
      after();
      return threw ? { outcome, error } : { outcome };
    });
}

function isCancellation(error: unknown, inv: Invocation): boolean {
  if (error instanceof TaskCancelled) return true;
  if (!inv.controller.signal.aborted) return false;
  if (error === inv.controller.signal.reason) return true;
  if (error instanceof PicoError && (error.code === "closed" || error.code === "task_cancelled")) return true;
  return typeof error === "object" && error !== null && (error as { name?: unknown }).name === "AbortError";
}

/** On the line: attach a scope persistently (§6.2); a first attachment reconsiders the live map. */
export function attachScope(s: DriverState, scope: Id | "session", call: Call): Action {
  const inv = call.value(invocationKey);
  if (inv !== undefined && scope === "session") {
    throw new PicoError(
      "contract",
      `task ${inv.taskId} cannot drive or attach the whole session from inside its own invocation`,
    );
  }
  const first = scope === "session" ? !s.sessionAttached : !s.attached.has(scope) && !s.sessionAttached;
  if (scope === "session") s.sessionAttached = true;
  else s.attached.add(scope);
  // A new attachment inspects the live map once; ordinary completions never scan it.
  return first ? reconsider(s, [...s.live.keys()]) : () => undefined;
}

/** Wake sleepers whose time has come (an alarm fired); sleeping itself is the clock's business. */
export function release(s: DriverState, taskId: Id): Promise<void> {
  return s.session.line
    .run(() => {
      s.withheld.delete(taskId);
      return reconsider(s, [taskId]);
    })
    .then((after) => after());
}

/**
 * Re-examine every parked task after a registry change (§9.6): those whose kind and needs are now
 * registered are reserved; the others park again. The parked set is small (tasks waiting for code).
 */
export function unpark(s: DriverState): Action {
  const ids = [...s.parked];
  s.parked.clear();
  return reconsider(s, ids);
}

/** End an invocation's span with its outcome (§6.5). */
function endSpan(span: Span, outcome: InvocationOutcome, error: unknown): void {
  try {
    span.setAttribute("pico.outcome", outcome);
    if (error !== undefined && outcome !== "cancelled") span.recordError(error);
    if (outcome === "failed" || outcome === "contract")
      span.setStatus("error", error === undefined ? `invocation ended: ${outcome}` : describeError(error));
    else span.setStatus("ok");
  } finally {
    span.end();
  }
}
