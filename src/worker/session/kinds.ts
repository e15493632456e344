/**
 * The task kinds a session Durable Object registers when it opens its harness: the built-in turn kit
 * (generation, tool, post_tools, collapse, job over the session's pi-ai models, the built-in tools echo,
 * job, new_context and subagent, and the session's ExecutionEnv), then
 * test kinds.
 *
 * `registerTestKinds` is the test seam: in `@cloudflare/vitest-plugin`, test files run in the same
 * isolate as the Durable Objects of the main worker, so module state is shared and a test can install
 * kinds with controllable behaviour before it creates or reopens a session. Production code never calls
 * it. A kind registered here is seen by every harness opened afterwards (each open reads the list).
 */
import type { Models } from "@earendil-works/pi-ai";
import type { AnyTaskKind } from "../../core/task-kind.js";
import { createTurnKit, type TurnKit } from "../../kinds/turns.js";
import { echoTool } from "../../tools/echo.js";
import { jobTool } from "../../tools/job.js";
import { newContextTool } from "../../tools/new-context.js";
import { subagentTool } from "../../tools/subagent.js";
import type { ExecutionEnv } from "../../kinds/exec-env.js";
import type { AnyTool, FinalAnswerExtension, TurnOptions } from "../../kinds/services.js";
import type { ScheduleServices } from "../../kinds/schedule.js";
import { inputIndex } from "./input-ops.js";
import type { ToolCatalog } from "../../kinds/catalog-types.js";
import type { RemoteCallServices } from "../../kinds/remote-call-state.js";

let testKinds: readonly AnyTaskKind[] = [];

/**
 * The turn kit a session opens with: the built-in turn kinds and tools over `models`, and what the
 * session adds (SessionKitOptions).
 */
export function sessionTurnKit(models: Models, options: SessionKitOptions = {}): TurnKit {
  return createTurnKit({
    models,
    tools: [...builtinTools],
    options: options.turn ?? {},
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.finalAnswer === undefined ? {} : { finalAnswer: options.finalAnswer }),
    ...(options.catalog === undefined ? {} : { catalog: options.catalog }),
    ...(options.remote === undefined ? {} : { remote: options.remote }),
    ...(options.incarnation === undefined ? {} : { incarnation: options.incarnation }),
    ...(options.scheduleAdmit === undefined ? {} : { scheduleAdmit: options.scheduleAdmit }),
    // A schedule's accepted input is indexed like one accepted over HTTP, so GET /inputs/{id} finds it.
    scheduleAccepted: (b, conversationId, inputId) => b.value(inputIndex(inputId)).set({ conversationId }),
  });
}

/** What a session's turn kit is built with beside its models. */
export interface SessionKitOptions {
  readonly env?: ExecutionEnv;
  /** The final-answer boundary's extension point (the rig's GUPP). */
  readonly finalAnswer?: FinalAnswerExtension;
  /** The operator's retry policy (src/worker/platform/retry-config.ts), over the kit's defaults. */
  readonly turn?: Partial<TurnOptions>;
  /** The tenant's tool catalog (src/worker/session/tool-catalog.ts). */
  readonly catalog?: ToolCatalog;
  /** Where remote calls (HTTP tools) leave the object. */
  readonly remote?: RemoteCallServices;
  /** The session's incarnation (src/kinds/incarnation.ts), named in pending ids. */
  readonly incarnation?: () => string | undefined;
  /** Admits a schedule's occurrence by the tenant's limits (limits/admission.ts). */
  readonly scheduleAdmit?: ScheduleServices["admit"];
}

/** The built-in tools every session registers (selectable by name in selectedTools). */
export const builtinTools: readonly AnyTool[] = [echoTool, jobTool, newContextTool, subagentTool];

/** The kinds a session harness opens with: built-ins, then test kinds (a test kind replaces a built-in). */
export function sessionTaskKinds(builtinKinds: readonly AnyTaskKind[] = []): AnyTaskKind[] {
  const names = new Set(testKinds.map((kind) => kind.kind));
  return [...builtinKinds.filter((kind) => !names.has(kind.kind)), ...testKinds];
}

/** Test only: install (or, with a kind of the same name, replace) kinds for harnesses opened from now on. */
export function registerTestKinds(kinds: readonly AnyTaskKind[]): void {
  const names = new Set(kinds.map((kind) => kind.kind));
  testKinds = [...testKinds.filter((kind) => !names.has(kind.kind)), ...kinds];
}

/** Test only: forget every test kind. */
export function resetTestKinds(): void {
  testKinds = [];
}
