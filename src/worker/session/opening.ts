/**
 * Opening a session inside its Durable Object (docs/design.md, §6.4): the harness over the object's
 * SQLite storage (running any newer migrations) with its host (session/host.ts, session/host-book.ts),
 * the turn kit (session/kinds.ts) over the session's models (platform/models.ts: the offline echo model,
 * plus real providers whose keys are set), the rig and GUPP (docs/rig.md), the commit
 * observers (alarm, directory activity, outbox, limits meter), and the attach that keeps accepted work
 * running, unless the durable fault record says to wait for an operator. What the SessionObject holds
 * while the session is open is an OpenSession.
 */
import type { Models } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import { Harness, initialValue, type InitialValue } from "../../core/harness.js";
import { bind } from "../../core/state.js";
import type { Clock } from "../../core/host.js";
import { erase } from "../../core/task-kind.js";
import { SqliteStorage } from "../../storage/sqlite.js";
import { FakeExecutionEnv } from "../../kinds/exec-fake.js";
import { generationConfig } from "../../kinds/config.js";
import { acceptInput } from "../../kinds/placement.js";
import { sessionKey } from "../../kinds/incarnation.js";
import type { TurnKit } from "../../kinds/turns.js";
import { createWitnessKind, Gupp, Rig } from "../../rig/index.js";
import { rigPaused } from "../../rig/state.js";
import type { Env } from "../env.js";
import { hostReport, killBound } from "../platform/host-config.js";
import type { SessionStatus } from "../schemas.js";
import { sandboxEnvFor } from "../platform/sandbox-env.js";
import { retryOptions } from "../platform/retry-config.js";
import { sessionTracer } from "../platform/session-tracer.js";
import { remoteCallServices } from "../remote/http-transport.js";
import type { Outbox } from "../outbox/outbox.js";
import type { LimitsMeter, MeterWhere } from "../limits/meter.js";
import { releaseReservation, scheduleAdmission, sessionReservations } from "../limits/admission.js";
import { readOwner } from "../identity/owner.js";
import { FeedBook } from "../watch/transport.js";
import type { AlarmPlan } from "./alarm-plan.js";
import { SessionApi } from "./api.js";
import { incarnationValue, mintIncarnation } from "./config.js";
import type { DirectoryLink } from "./directory-link.js";
import { HostBook } from "./host-book.js";
import { SessionHost } from "./host.js";
import { inputIndex, type InputLimits } from "./input-ops.js";
import { sessionTaskKinds, sessionTurnKit } from "./kinds.js";
import { Replays } from "./replays.js";
import { RigOps } from "./rig-ops.js";
import type { CatalogCache } from "./tool-catalog.js";
import { installProfiles, registerProfileSection, type ProfileCache } from "./profiles.js";
import { IMPORTED_THROUGH_KEY } from "./created.js";

/** Whether the session's rig is paused (`rig.paused`, set by an import): GUPP waits for an operator's resume. */
export async function rigIsPaused(harness: Harness): Promise<boolean> {
  return (await harness.storage.getValue(bind(rigPaused, {}))) !== undefined;
}

/** The harness this instance opened, with its host bookkeeping. */
export interface OpenSession {
  readonly harness: Harness;
  readonly book: HostBook;
  readonly kit: TurnKit;
  readonly api: SessionApi;
  readonly feeds: FeedBook;
  /** The rig layer (docs/rig.md): agents, hooks, mail, nudges, the witness. */
  readonly rig: RigOps;
  /** GUPP's host side: opened with the attach (at open, or when an operator clears the fault). */
  readonly gupp: Gupp;
  /**
   * The session's incarnation (src/kinds/incarnation.ts), minted by its creating commit; undefined: a session
   * created before incarnations. Named in every key that leaves the object.
   */
  readonly incarnation: string | undefined;
  /** GitHub deliveries' signatures, de-duplicated for a week (session/replays.ts). */
  readonly replays: Replays;
  /** The session's input reservations under its tenant's limits (limits/admission.ts). */
  readonly limits: InputLimits;
  /**
   * The status the directory lists (docs/api.md "Search and metadata"): faulted (a fault record, or a live task
   * quarantined), busy (a live foreground task) or idle. The fault and quarantine rows are read when `full`, or while
   * the directory was last told faulted; otherwise it is a look at the driver's live map (no storage read per commit).
   */
  readonly status: (full: boolean) => SessionStatus;
  /** Faulted, shut down or closed: the next operation reopens (reopen starts nothing, §6.4). */
  stale: boolean;
}

/** What opening needs of the SessionObject: its state, its parts, and two hooks into its open session. */
export interface OpeningDeps {
  readonly ctx: DurableObjectState;
  readonly env: Env;
  readonly clock: Clock;
  readonly version: string;
  readonly alarms: AlarmPlan;
  readonly directory: DirectoryLink;
  readonly outbox: Outbox;
  /** Usage reports to the tenant's limits, durable until acknowledged. */
  readonly meter: LimitsMeter;
  readonly catalog: CatalogCache;
  /** The tenant's profiles this session names (session/profiles.ts). */
  readonly profiles: ProfileCache;
  /** The session's models (built once per instance; a misconfiguration throws). */
  readonly models: () => Promise<Models>;
  /** The host saw a fault on `harness`: its session goes stale if it is still the open one. */
  readonly faulted: (harness: Harness) => void;
  /** The session is built, not attached yet: the object holds it and registers surviving watchers. */
  readonly opened: (session: OpenSession) => Promise<void>;
}

/**
 * Open storage (running any newer migrations), the host and the harness; attach unless faulted.
 * `rootValues` is given only by create (empty storage gets its root then).
 */
export async function openSession(
  deps: OpeningDeps,
  rootValues: readonly InitialValue[] | undefined,
): Promise<OpenSession> {
  const { ctx, clock, alarms, directory, outbox } = deps;
  // A misconfigured retry policy refuses the open before anything touches storage.
  const retry = retryOptions(deps.env);
  // So does a bad OTLP variable: traces are configured, or not, never silently lost.
  const tracer = sessionTracer(deps.env, (exported) => ctx.waitUntil(exported));
  const armed = await ctx.storage.getAlarm();
  const storage = SqliteStorage.open(ctx.storage);
  const book = new HostBook(ctx.storage, killBound());
  const host = new SessionHost({
    book,
    alarms,
    clock,
    version: deps.version,
    telemetry: { tracer, session: ctx.id.toString(), incarnation: () => incarnation },
    report: (report) => {
      hostReport(report);
      // A withheld task makes the session faulted in the directory at once (not at its next commit).
      if (report.type === "quarantined") directory.status("faulted");
    },
    where: () => directory.where,
    onFault: () => {
      deps.faulted(harness);
      directory.status("faulted");
    },
  });
  const models = await deps.models();
  // The incarnation is read from storage once the harness opened (before anything runs: the attach is last);
  // a create mints it into the creating commit's root values.
  let incarnation: string | undefined;
  const where = ():
    { readonly tenant: string; readonly session: string; readonly incarnation?: string } | undefined => {
    const at = directory.where;
    return at === undefined ? undefined : { ...at, ...(incarnation === undefined ? {} : { incarnation }) };
  };
  const reserve = sessionReservations(deps.env, deps.meter, () => readOwner(ctx.storage.kv));
  // Jobs run in the session's sandbox when the SANDBOX binding is configured, else on the scripted fake.
  const env = sandboxEnvFor(deps.env, ctx.id.toString()) ?? new FakeExecutionEnv({ clock });
  // The witness kind and the turn kit's final-answer extension are registered at open; the Rig they
  // serve is built over the opened harness.
  let rig: Rig | undefined;
  // GUPP at a conversation agent's final answer, in the commit that records it: completes the hook
  // its work item answered, or accepts a pending hook's work item ahead of queued followUps (indexed
  // like an input accepted over HTTP, so GET /inputs/{id} finds it).
  const kit = sessionTurnKit(models, {
    env,
    // A generation captures the version of its profile the session last read (session/profiles.ts).
    turn: { ...retry, profileVersion: (name) => deps.profiles.head(name) },
    remote: remoteCallServices(deps.env, clock, where),
    catalog: deps.catalog,
    incarnation: () => incarnation,
    scheduleAdmit: scheduleAdmission(
      reserve,
      () => {
        const at = where();
        return at === undefined ? undefined : { tenant: at.tenant, session: sessionKey(at.session, at.incarnation) };
      },
      () => readOwner(ctx.storage.kv),
    ),
    finalAnswer: async (boundary) => {
      await rig?.atFinalAnswer({
        ...boundary,
        acceptFirst: async (input, requestId) => {
          const inputId = await boundary.acceptFirst(input, requestId);
          boundary.builder.value(inputIndex(inputId)).set({ conversationId: boundary.conversationId });
          return inputId;
        },
      });
    },
  });
  const witness = createWitnessKind(
    () => rig,
    (error) => hostReport({ type: "harness", report: error }),
  );
  const harness: Harness = await Harness.open(
    storage,
    {
      taskKinds: sessionTaskKinds([...kit.kinds, erase(witness)]),
      host,
      report: (report) => hostReport({ type: "harness", report }),
      // The same env the job kind runs on: tasks and tools reach it as runtime.env (§5.2, §9.3).
      env,
      observeBatch: outbox.observer(),
      ...(rootValues === undefined
        ? {}
        : { rootValues: [...rootValues, initialValue(incarnationValue, mintIncarnation())] }),
    },
    BACKGROUND_CONTEXT,
  );
  incarnation = (await harness.storage.getValue(bind(incarnationValue, {})))?.value;
  registerProfileSection(kit.sections);
  kit.install(harness);
  installProfiles(kit, harness, deps.profiles);
  // Registered first, so the guard alarm is written in the same turn as a commit that created work.
  // The driver's wake already counts work this commit dispatched asleep (a schedule waiting for its
  // due time): that is the reason to wake, and no guard is needed for it.
  harness.onCommit(() => alarms.live(harness.driver.hasLiveToWake, clock.now(), harness.driver.nextWake));
  const status = (full: boolean): SessionStatus => {
    if (full || directory.recordedStatus === "faulted") {
      if (book.fault() !== undefined) return "faulted";
      if (book.quarantined(deps.version).some((id) => harness.driver.liveTask(id) !== undefined)) return "faulted";
    }
    return harness.driver.hasForegroundWork ? "busy" : "idle";
  };
  harness.onCommit(() => directory.activity(status(false)));
  harness.onCommit((commit) => outbox.committed(commit));
  // Usage is keyed by the session key (`{session}:{incarnation}`), as the input routes' reservations are. An imported
  // session's inputs up to its import were its source's: their ends are not metered again (session/transfer.ts).
  const importedThrough = ctx.storage.kv.get<number>(IMPORTED_THROUGH_KEY);
  const meterWhere = (): MeterWhere => {
    const at = where();
    return at === undefined
      ? undefined
      : {
          tenant: at.tenant,
          session: sessionKey(at.session, at.incarnation),
          owner: () => readOwner(ctx.storage.kv),
          ...(importedThrough === undefined ? {} : { importedThrough }),
        };
  };
  harness.onCommit((commit) => deps.meter.committed(commit, meterWhere));
  const feeds = new FeedBook(harness);
  rig = new Rig(harness, {
    witness,
    conversationValues: Object.values(generationConfig),
    // GUPP: the work item is accepted as the conversation agent's input, as if its user hit enter.
    accept: async (tx, conversationId, input, requestId) => {
      const receipt = await acceptInput(tx.builder, conversationId, { input, requestId }, kit.options, harness.now());
      tx.value(inputIndex(receipt.inputId)).set({ conversationId });
      return receipt.inputId;
    },
  });
  const gupp = new Gupp(rig, (error) => hostReport({ type: "harness", report: error }));
  const replays = new Replays(harness, clock, (at) => alarms.replays(at, clock.now()));
  await replays.settled();
  const session: OpenSession = {
    harness,
    book,
    kit,
    api: new SessionApi(harness, kit, models, deps.catalog, deps.profiles),
    feeds,
    rig: new RigOps(rig, feeds),
    gupp,
    replays,
    limits: {
      reserve,
      unreserve: (key, payer, requestId) =>
        releaseReservation(deps.env, deps.meter, payer, key, requestId, readOwner(ctx.storage.kv)),
    },
    incarnation,
    status,
    stale: false,
  };
  // Watchers that survived hibernation (or a reopen) are registered before any new commit.
  await deps.opened(session);
  // Keep the session attached whenever it is open and not faulted, so accepted work always runs; a
  // faulted session waits for an operator (inspect, abort, clearFault).
  try {
    if (book.fault() === undefined) {
      await harness.attach(BACKGROUND_CONTEXT);
      // Pending and answered GUPP hooks are durable assignments: re-checked on every open, unless the rig is paused
      // (an imported copy: an operator resumes it, session/rig-ops.ts).
      if (!(await rigIsPaused(harness))) await gupp.open();
    }
  } finally {
    // Learn the scheduled alarm after attaching, so the work attach dispatched is counted in the
    // first write instead of causing a clear and a set.
    // What the directory lists may have changed while no instance ran (a fault before a restart; a deploy that
    // lifted a quarantine): recorded at open, a send only when it differs.
    directory.status(status(true));
    alarms.directory(directory.dueAt, clock.now());
    outbox.opened(harness);
    deps.meter.opened();
    alarms.known(armed ?? undefined, clock.now());
  }
  return session;
}
