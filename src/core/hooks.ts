/**
 * Hooks (§8.7): a kind declares its points; plugins register handlers per kind and point, harness-wide
 * or scoped to a conversation (optionally its owned subtree). The harness only routes: handlers run
 * outside the line in registration order, harness-wide first and the innermost conversation last, each
 * seeing the merged output so far; `failClosed` decides what a throw means. Cancellation passes through.
 * Registration is process state, not durable.
 */
import type { Id } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError, TaskCancelled } from "./errors.js";
import type { HookPoints, HookSpecs } from "./task-kind-types.js";

/** A handler gets the point's input, its Call, and the output merged from earlier handlers. */
export type HookHandler<In, Out> = (
  input: In,
  call: Call,
  sofar: Partial<Out & object>,
) => Promise<Out | void> | Out | void;

interface Registration {
  readonly kind: string;
  readonly point: string;
  readonly handler: HookHandler<unknown, unknown>;
  /** undefined: harness-wide. */
  readonly conversationId?: Id;
  readonly subtree: boolean;
  readonly order: number;
}

/** A failed handler under a fail-open policy: reported and skipped. */
export interface HookFailure {
  readonly kind: string;
  readonly point: string;
  readonly error: unknown;
}

/**
 * An optional observer of one `run`, called around each handler: a caller whose input is a mutable
 * draft (system_instructions, §8.2) snapshots it on `enter` and restores it on `skipped`, so a failed
 * fail-open handler's mutations are discarded while earlier handlers' changes stay; `returned` sees
 * each handler's own output before it is merged.
 */
export interface HookFrame {
  enter?(): void;
  returned?(output: unknown): void;
  skipped?(error: unknown): void;
}

/** The ownership chain of a conversation, outermost first (root ... conversation). */
export type ChainResolver = (conversationId: Id) => Promise<readonly Id[]>;

export class HookRegistry {
  readonly #registrations: Registration[] = [];
  #order = 0;
  readonly #report: (failure: HookFailure, call: Call) => void;

  /** `report` gets each fail-open failure and the Call of the run (which names the task invocation). */
  constructor(report: (failure: HookFailure, call: Call) => void = () => undefined) {
    this.#report = report;
  }

  /** Register a handler; returns its disposer. */
  on<H extends HookPoints, P extends keyof H & string>(
    kind: { readonly kind: string; readonly hooks?: HookSpecs<H> },
    point: P,
    handler: HookHandler<H[P]["input"], H[P]["output"]>,
    scope: { readonly conversationId?: Id; readonly subtree?: boolean } = {},
  ): () => void {
    const registration: Registration = {
      kind: kind.kind,
      point,
      handler: handler as HookHandler<unknown, unknown>,
      ...(scope.conversationId === undefined ? {} : { conversationId: scope.conversationId }),
      subtree: scope.subtree === true,
      order: this.#order++,
    };
    this.#registrations.push(registration);
    return () => {
      const index = this.#registrations.indexOf(registration);
      if (index >= 0) this.#registrations.splice(index, 1);
    };
  }

  /** Handlers for a point in run order: harness-wide, then scoped from outermost to innermost. */
  handlers(kind: string, point: string, chain: readonly Id[]): HookHandler<unknown, unknown>[] {
    const matching = this.#registrations.filter((r) => r.kind === kind && r.point === point);
    const global = matching.filter((r) => r.conversationId === undefined).sort((a, b) => a.order - b.order);
    const scoped: Registration[] = [];
    chain.forEach((conversationId, depth) => {
      const innermost = depth === chain.length - 1;
      for (const r of matching) {
        if (r.conversationId !== conversationId) continue;
        if (innermost || r.subtree) scoped.push(r);
      }
    });
    const ranked = scoped.map((r) => ({ r, depth: chain.indexOf(r.conversationId as Id) }));
    ranked.sort((a, b) => a.depth - b.depth || a.r.order - b.r.order);
    return [...global.map((r) => r.handler), ...ranked.map((x) => x.r.handler)];
  }

  /**
   * Run a point: each handler sees the input and the output merged so far (shallow merge of returned
   * objects). A throw under failClosed rethrows; otherwise it is reported and the handler skipped.
   * Cancellation (TaskCancelled, an aborted call) always propagates.
   */
  async run<Out extends object>(
    kind: {
      readonly kind: string;
      readonly hooks?: Readonly<Record<string, { readonly failClosed?: boolean } | undefined>>;
    },
    point: string,
    input: unknown,
    chain: readonly Id[],
    call: Call,
    frame?: HookFrame,
  ): Promise<Partial<Out>> {
    const failClosed = kind.hooks?.[point]?.failClosed === true;
    let merged: Partial<Out> = {};
    for (const handler of this.handlers(kind.kind, point, chain)) {
      frame?.enter?.();
      try {
        const out = await handler(input, call, merged);
        frame?.returned?.(out);
        if (out !== undefined && out !== null && typeof out === "object")
          merged = { ...merged, ...(out as Partial<Out>) };
      } catch (error) {
        if (isCancellation(error, call)) throw error;
        if (failClosed)
          throw new PicoError("contract", `${kind.kind}.${point} hook failed closed: ${describe(error)}`, {
            cause: error,
          });
        frame?.skipped?.(error);
        this.#report({ kind: kind.kind, point, error }, call);
      }
    }
    return merged;
  }
}

function isCancellation(error: unknown, call: Call): boolean {
  if (error instanceof TaskCancelled) return true;
  const signal = call.abortSignal;
  return (
    signal?.aborted === true && (error === signal.reason || (error as { name?: unknown } | null)?.name === "AbortError")
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
