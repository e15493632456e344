/**
 * Inputs inside the session Durable Object (docs/api.md "Inputs", §3.4): the operations behind
 * `POST .../conversations/{conversation}/inputs` (accept, optionally waiting for the result),
 * `GET/DELETE .../inputs/{id}` and the acceptance lookup by request key, over the open session's
 * SessionApi. With them the worker's acceptance index (which conversation an accepted input went to,
 * and the hash of the request that accepted it) and the request keys of its sources.
 *
 * An accept resolves its conversation before it writes; a reused Idempotency-Key (another conversation,
 * another body) is refused inside the accepting commit, before anything is written.
 */
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import type { UserInput } from "../../core/entries.js";
import type { TxBuilder } from "../../core/tx.js";
import {
  bindResult,
  isTerminalResult,
  priorAcceptance,
  queueInput,
  type Acceptance,
  type InputResult,
  type QueuedInput,
} from "../../core/inbox.js";
import { bindTo, sessionValue, withKey, type ValueSpec } from "../../core/state.js";
import { acceptInput, type WhenBusy } from "../../kinds/placement.js";
import { presentEntry } from "../../kinds/stored.js";
import type { Entry, Id, JsonValue } from "../../storage/records.js";
import type { AcceptResponse } from "../../api/responses.js";
import { Problem } from "../problems.js";
import type { ConversationRef, SessionApi } from "./api.js";
import type { ReplayKey, Replays } from "./replays.js";
import type { OfferedTool } from "../../kinds/catalog-types.js";
import { addressKey } from "../../storage/shared.js";
import { sessionKey } from "../../kinds/incarnation.js";
import type { Payer, Reserved, ReserveInput } from "../limits/admission.js";
import { hostReport } from "../platform/host-config.js";

/**
 * The worker's acceptance index: which conversation an input accepted over HTTP went to, so
 * `GET inputs/{id}` is one point read, and the hash of the request that accepted it under an
 * Idempotency-Key, so a reuse of the key with another body is refused (the HTTP layer's rule; the core's
 * `acceptance()` compares nothing, §3.4).
 */
export interface InputIndexEntry {
  readonly conversationId: Id;
  readonly requestHash?: string;
}
const inputIndexBase = sessionValue<InputIndexEntry>("edge.input");
export function inputIndex(inputId: Id): ValueSpec<InputIndexEntry> {
  return withKey(inputIndexBase, String(inputId));
}

/** Request keys from different sources live in separate namespaces (§3.4, docs/api.md "Idempotency-Key"). */
export type RequestSource =
  | { readonly type: "idempotency"; readonly key: string }
  /** A chat message's id (http/routes/chat.ts): a resend of the message is the same input. */
  | { readonly type: "chat"; readonly id: string }
  | { readonly type: "webhook"; readonly id: string }
  | { readonly type: "inbound"; readonly endpoint: string; readonly id: string };

export function requestId(source: RequestSource): string {
  switch (source.type) {
    case "idempotency":
      return `idem:${source.key}`;
    case "chat":
      return `chat:${source.id}`;
    case "webhook":
      return `webhook:${source.id}`;
    case "inbound":
      // The endpoint name cannot contain ":", so no two (endpoint, id) pairs share a key.
      return `inbound:${source.endpoint}:${source.id}`;
    default: {
      const never: never = source;
      return never;
    }
  }
}

export interface AcceptRequest {
  readonly input: UserInput;
  /** The user entry's `data` (never model input, §2.1): an inbound delivery's payload and source. */
  readonly data?: JsonValue;
  readonly mode?: "steer" | "followUp" | "nextRun";
  readonly whenBusy?: WhenBusy;
  readonly source?: RequestSource;
  /** The id the sender shows the message under (a chat message's id): its user entry's key. */
  readonly messageId?: string;
  /**
   * With an idempotency source: the hash of the request body. A prior acceptance of the same key with
   * another hash, or on another conversation, is 422 `idempotency_key_reused` (IETF Idempotency-Key).
   */
  readonly requestHash?: string;
  /**
   * With an inbound source: the delivery's signature where it alone tells a replay (GitHub's signs no timestamp and
   * not the delivery id). A signature the endpoint accepted within the replay window is a duplicate of that input
   * (session/replays.ts).
   */
  readonly signature?: string;
  /** Wait up to this many seconds for a terminal result. */
  readonly waitSeconds?: number;
  /** Client tools the page offers for this input's turn only (an AG-UI run's `tools`, kinds/run-tools.ts). */
  readonly runTools?: readonly OfferedTool[];
}

/** An input as `GET .../inputs/{id}` answers it. */
export interface InputView {
  inputId: Id;
  conversationId: Id;
  result: InputResult;
  /** With a done result: the answer's text (outputTextOf). */
  outputText?: string;
}

/** The text of an answer entry: the text blocks of its assistant messages, joined (undefined: no model messages). */
export function outputTextOf(entry: Entry | undefined): string | undefined {
  if (entry?.model === undefined) return undefined;
  const parts: string[] = [];
  for (const message of entry.model) {
    if (message.role !== "assistant") continue;
    for (const block of message.content) if (block.type === "text") parts.push(block.text);
  }
  return parts.join("");
}

/** A done result's answer entry as the API shows it (undefined for any other status). */
async function answerOf(api: SessionApi, result: InputResult | undefined): Promise<Entry | undefined> {
  if (result?.status !== "done" || result.answer === undefined) return undefined;
  const stored = await api.harness.getEntry(result.answer, call);
  return stored === undefined ? undefined : presentEntry(stored);
}

/**
 * Who pays for an input when the tenant limits something (the Worker passes it only then): the payer, and the
 * session's name (with the incarnation, the key its reservations are made under: limits/admission.ts).
 */
export interface InputAdmission {
  readonly payer: Payer;
  readonly session: string;
}

/** The input operations of the session's op table (session/ops.ts): arguments and results. */
export interface InputSessionOps {
  accept: {
    readonly args: [ref: ConversationRef, request: AcceptRequest, admission?: InputAdmission];
    readonly result: AcceptResponse;
  };
  input: { readonly args: [inputId: Id]; readonly result: InputView };
  withdraw: { readonly args: [inputId: Id]; readonly result: InputView };
  acceptance: { readonly args: [source: RequestSource]; readonly result: Acceptance };
  /**
   * A request failed before the session answered (its object restarted): give its reservation back when this session
   * never accepted the request key.
   */
  unreserve: {
    readonly args: [source: RequestSource, admission: InputAdmission];
    readonly result: { readonly released: boolean };
  };
}

/** What the input operations need of the open session besides its API: its limits reservations. */
export interface InputLimits {
  readonly reserve: ReserveInput;
  /** Cancel the reservation of `requestId` under session key `session` (false: there was none). */
  readonly unreserve: (session: string, payer: Payer, requestId: string) => Promise<boolean>;
}

const call: Call = BACKGROUND_CONTEXT;

/**
 * The Idempotency-Key rule (IETF draft): a key names one request. Its reuse on another conversation, or
 * with another body, throws before anything is written. An acceptance indexed without a hash (before
 * hashes were kept) is matched on the conversation only.
 */
async function checkReuse(
  b: TxBuilder,
  prior: Acceptance,
  conversationId: Id,
  requestHash: string | undefined,
): Promise<void> {
  if (prior.conversationId !== conversationId) {
    throw new Problem(
      "idempotency_key_reused",
      `this Idempotency-Key was used on conversation ${prior.conversationId}; use a new key for a new request`,
      "idempotency-key",
    );
  }
  const indexed = await b.value(inputIndex(prior.inputId)).get();
  if (requestHash !== undefined && indexed?.requestHash !== undefined && indexed.requestHash !== requestHash) {
    throw new Problem(
      "idempotency_key_reused",
      "this Idempotency-Key was used with a different body; use a new key for a new request",
      "idempotency-key",
    );
  }
}

/** The signature an accept de-duplicates on besides its request key: an inbound delivery's, when it has one. */
function replayKey(request: AcceptRequest): ReplayKey | undefined {
  const { source, signature } = request;
  return source?.type === "inbound" && signature !== undefined ? { endpoint: source.endpoint, signature } : undefined;
}

/**
 * Reserve the input under the tenant's limits when the Worker says something is limited (`admission`): not for a
 * request key this session accepted before (a retry: it was admitted when it was accepted, and makes no limits call).
 */
async function reserveFor(
  session: AcceptSession,
  key: string | undefined,
  admission: InputAdmission | undefined,
): Promise<Reserved | undefined> {
  if (admission === undefined) return undefined;
  if (key !== undefined && (await session.api.harness.acceptance(key, call)) !== undefined) return undefined;
  return session.limits.reserve(sessionKey(admission.session, session.incarnation), admission.payer, key);
}

/**
 * Where an accept puts its input when that place is made for it (a chat's fork, session/chat-ops.ts): made after the
 * input was admitted (limits reserved, its request key checked), so a refused input makes nothing, and undone when the
 * accepting commit refuses it after all. `source`: the request key, when it names the place (`{messageId}@{fork}`).
 */
export interface AcceptOpening {
  /** Refuse what the accepting commit would refuse, before anything is made (a request key used elsewhere). */
  check(): Promise<void>;
  open(): Promise<{ readonly conversationId: Id; readonly source?: RequestSource }>;
  undo(conversationId: Id): Promise<void>;
}

/** What an accept needs of the open session. */
export interface AcceptSession {
  readonly api: SessionApi;
  readonly replays: Replays;
  readonly incarnation: string | undefined;
  readonly limits: InputLimits;
}

/**
 * The reservation of a request key, shared by the requests of this instance that carry the key: a shard reserves a key
 * once (the first of them gets `Reserved`, the others ride on it), and it counts whichever of them the session
 * accepts. A refused request gives it back only when no acceptance holds the key and no other request with the key is
 * still under way (the last one to leave gives it back, whoever reserved it).
 */
interface KeyHold {
  requests: number;
  reserved: Reserved | undefined;
}
const keyHolds = new WeakMap<InputLimits, Map<string, KeyHold>>();

function holdsOf(limits: InputLimits): Map<string, KeyHold> {
  let holds = keyHolds.get(limits);
  if (holds === undefined) keyHolds.set(limits, (holds = new Map()));
  return holds;
}

/**
 * Accept `request` into conversation `ref`, or, with an `opening`, into the conversation it opens once the input was
 * admitted (`ref` is then the conversation it is made from: its profile must read).
 */
export async function accept(
  session: AcceptSession,
  ref: ConversationRef,
  initial: AcceptRequest,
  admission: InputAdmission | undefined,
  opening?: AcceptOpening,
): Promise<AcceptResponse> {
  const { api, replays } = session;
  const harness = api.harness;
  const handle = await api.conversation(ref);
  let conversationId = handle.id;
  let request = initial;
  // The key the request came with (the one its reservation is held under); an opening may name another.
  const held = request.source === undefined ? undefined : requestId(request.source);
  let key = held;
  const replay = replayKey(request);
  await api.readProfile(conversationId);
  await opening?.check();
  const holds = holdsOf(session.limits);
  const hold = held === undefined ? undefined : (holds.get(held) ?? { requests: 0, reserved: undefined });
  if (held !== undefined && hold !== undefined) {
    hold.requests += 1;
    holds.set(held, hold);
  }
  let reserved: Reserved | undefined;
  try {
    reserved = await reserveFor(session, held, admission);
  } catch (error) {
    leave(holds, held, hold);
    throw error;
  }
  /** A refused request gives back its reservation: a key's only when no acceptance holds it and it is the last. */
  const refused = async (): Promise<void> => {
    if (hold === undefined || held === undefined) await giveBack(reserved);
    else if (leave(holds, held, hold) && (await harness.acceptance(held, call)) === undefined)
      await giveBack(hold.reserved);
  };
  if (hold !== undefined && reserved !== undefined) hold.reserved = reserved;
  let opened = false;
  if (opening !== undefined) {
    try {
      const place = await opening.open();
      conversationId = place.conversationId;
      if (place.source !== undefined) {
        request = { ...request, source: place.source };
        key = requestId(place.source);
      }
      opened = true;
    } catch (error) {
      await refused();
      throw error;
    }
  }
  let replayed = false;
  const accepting = harness.commitBound(call, { conversationId }, async (b) => {
    const prior = await priorAcceptance(b, key);
    if (prior !== undefined) {
      if (request.source?.type === "idempotency" || request.source?.type === "chat")
        await checkReuse(b, prior, conversationId, request.requestHash);
      return { inputId: prior.inputId, conversationId: prior.conversationId, duplicate: true };
    }
    // A replay under a new delivery id is answered as a redelivery is, and writes nothing.
    const seen = replay === undefined ? undefined : await replays.seen(b, replay);
    replayed = seen !== undefined;
    if (seen !== undefined) return { inputId: seen.inputId, conversationId: seen.conversationId, duplicate: true };
    let inputId: Id;
    if (request.mode === undefined) {
      const accepted = await acceptInput(
        b,
        conversationId,
        {
          input: request.input,
          ...(request.data === undefined ? {} : { data: request.data }),
          ...(key === undefined ? {} : { requestId: key }),
          ...(request.messageId === undefined ? {} : { messageId: request.messageId }),
          ...(request.whenBusy === undefined ? {} : { whenBusy: request.whenBusy }),
          ...(request.runTools === undefined ? {} : { runTools: request.runTools }),
        },
        api.kit.options,
        harness.now(),
      );
      inputId = accepted.inputId;
    } else {
      const item: QueuedInput = {
        mode: request.mode,
        input: request.input,
        ...(request.data === undefined ? {} : { data: request.data }),
        ...(key === undefined ? {} : { requestId: key }),
        ...(request.messageId === undefined ? {} : { messageId: request.messageId }),
      };
      inputId = queueInput(b, conversationId, item);
    }
    b.value(inputIndex(inputId)).set({
      conversationId,
      ...(request.requestHash === undefined ? {} : { requestHash: request.requestHash }),
    });
    if (replay !== undefined) await replays.record(b, replay, { inputId, conversationId });
    return { inputId, conversationId, duplicate: false };
  });
  // A refused input gives back what it reserved, and so does a replay (not a new input). A reservation of a request
  // key is the key's: a duplicate keeps it (a concurrent request with the key reserved it once and was accepted), and a
  // refusal gives it back only when no acceptance holds the key and it is the last request with the key under way.
  const receipt = await accepting.catch(async (error: unknown) => {
    await refused();
    // What the opening made for the input goes with it (a fork and the pointer move of a refused edit); an undo that
    // fails is an outage, and says so instead of the refusal.
    if (opened) await opening?.undo(conversationId);
    throw error;
  });
  if (hold !== undefined && held !== undefined) {
    // Accepted (or a duplicate): the reservation counts the key's accepted input.
    hold.reserved = undefined;
    leave(holds, held, hold);
  }
  if (replayed) await giveBack(reserved);
  if (replay !== undefined && !receipt.duplicate) await replays.settled();
  let result = await readResult(api, receipt.conversationId, receipt.inputId);
  if (request.waitSeconds !== undefined && request.waitSeconds > 0 && !isTerminalResult(result)) {
    result = await waitResult(api, receipt.conversationId, receipt.inputId, request.waitSeconds * 1000);
  }
  const answer = await answerOf(api, result);
  const outputText = outputTextOf(answer);
  return {
    inputId: receipt.inputId,
    conversationId: receipt.conversationId,
    status: result?.status ?? "queued",
    duplicate: receipt.duplicate,
    result,
    ...(answer === undefined || request.waitSeconds === undefined ? {} : { answer }),
    ...(outputText === undefined ? {} : { outputText }),
  };
}

/** A request with `key` ended: whether it was the last one under way (then the key's hold is forgotten). */
function leave(holds: Map<string, KeyHold>, key: string | undefined, hold: KeyHold | undefined): boolean {
  if (key === undefined || hold === undefined) return true;
  hold.requests -= 1;
  if (hold.requests > 0) return false;
  if (holds.get(key) === hold) holds.delete(key);
  return true;
}

async function giveBack(reserved: Reserved | undefined): Promise<void> {
  await reserved?.cancel().catch((error: unknown) => hostReport({ type: "admission_failed", error }));
}

async function input(api: SessionApi, inputId: Id): Promise<InputView> {
  const conversationId = await inputConversation(api, inputId);
  const result = conversationId === undefined ? undefined : await readResult(api, conversationId, inputId);
  if (conversationId === undefined || result === undefined)
    throw new Problem("input_not_found", `input ${inputId} does not exist`, "inputId");
  const outputText = outputTextOf(await answerOf(api, result));
  return { inputId, conversationId, result, ...(outputText === undefined ? {} : { outputText }) };
}

async function withdraw(api: SessionApi, inputId: Id): Promise<InputView> {
  const { conversationId, result } = await input(api, inputId);
  if (result.status !== "queued")
    throw new Problem(
      "input_not_queued",
      `input ${inputId} is ${result.status}, not queued; only a queued input can be withdrawn`,
    );
  const handle = await api.conversation(conversationId);
  const outcome = await handle.abortInput(inputId, call);
  if (outcome === "not_found")
    throw new Problem("input_not_queued", `input ${inputId} was placed before it could be withdrawn`);
  return input(api, inputId);
}

async function acceptance(api: SessionApi, source: RequestSource): Promise<Acceptance> {
  const found = await api.harness.acceptance(requestId(source), call);
  if (found === undefined)
    throw new Problem("acceptance_not_found", "no input was accepted with this request key", "requestKey");
  return found;
}

/**
 * The conversation an input belongs to: the index every HTTP and webhook accept writes, else the root
 * (inputs queued by code inside the session). Never a scan: an unknown id costs two point reads.
 */
async function inputConversation(api: SessionApi, inputId: Id): Promise<Id | undefined> {
  const storage = api.harness.storage;
  const indexed = (await storage.getValue(bindTo(inputIndex(inputId), api.harness.rootId)))?.value;
  if (indexed !== undefined) return indexed.conversationId;
  const root = api.harness.rootId;
  return (await storage.getValue(bindResult(root, inputId))) === undefined ? undefined : root;
}

async function readResult(api: SessionApi, conversationId: Id, inputId: Id): Promise<InputResult | undefined> {
  return (await api.harness.storage.getValue(bindResult(conversationId, inputId)))?.value;
}

/**
 * Wait for the result: read it once, then look only at commits that write it (their own write carries the value, so a
 * commit that does not touch it costs no read), until it is terminal or the time is up.
 */
function waitResult(api: SessionApi, conversationId: Id, inputId: Id, ms: number): Promise<InputResult | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (result: InputResult | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stop();
      resolve(result);
    };
    const timer = setTimeout(
      () => void readResult(api, conversationId, inputId).then(finish, () => finish(undefined)),
      ms,
    );
    const target = addressKey(bindResult(conversationId, inputId));
    const stop = api.harness.onCommit((commit) => {
      if (commit.batch.kind !== "main") return;
      for (const write of commit.batch.writes) {
        if (write.type !== "value.set" || addressKey(write.addr) !== target) continue;
        const result = write.value as unknown as InputResult;
        if (isTerminalResult(result)) finish(result);
      }
    });
    // A result that became terminal before the listener was added is in storage.
    void readResult(api, conversationId, inputId).then(
      (result) => {
        if (isTerminalResult(result)) finish(result);
      },
      () => undefined,
    );
  });
}

/** The input entries of the SessionObject's op table, over the open session's SessionApi. */
export function inputOps<S extends AcceptSession>(): {
  readonly [K in keyof InputSessionOps]: (
    session: S,
    ...args: InputSessionOps[K]["args"]
  ) => Promise<InputSessionOps[K]["result"]>;
} {
  return {
    accept: (s, ref, request, admission) => accept(s, ref, request, admission),
    input: (s, id) => input(s.api, id),
    withdraw: (s, id) => withdraw(s.api, id),
    acceptance: (s, source) => acceptance(s.api, source),
    unreserve: async (s, source, admission) => {
      const key = requestId(source);
      if ((await s.api.harness.acceptance(key, call)) !== undefined) return { released: false };
      return {
        released: await s.limits.unreserve(sessionKey(admission.session, s.incarnation), admission.payer, key),
      };
    },
  };
}
