/**
 * The session Durable Object's `DriverHost` (src/core/host.ts): the clock, quarantine bookkeeping around
 * every invocation, the tracer its spans go to (§6.5), alarm reasons from the driver's wake and busy
 * notifications, and the durable fault record. The SessionObject builds one per opened harness.
 *
 * The host never settles a task (§6.1): quarantine only withholds execute/recover, so an operator's
 * abort still runs the kind's abort handler, and a replaced kind (a new deployed version) recovers it.
 */
import type {
  Clock,
  DriverHost,
  FaultReport,
  InvocationMethod,
  InvocationStart,
  WorkStretch,
} from "../../core/host.js";
import type { Telemetry } from "../../core/telemetry.js";
import type { Id, Task } from "../../storage/records.js";
import type { AlarmPlan } from "./alarm-plan.js";
import type { HostBook } from "./host-book.js";
import type { HostReport } from "../platform/host-config.js";
import { log } from "../log.js";

export interface SessionHostOptions {
  readonly book: HostBook;
  readonly alarms: AlarmPlan;
  readonly clock: Clock;
  /** The deployed version kills are counted under. */
  readonly version: string;
  /** Where invocation spans go (§6.5): the OpenTelemetry adapter, named by the session's object id. */
  readonly telemetry?: Telemetry;
  readonly report: (report: HostReport) => void;
  /** The session's tenant and name for log lines (undefined: not created over HTTP). */
  readonly where?: () => { readonly tenant: string; readonly session: string } | undefined;
  /** After the fault is durable: the object drops the faulted harness. */
  readonly onFault: (report: FaultReport) => void;
}

export class SessionHost implements DriverHost {
  readonly clock: Clock;
  readonly telemetry: Telemetry | undefined;
  readonly #options: SessionHostOptions;
  /** Invocations started in this instance: for the `task` log line when they return. */
  readonly #started = new Map<
    Id,
    { readonly kind: string; readonly conversation: Id; readonly method: InvocationMethod; readonly at: number }
  >();

  constructor(options: SessionHostOptions) {
    this.#options = options;
    this.clock = options.clock;
    this.telemetry = options.telemetry;
  }

  /**
   * On the line, before dispatch. Execute and recover raise the task's kill counter (a synchronous,
   * durable write) or are withheld once the bound is reached; abort is never withheld or counted. An
   * invocation that starts parked in a declared sleep is checked against the bound but not counted: it
   * counts when it wakes (a sleeping task is not dying).
   */
  beforeInvoke(task: Task, method: InvocationMethod, start: InvocationStart = { parked: false }): boolean {
    switch (method) {
      case "abort":
        this.#started.set(task.id, { kind: task.kind, conversation: task.conversationId, method, at: Date.now() });
        return true;
      case "execute":
      case "recover": {
        const decision = this.#options.book.beforeStart(task.id, this.#options.version, start.parked);
        if (decision.type === "start") {
          this.#started.set(task.id, { kind: task.kind, conversation: task.conversationId, method, at: Date.now() });
          return true;
        }
        this.#options.report({ type: "quarantined", taskId: task.id, kind: task.kind, kills: decision.kills });
        log({
          type: "task",
          ...this.#where(),
          conversation: task.conversationId,
          taskId: task.id,
          kind: task.kind,
          method,
          outcome: "withheld",
          durationMs: 0,
        });
        return false;
      }
      default: {
        const never: never = method;
        throw new TypeError(`unknown invocation method ${String(never)}`);
      }
    }
  }

  /** On the line: the task parked in a declared wait; the working stretch before it was not killed. */
  parked(taskId: Id, stretch: WorkStretch): void {
    this.#options.book.parked(taskId, stretch === "wake");
  }

  /** On the line: the task woke from a declared wait; its new working stretch counts like a start. */
  woke(taskId: Id): void {
    this.#options.book.woke(taskId, this.#options.version);
  }

  /** Any invocation that returned (or threw) was not killed: the task's count resets. */
  afterInvoke(taskId: Id, method: InvocationMethod, status: string): void {
    this.#options.book.returned(taskId);
    const started = this.#started.get(taskId);
    this.#started.delete(taskId);
    log({
      type: "task",
      ...this.#where(),
      conversation: started?.conversation ?? 0,
      taskId,
      kind: started?.kind ?? "unknown",
      method,
      outcome: status,
      durationMs: started === undefined ? 0 : Date.now() - started.at,
    });
  }

  /** The tenant and session fields of a log line (none when unknown). */
  #where(): { tenant?: string; session?: string } {
    const where = this.#options.where?.();
    return where === undefined ? {} : { tenant: where.tenant, session: where.session };
  }

  wakeChanged(earliest: number | undefined): void {
    this.#options.alarms.wake(earliest, this.clock.now());
  }

  busyChanged(busy: boolean): void {
    this.#options.alarms.busy(busy, this.clock.now());
  }

  faulted(report: FaultReport): void {
    this.#options.book.recordFault(report, this.clock.now());
    this.#options.report({
      type: "session_faulted",
      ...(report.taskId === undefined ? {} : { taskId: report.taskId }),
      ...(report.kind === undefined ? {} : { kind: report.kind }),
      ...(report.method === undefined ? {} : { method: report.method }),
      message: report.message,
    });
    this.#options.onFault(report);
  }
}
