/**
 * The session object's outbox (docs/integrations.md "Events out"): one facade over
 *
 * - the tenant's endpoints as this session knows them: a memory copy read from the tenant's
 *   DirectoryObject at most every ENDPOINTS_TTL_MS, and only by a session created over HTTP (it has a
 *   tenant). A stale copy is read again before the next commit is observed, so a commit never uses a
 *   copy older than the TTL. A read that fails keeps the copy; without one the endpoints are unknown
 *   (never "none"), and asked again after ENDPOINTS_RETRY_MS;
 * - the batch observer (outbox/events.ts) that appends one `edge.outbox` element per event in the very
 *   batch that reports it, only when an enabled endpoint of the copy subscribes to the event (no
 *   endpoint: no read, no write), or, while the endpoints are unknown, every event unresolved (its
 *   endpoints are resolved when the directory answers);
 * - the sender (outbox/sender.ts) over the host book (outbox/book.ts), kicked after such a commit, at
 *   open and on the alarm (`AlarmPlan.outbox`);
 * - the operator's deliveries list and retry (`outboxOps`).
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { BatchObserver, CommittedBatch, Harness } from "../../core/harness.js";
import type { Clock } from "../../core/host.js";
import type { Id, JsonObject } from "../../storage/records.js";
import type { SqlHost } from "../../storage/sql.js";
import { bind } from "../../core/state.js";
import type { Env } from "../env.js";
import { directoryStub } from "../directory/object.js";
import { hostFetch, hostReport } from "../platform/host-config.js";
import { Problem } from "../problems.js";
import { openSecret } from "../crypto/sealed-secrets.js";
import { deliveryView, OutboxBook } from "./book.js";
import { detectEvents } from "./events.js";
import { OutboxSender, outboxTiming, type OutboxTiming } from "./sender.js";
import { endpointSealContext, type EventType, type SessionEndpoint } from "../directory/endpoints.js";
import {
  outboxList,
  parseDeliveryId,
  type DeliveryStatus,
  type DeliveryView,
  type OutboxEvent,
  type OutboxSessionOps,
} from "./types.js";

/** A session reads its tenant's endpoints again after this long. */
export const ENDPOINTS_TTL_MS = 30_000;
/** A read of the endpoints that takes longer than this (injected clock) keeps the copy it has. */
export const ENDPOINTS_READ_CAP_MS = 1_000;
/** After a failed read and without a copy, the endpoints are asked again this soon (the alarm retries). */
export const ENDPOINTS_RETRY_MS = 10_000;
const PRUNE_EVERY_MS = 3_600_000;
/** Events removed per commit when pruning. */
const PRUNE_BATCH = 500;
/** Commits per prune round; a backlog beyond them goes on at the next alarm, at once. */
const PRUNE_BATCHES = 100;
/** A directory call that failed (disabling an endpoint) is tried again this much later. */
const DISABLE_RETRY_MS = 60_000;
const HOUR_MS = 3_600_000;

export interface OutboxDeps {
  readonly env: Env;
  readonly clock: Clock;
  readonly host: SqlHost;
  /** The Durable Object id (hex): event ids start with part of it. */
  readonly objectId: string;
  /** The session's tenant and name, and its incarnation (src/kinds/incarnation.ts) once the session is open. */
  readonly where: () =>
    { readonly tenant: string; readonly session: string; readonly incarnation?: string } | undefined;
  readonly endpoints: (tenant: string, session: string) => Promise<SessionEndpoint[]>;
  readonly disable: (
    tenant: string,
    endpoint: string,
    failingSince: number,
    reason: string,
  ) => Promise<{ readonly disabled: boolean }>;
  readonly fetch: (request: Request) => Promise<Response>;
  /** When the sender next has something to do (undefined: nothing). */
  readonly due: (at: number | undefined) => void;
  readonly report: (error: unknown) => void;
}

interface Known {
  readonly key: string;
  /** undefined: the directory could not be read and there was no copy (unknown, not none). */
  readonly endpoints: readonly SessionEndpoint[] | undefined;
  readonly checkedAt: number;
}

/** Test only: the outbox timing instead of its vars (each instance reads it when it first needs it). */
let timingSeam: Partial<OutboxTiming> | undefined;

export function setOutboxTimingSeam(timing: Partial<OutboxTiming> | undefined): void {
  timingSeam = timing;
}

export class Outbox {
  readonly #deps: OutboxDeps;
  readonly book: OutboxBook;
  #timing: OutboxTiming | undefined;
  #known: Known | undefined;
  #harness: Harness | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  /** The last prune stopped at PRUNE_BATCHES with more to go. */
  #pruneBacklog = false;
  /** When resolving unresolved events last failed (tried again ENDPOINTS_RETRY_MS later, not at once). */
  #resolveFailedAt = 0;
  /** When a disable was last tried (a failing directory call is tried again a minute later, not at once). */
  #disableTriedAt = 0;
  readonly #opened = new Map<string, Promise<string>>();
  /** The session's tenant and name once known (they never change; KV is not read per commit). */
  #whereKnown: { readonly tenant: string; readonly session: string } | undefined;

  constructor(deps: OutboxDeps) {
    this.#deps = deps;
    this.book = new OutboxBook(deps.host);
  }

  get #config(): OutboxTiming {
    this.#timing ??= { ...outboxTiming(this.#deps.env), ...timingSeam };
    return this.#timing;
  }

  #where(): { readonly tenant: string; readonly session: string } | undefined {
    this.#whereKnown ??= this.#deps.where();
    return this.#whereKnown;
  }

  /**
   * The endpoints that match this session (fresh within the TTL, or read now; `force` reads now).
   * undefined: unknown (the read failed and this instance has no copy); never an empty answer for an outage.
   */
  async endpoints(force = false): Promise<readonly SessionEndpoint[] | undefined> {
    const where = this.#where();
    if (where === undefined) return [];
    const key = `${where.tenant}/${where.session}`;
    const now = this.#deps.clock.now();
    const known = this.#known?.key === key ? this.#known : undefined;
    const ttl = known?.endpoints === undefined ? ENDPOINTS_RETRY_MS : ENDPOINTS_TTL_MS;
    if (!force && known !== undefined && now - known.checkedAt < ttl) return known.endpoints;
    try {
      return await this.#refresh(where);
    } catch (error) {
      this.#deps.report(error);
      this.#known = { key, endpoints: known?.endpoints, checkedAt: now };
      return known?.endpoints;
    }
  }

  /** Read the endpoints now and keep the copy; a failure or a read slower than the cap throws. */
  async #refresh(where: { readonly tenant: string; readonly session: string }): Promise<SessionEndpoint[]> {
    const now = this.#deps.clock.now();
    const cap = new AbortController();
    try {
      const read = this.#deps.endpoints(where.tenant, where.session);
      const late = this.#deps.clock.sleep(now + ENDPOINTS_READ_CAP_MS, cap.signal).then(() => undefined);
      const endpoints = await Promise.race([read, late]);
      if (endpoints === undefined) throw new Error("the tenant's endpoints did not answer in time");
      this.#known = { key: `${where.tenant}/${where.session}`, endpoints, checkedAt: now };
      return endpoints;
    } finally {
      cap.abort();
    }
  }

  /** Whether the endpoints are unknown (the directory could not be read), and when to ask again. */
  #unreadableUntil(): number | undefined {
    const known = this.#known;
    return known !== undefined && known.endpoints === undefined ? known.checkedAt + ENDPOINTS_RETRY_MS : undefined;
  }

  /** The harness option: events of each batch, appended to it. */
  observer(): BatchObserver {
    return async (batch, b) => {
      if (this.#where() === undefined) return;
      const endpoints = (await this.endpoints())?.filter((endpoint) => endpoint.enabled);
      if (endpoints?.length === 0) return;
      const detected = await detectEvents(batch, b);
      // Endpoints unknown (the directory cannot be read): every event is written, resolved when it answers.
      const events =
        endpoints === undefined
          ? detected.map((event) => ({ ...event, to: [] as string[], unresolved: true }))
          : detected
              .map((event) => ({
                ...event,
                to: endpoints.filter((endpoint) => endpoint.events.includes(event.type)).map((endpoint) => endpoint.id),
                unresolved: false,
              }))
              .filter((event) => event.to.length > 0);
      if (events.length === 0) return;
      const seq = batch.first + batch.writes.length + events.length - 1;
      const now = b.now();
      events.forEach((event, index) => {
        const element = batch.first + batch.writes.length + index;
        const stored = this.#event(event.type, event.data, event.to, now, seq, element);
        b.list(outboxList).append(event.unresolved ? { ...stored, unresolved: true } : stored);
      });
    };
  }

  #event(type: EventType, data: JsonObject, to: readonly string[], now: number, seq: Id, element: Id): OutboxEvent {
    const session = this.#where()?.session ?? "";
    // The incarnation keeps a re-created session's event ids new whatever its clock says (the object id is the
    // same); asked each time, as it is known only once the session is open.
    const incarnation = this.#deps.where()?.incarnation;
    return {
      id: `evt_${incarnation ?? this.#deps.objectId.slice(0, 12)}${now.toString(36)}_${element}`,
      type,
      timestamp: now,
      data: { session, seq, ...data },
      to,
    };
  }

  /** Commit listener: rows for the events this commit appended, and the alarm for them, in the commit's turn. */
  committed(commit: CommittedBatch): void {
    if (commit.batch.kind !== "main") return;
    const events: { element: Id; event: OutboxEvent }[] = [];
    commit.batch.writes.forEach((write, index) => {
      if (write.type === "list.append" && write.addr.namespace === outboxList.namespace)
        events.push({ element: commit.first + index, event: write.value as unknown as OutboxEvent });
    });
    if (events.length === 0) return;
    this.book.materialize(events, this.#deps.clock.now());
    this.#deps.due(this.#deps.clock.now());
    this.kick();
  }

  /** The session opened: pick up events a kill left unmaterialized, and go on sending. */
  opened(harness: Harness): void {
    this.#harness = harness;
    this.#deps.due(this.#nextDue());
    if (this.#where() !== undefined) this.kick();
  }

  /** The harness closed (deleted, reopened): nothing more is sent through it. */
  closed(): void {
    this.#harness = undefined;
    this.#whereKnown = undefined;
    this.book.forget();
  }

  /** The object's alarm: one send round (and whatever follows it). */
  async alarm(): Promise<void> {
    if (this.#harness === undefined || this.#where() === undefined) return;
    this.kick();
    await this.#running;
  }

  /** Start a send round unless one runs (then it runs once more after). */
  kick(): void {
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.#again = false;
          await this.#round();
        } while (this.#again);
      } catch (error) {
        this.#deps.report(error);
      } finally {
        this.#running = undefined;
        this.#deps.due(this.#nextDue());
      }
    };
    this.#running = run();
  }

  /** Whether an event is still to be delivered: a pending delivery, or one whose endpoints are not known yet. */
  undelivered(): boolean {
    return this.book.earliest() !== undefined || this.book.unresolved(1).length > 0;
  }

  /** Wait for the round in flight (tests, the deliveries list). */
  async settled(): Promise<void> {
    await this.#running;
  }

  #nextDue(): number | undefined {
    let timing: OutboxTiming;
    try {
      timing = this.#config;
    } catch {
      return this.book.earliest();
    }
    const now = this.#deps.clock.now();
    // A failing endpoint is checked for disabling when its window ends (a disabling under way at once,
    // a failed call a minute later); unresolved events as soon as the directory may answer. While it
    // cannot be read, nothing that needs it is due before the next read.
    const failing = this.book.failingSince();
    const directory = [
      this.book.earliest(),
      failing === undefined
        ? undefined
        : Math.max(failing + timing.disableAfterMs, this.#disableTriedAt + DISABLE_RETRY_MS),
      this.book.disablingEndpoints().length === 0 ? undefined : this.#disableTriedAt + DISABLE_RETRY_MS,
      this.book.unresolved(1).length === 0 ? undefined : Math.max(now, this.#resolveFailedAt + ENDPOINTS_RETRY_MS),
    ].filter((at): at is number => at !== undefined);
    const unreadable = this.#unreadableUntil();
    const candidates = directory.map((at) => Math.max(at, unreadable ?? at));
    // Pruning runs when the oldest finished row is past retention, at most hourly (at once with a backlog).
    const oldest = this.book.oldestFinished();
    if (oldest !== undefined)
      candidates.push(
        this.#pruneBacklog ? now : Math.max(this.book.prunedAt() + PRUNE_EVERY_MS, oldest + timing.retentionMs),
      );
    return candidates.length === 0 ? undefined : Math.min(...candidates);
  }

  async #scan(): Promise<void> {
    const harness = this.#harness;
    if (harness === undefined) return;
    for (;;) {
      const page = await harness.storage.readList<OutboxEvent>(bind(outboxList, {}), {
        after: this.book.cursor(),
        limit: 100,
      });
      this.book.materialize(
        page.items.map((item) => ({ element: item.id, event: item.value })),
        this.#deps.clock.now(),
      );
      if (page.items.length < 100) return;
    }
  }

  async #round(): Promise<void> {
    const harness = this.#harness;
    const where = this.#where();
    if (harness === undefined || where === undefined) return;
    await this.#scan();
    if (!this.book.present) return;
    await this.#prune(harness);
    const endpoints = await this.endpoints();
    // An unreadable directory is an outage, not "no endpoints": every row stays, the alarm asks again.
    if (endpoints === undefined) return;
    await this.#resolve(harness, endpoints);
    const byId = new Map(endpoints.map((endpoint) => [endpoint.id, endpoint]));
    const sender = new OutboxSender({
      book: this.book,
      clock: this.#deps.clock,
      timing: this.#config,
      fetch: this.#deps.fetch,
      event: (element) => this.#eventAt(harness, element),
      secrets: (endpoint) => this.#secrets(where.tenant, endpoint),
    });
    await sender.round(byId);
    await this.#disableFailing(harness, where.tenant, endpoints);
    const next = this.book.earliest();
    if (next !== undefined && next <= this.#deps.clock.now()) this.#again = true;
  }

  async #eventAt(harness: Harness, element: Id): Promise<OutboxEvent | undefined> {
    const page = await harness.storage.readList<OutboxEvent>(bind(outboxList, {}), { after: element - 1, limit: 1 });
    return page.items.find((item) => item.id === element)?.value;
  }

  /**
   * Events committed while the endpoints were unknown get the rows of the endpoints matching now; one
   * that matches none is removed (the removal commits before its record goes: a kill between repeats it).
   */
  async #resolve(harness: Harness, endpoints: readonly SessionEndpoint[]): Promise<void> {
    const enabled = endpoints.filter((endpoint) => endpoint.enabled);
    for (;;) {
      const elements = this.book.unresolved(100);
      if (elements.length === 0) return;
      const none: Id[] = [];
      for (const element of elements) {
        const event = await this.#eventAt(harness, element);
        const to =
          event === undefined
            ? []
            : enabled.filter((endpoint) => endpoint.events.includes(event.type)).map((endpoint) => endpoint.id);
        if (event === undefined || to.length === 0) none.push(element);
        else this.book.resolve(element, event, to, this.#deps.clock.now());
      }
      if (none.length > 0) {
        try {
          await harness.commit((tx) => {
            for (const element of none) tx.list(outboxList).remove(element);
          }, BACKGROUND_CONTEXT);
        } catch (error) {
          this.#deps.report(error);
          this.#resolveFailedAt = this.#deps.clock.now();
          return;
        }
        this.book.dropUnresolved(none);
      }
      if (elements.length < 100) return;
    }
  }

  async #secrets(tenant: string, endpoint: SessionEndpoint): Promise<string[]> {
    const open = (sealed: SessionEndpoint["secret"]): Promise<string> => {
      const key = `${endpoint.id}:${sealed.kid}:${sealed.ct}`;
      let opened = this.#opened.get(key);
      if (opened === undefined) {
        opened = openSecret(this.#deps.env, endpointSealContext(tenant, endpoint.id), sealed);
        opened.catch(() => this.#opened.delete(key));
        this.#opened.set(key, opened);
      }
      return opened;
    };
    const current = await open(endpoint.secret);
    const previous =
      endpoint.previousSecret !== undefined && (endpoint.previousSecretExpiresAt ?? 0) > this.#deps.clock.now()
        ? await open(endpoint.previousSecret)
        : undefined;
    return previous === undefined ? [current] : [current, previous];
  }

  /**
   * Endpoints failing for the disable window: disabled in the directory, their rows here die, and
   * `delivery.disabled` is committed for the endpoints subscribed to it. The disabling is recorded
   * before the directory is asked and ends with that commit (or with the answer that nothing is to be
   * sent), so a kill anywhere between picks it up again; an answer a kill or a failed call lost is
   * re-derived from the endpoint as the directory shows it (disabled, for this reason, since the streak
   * began). An endpoint disabled or deleted elsewhere ends its rows here; one re-enabled since its
   * streak began starts a new streak.
   */
  async #disableFailing(harness: Harness, tenant: string, endpoints: readonly SessionEndpoint[]): Promise<void> {
    const byId = new Map(endpoints.map((endpoint) => [endpoint.id, endpoint]));
    const ids = new Set([...this.book.failingEndpoints(), ...this.book.disablingEndpoints()]);
    for (const id of ids) {
      const now = this.#deps.clock.now();
      const endpoint = byId.get(id);
      let intent = this.book.disablingOf(id);
      const again = intent !== undefined;
      if (intent === undefined) {
        const failing = this.book.failing(id);
        if (endpoint === undefined || !endpoint.enabled) {
          this.book.abandon(id, endpoint === undefined ? "endpoint deleted" : "endpoint disabled", now);
          continue;
        }
        if (failing === undefined || now - failing.since < this.#config.disableAfterMs) continue;
        const hours = Math.round(this.#config.disableAfterMs / HOUR_MS);
        const reason = `deliveries failed for ${hours} h (last status ${failing.lastStatus ?? "none"})`;
        intent = this.book.disabling(id, failing.since, failing.lastStatus, reason);
      }
      let disabled = intent.disabled;
      let fresh: readonly SessionEndpoint[] | undefined;
      if (disabled === undefined) {
        this.#disableTriedAt = now;
        let answer: boolean;
        try {
          answer = (await this.#deps.disable(tenant, id, intent.since, intent.reason)).disabled;
        } catch (error) {
          this.#deps.report(error);
          continue;
        }
        if (answer) this.book.disabledAnswer(id, true);
        fresh = await this.endpoints(true);
        if (fresh === undefined) continue;
        if (!answer && again) answer = disabledFor(fresh, intent);
        if (!answer) this.book.disabledAnswer(id, false);
        disabled = answer;
      }
      fresh ??= await this.endpoints(true);
      if (fresh === undefined) continue;
      const after = fresh.find((other) => other.id === id);
      if (after?.enabled === true) {
        this.book.restartStreak(id, this.#deps.clock.now());
        this.book.disablingDone(id);
        continue;
      }
      this.book.abandon(id, after === undefined ? "endpoint deleted" : "endpoint disabled", this.#deps.clock.now());
      const to = fresh
        .filter((other) => other.enabled && other.id !== id && other.events.includes("delivery.disabled"))
        .map((other) => other.id);
      if (!disabled || to.length === 0) {
        this.book.disablingDone(id);
        continue;
      }
      const data: JsonObject = {
        endpointId: id,
        failingSince: new Date(intent.since).toISOString(),
        lastStatusCode: intent.lastStatus ?? null,
      };
      // Its materializing (committed, or the scan after a kill) ends the disabling.
      await harness
        .commit((tx) => {
          const element = harness.storage.lastSeq + 1;
          tx.list(outboxList).append(this.#event("delivery.disabled", data, to, harness.now(), element, element));
        }, BACKGROUND_CONTEXT)
        .catch((error: unknown) => this.#deps.report(error));
    }
  }

  /**
   * At most hourly (at once while a backlog remains): events whose every row is done or dead past
   * retention go, in commits of PRUNE_BATCH, each removal committed before the rows are deleted (a kill
   * between removes them again, harmlessly), up to PRUNE_BATCHES commits a round.
   */
  async #prune(harness: Harness): Promise<void> {
    const now = this.#deps.clock.now();
    const oldest = this.book.oldestFinished();
    if (
      oldest === undefined ||
      oldest + this.#config.retentionMs > now ||
      (!this.#pruneBacklog && now - this.book.prunedAt() < PRUNE_EVERY_MS)
    )
      return;
    this.#pruneBacklog = false;
    for (let batch = 0; batch < PRUNE_BATCHES; batch++) {
      const gone = this.book.prunable(now - this.#config.retentionMs, PRUNE_BATCH, now);
      if (gone.length === 0) return;
      try {
        await harness.commit((tx) => {
          for (const element of gone) tx.list(outboxList).remove(element);
        }, BACKGROUND_CONTEXT);
      } catch (error) {
        this.#deps.report(error);
        return;
      }
      this.book.forgetEvents(gone);
      if (gone.length < PRUNE_BATCH) return;
    }
    this.#pruneBacklog = true;
  }

  // Operator operations ---------------------------------------------------------------------------

  async deliveries(query: {
    readonly status?: DeliveryStatus;
    readonly endpoint?: string;
    readonly limit: number;
  }): Promise<DeliveryView[]> {
    await this.#scan();
    return this.book.list(query).map(deliveryView);
  }

  async retry(id: string): Promise<DeliveryView> {
    const parsed = parseDeliveryId(id);
    const row = parsed === undefined ? undefined : this.book.get(parsed.element, parsed.endpoint);
    if (parsed === undefined || row === undefined)
      throw new Problem("delivery_not_found", `this session has no delivery ${id}`, "id");
    // A read that fails is answered as the failure it is (never "deleted").
    const where = this.#where();
    const endpoints = where === undefined ? [] : await this.#refresh(where);
    const endpoint = endpoints.find((candidate) => candidate.id === parsed.endpoint);
    if (endpoint === undefined)
      throw new Problem("endpoint_not_found", `endpoint ${parsed.endpoint} was deleted`, "id");
    if (!endpoint.enabled)
      throw new Problem(
        "endpoint_disabled",
        `endpoint ${endpoint.id} is disabled; PATCH it with enabled: true first`,
        "id",
      );
    this.book.retry(parsed.element, parsed.endpoint, this.#deps.clock.now());
    this.#deps.due(this.#deps.clock.now());
    this.kick();
    await this.#running;
    const after = this.book.get(parsed.element, parsed.endpoint);
    return deliveryView(after ?? row);
  }
}

/** Whether the directory shows `intent`'s endpoint disabled for its reason since its streak began (an answer a kill lost). */
function disabledFor(
  endpoints: readonly SessionEndpoint[],
  intent: { readonly endpoint: string; readonly since: number; readonly reason: string },
): boolean {
  const endpoint = endpoints.find((other) => other.id === intent.endpoint);
  return (
    endpoint !== undefined &&
    !endpoint.enabled &&
    endpoint.disabledReason === intent.reason &&
    (endpoint.disabledAt ?? 0) >= intent.since
  );
}

export function outboxOps<S>(outbox: () => Outbox): {
  readonly [K in keyof OutboxSessionOps]: (
    session: S,
    ...args: OutboxSessionOps[K]["args"]
  ) => Promise<OutboxSessionOps[K]["result"]>;
} {
  return {
    deliveries: (_s, query) => outbox().deliveries(query),
    retryDelivery: (_s, id) => outbox().retry(id),
  };
}

/** The outbox of a session object: its storage, its tenant's directory, the host's fetch and reports. */
export function objectOutbox(
  ctx: DurableObjectState,
  env: Env,
  clock: Clock,
  where: OutboxDeps["where"],
  due: OutboxDeps["due"],
): Outbox {
  return new Outbox({
    env,
    clock,
    host: ctx.storage,
    objectId: ctx.id.toString(),
    where,
    endpoints: (tenant, session) => directoryStub(env, tenant).sessionEndpoints(session),
    disable: (tenant, endpoint, since, reason) => directoryStub(env, tenant).disableEndpoint(endpoint, since, reason),
    fetch: hostFetch(),
    due,
    report: (error) => hostReport({ type: "harness", report: error }),
  });
}
