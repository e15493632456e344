/**
 * The typed client against the real worker, for every route (docs/api.md "Typed
 * client"): one scenario calls every method of the client once, in the order a frontend,
 * an operator, a mayor and an external agent would, through the Worker's own fetch. Every response that
 * passes is matched to its route in API_ROUTES (src/api/openapi.ts) and its body is parsed with that
 * route's strict response schema for its status, so a field the server adds, drops or retypes fails here.
 * Then: the methods called are exactly the client's methods, and the routes reached are exactly the API's
 * routes minus the documented exclusions.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { API_ROUTES } from "../../src/api/openapi.js";
import type { ApiRoute } from "../../src/api/openapi-route.js";
import { problemBody } from "../../src/api/problems.js";
import { CLIENT_EXCLUDED_OPERATIONS, PicoClient, SessionClient } from "../../src/client/client.js";
import { ConversationClient } from "../../src/client/conversation.js";
import { RigClient } from "../../src/client/rig.js";
import { PicoApiError } from "../../src/client/transport.js";
import { InboundClient } from "../../src/client/inbound.js";
import { InboundEndpointsClient } from "../../src/client/inbound-endpoints.js";
import { DeliveriesClient, WebhookEndpointsClient } from "../../src/client/webhook-endpoints.js";
import { ToolsClient } from "../../src/client/tools.js";
import { EndUserClient } from "../../src/client/end-users.js";
import { McpServersClient } from "../../src/client/mcp-servers.js";
import { LimitsClient } from "../../src/client/limits.js";
import { IssuersClient } from "../../src/client/issuers.js";
import { ApiKeysClient } from "../../src/client/api-keys.js";
import { McpTestServer, mcpFetch } from "./mcp-fixtures.js";
import { UsersClient } from "../../src/client/users.js";
import type { ConversationView, SessionView } from "../../src/client/index.js";
import { BASE, token, uniqueSession, until, workerFetch } from "./http-fixtures.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
  vi.restoreAllMocks();
});

const TENANT = "client-e2e";

/** A route's path template as a regular expression over a URL path. */
function routePattern(route: ApiRoute): RegExp {
  const source = route.path
    .split("/")
    .map((part) => (/^\{[A-Za-z]+\}$/.test(part) ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}$`);
}

const PATTERNS = API_ROUTES.map((route) => ({ route, pattern: routePattern(route) }));

function routeOf(method: string, path: string): ApiRoute {
  const found = PATTERNS.filter(({ route, pattern }) => route.method === method.toLowerCase() && pattern.test(path));
  if (found.length !== 1) throw new Error(`${method} ${path} matches ${found.length} routes`);
  return (found[0] as { route: ApiRoute }).route;
}

interface Exchange {
  readonly operationId: string;
  readonly status: number;
  /** Resolves to what is wrong with the response (undefined: nothing); never rejects. */
  readonly problem: Promise<string | undefined>;
}

/**
 * A fetch through the Worker that checks every response against its route's declared response; a
 * problem (4xx/5xx) is checked against the strict problem schema and listed in `failures`.
 */
function checkingFetch(exchanges: Exchange[], failures: string[]): (request: Request) => Promise<Response> {
  return async (request) => {
    const url = new URL(request.url);
    const route = routeOf(request.method, url.pathname);
    const response = await workerFetch(request);
    const declared = route.responses[response.status];
    const where = `${request.method} ${url.pathname} (${route.operationId}) answered ${response.status}`;
    const type = response.headers.get("content-type") ?? "";
    let problem: Promise<string | undefined>;
    if (declared === undefined && response.status >= 400) {
      problem = response
        .clone()
        .text()
        .then((text) => {
          failures.push(`${route.operationId} ${response.status}`);
          if (!type.startsWith("application/problem+json")) return `${where} with content-type ${type}`;
          const parsed = problemBody.safeParse(JSON.parse(text));
          return parsed.success
            ? undefined
            : `${where}: the problem does not match its strict schema: ${JSON.stringify(parsed.error.issues)}\n${text}`;
        });
    } else if (declared === undefined) {
      problem = response
        .clone()
        .text()
        .then((text) => `${where}, not a declared success: ${text}`);
    } else if ("json" in declared) {
      const schema = declared.json;
      problem = response
        .clone()
        .text()
        .then((text) => {
          if (!type.startsWith("application/json")) return `${where} with content-type ${type}`;
          const parsed = schema.safeParse(JSON.parse(text));
          return parsed.success
            ? undefined
            : `${where}: the body does not match its strict schema: ${JSON.stringify(parsed.error.issues)}\n${text}`;
        });
    } else if ("stream" in declared) {
      problem = Promise.resolve(type.startsWith(declared.stream) ? undefined : `${where} with content-type ${type}`);
    } else {
      problem = Promise.resolve(undefined);
    }
    exchanges.push({ operationId: route.operationId, status: response.status, problem });
    return response;
  };
}

/** Every method of a client class (its prototype's functions, not getters). */
function methodsOf(owner: string, prototype: object): string[] {
  return Object.entries(Object.getOwnPropertyDescriptors(prototype))
    .filter(([name, descriptor]) => name !== "constructor" && typeof descriptor.value === "function")
    .map(([name]) => `${owner}.${name}`);
}

const CLASSES: Readonly<Record<string, { prototype: object }>> = {
  PicoClient,
  SessionClient,
  ConversationClient,
  RigClient,
  InboundClient,
  InboundEndpointsClient,
  ToolsClient,
  WebhookEndpointsClient,
  DeliveriesClient,
  EndUserClient,
  McpServersClient,
  LimitsClient,
  UsersClient,
  IssuersClient,
  ApiKeysClient,
};

/** Spy on every client method (calling through) and record which ones ran. */
function recordCalls(): Set<string> {
  const called = new Set<string>();
  for (const [owner, constructor] of Object.entries(CLASSES)) {
    const prototype = constructor.prototype as Record<string, (...args: unknown[]) => unknown>;
    for (const method of methodsOf(owner, prototype)) {
      const name = method.slice(owner.length + 1);
      const original = prototype[name] as (...args: unknown[]) => unknown;
      vi.spyOn(prototype, name).mockImplementation(function (this: unknown, ...args: unknown[]) {
        called.add(method);
        return original.apply(this, args);
      });
    }
  }
  return called;
}

async function clientFor(
  role: "client" | "operator" | "mayor" | "agent",
  exchanges: Exchange[],
  failures: string[],
  agent?: { readonly id: string; readonly session: string },
): Promise<PicoClient> {
  const jwt = await token(TENANT, role, agent === undefined ? {} : { agent: agent.id, sessions: [agent.session] });
  return new PicoClient({ baseUrl: BASE, token: jwt, fetch: checkingFetch(exchanges, failures) });
}

/** Run `watch` until `ready` says its view is there, then close it. */
async function watchUntil<View>(
  open: (onChange: (view: View) => void) => { close(): void; done: Promise<void> },
  ready: (view: View) => boolean,
): Promise<View> {
  let resolveView: (view: View) => void = () => undefined;
  const seen = new Promise<View>((resolve) => (resolveView = resolve));
  const watch = open((view) => {
    if (ready(view)) resolveView(view);
  });
  const view = await seen;
  watch.close();
  await watch.done;
  return view;
}

describe("typed client against the worker", () => {
  it("calls every client method once in a realistic order; every body parses with its route's strict response schema", async () => {
    const exchanges: Exchange[] = [];
    const failures: string[] = [];
    const called = recordCalls();
    const name = uniqueSession("client-e2e");
    const frontend = await clientFor("client", exchanges, failures);
    const operator = await clientFor("operator", exchanges, failures);
    const mayor = await clientFor("mayor", exchanges, failures);
    const agent = await clientFor("agent", exchanges, failures, { id: "polecat-one", session: name });

    // A frontend: what can this deployment run, then a session with a title, found in the directory.
    const models = await frontend.models();
    expect(models.models.length).toBeGreaterThan(0);
    const session = frontend.session(name);
    expect(await session.create({ title: "Before" })).toMatchObject({ session: name, created: true });
    expect(await session.patch({ title: "Client tour", labels: ["e2e"], metadata: { tour: "1" } })).toEqual({
      session: name,
      title: "Client tour",
      labels: ["e2e"],
      metadata: { tour: "1" },
    });
    expect((await session.get()).session).toBe(name);
    expect((await frontend.sessions({ q: name, limit: 5 })).items.map((row) => row.session)).toEqual([name]);

    // Accept with a request key and wait for the answer; look the input up by key and by id.
    const root = session.conversation("root");
    const accepted = await root.accept("hello", { idempotencyKey: "tour-1", wait: 10 });
    expect(accepted.status).toBe("done");
    expect(await session.acceptance("tour-1")).toEqual({
      requestKey: "tour-1",
      conversationId: accepted.conversationId,
      inputId: accepted.inputId,
    });
    expect((await session.input(accepted.inputId)).result.status).toBe("done");
    // A mistake answers a problem (PicoApiError), whose body parses with the strict problem schema.
    await expect(session.input(accepted.inputId + 10_000)).rejects.toSatisfy(
      (error) => error instanceof PicoApiError && error.code === "input_not_found",
    );
    // Nothing waits for an answer (pending.test.ts answers approvals and client tools); an unknown item is 404.
    expect(await session.pending()).toEqual({ items: [] });
    expect(await root.pending()).toEqual({ items: [] });
    await expect(session.answer("t9999-client", { output: "late" })).rejects.toSatisfy(
      (error) => error instanceof PicoApiError && error.code === "pending_not_found",
    );

    // Queue follow-ups while idle: they wait. Withdraw one, continue with the other.
    const withdrawn = await root.accept("never mind", { mode: "followUp" });
    expect((await session.withdraw(withdrawn.inputId)).result).toMatchObject({
      status: "unanswered",
      reason: "aborted",
    });
    await root.accept("and then?", { mode: "followUp" });
    expect((await root.continue()).inputs).toHaveLength(1);

    // Read the conversation, its transcript and config; change the config.
    const snapshot = await root.snapshot();
    expect(snapshot.conversation.id).toBe(accepted.conversationId);
    const entries = await root.entries({ limit: 50 });
    expect(entries.items.length).toBeGreaterThan(0);
    const messages = await root.chatMessages();
    expect(messages.map((message) => message.role)).toContain("assistant");
    expect(await root.patchConfig({ budgetMs: 120_000 })).toMatchObject({ budgetMs: 120_000 });
    expect((await root.config()).budgetMs).toBe(120_000);

    // Watch a little: the conversation (bearer header) until the second answer is in, the raw frames of one
    // connection, and the session view through watch tokens (as a browser's EventSource connects).
    const conversationView = await watchUntil<ConversationView>(
      (onChange) => root.watch({ onChange }),
      (view) => view.entries.length > 0,
    );
    expect(conversationView.entries.length).toBeGreaterThan(0);
    const connection = new AbortController();
    const frames = root.frames({ signal: connection.signal });
    const first = await frames.next();
    connection.abort();
    await frames.return(undefined);
    expect(first.value).toMatchObject({ event: "view" });
    expect((await root.watchToken(60)).expiresIn).toBe(60);
    expect((await session.watchToken()).token).not.toBe("");
    const sessionView = await watchUntil<SessionView>(
      (onChange) => session.watch({ onChange, watchToken: true }),
      () => true,
    );
    expect(sessionView).toBeDefined();

    // Fork at the first answer, talk on the fork until there is something to collapse, collapse, reset, abort.
    const answer = accepted.answer?.id;
    if (answer === undefined) throw new Error("the waited accept carries its answer entry");
    const fork = await root.fork({ at: answer });
    expect(fork.conversation.parent).toEqual({ conversationId: accepted.conversationId, at: answer });
    const branch = session.conversation(fork.conversationId);
    for (let turn = 0; turn < 10; turn++)
      expect((await branch.accept(`turn ${turn}`, { wait: 10 })).status).toBe("done");
    expect((await branch.collapse("keep it short")).taskId).toBeGreaterThan(0);
    expect(await branch.reset()).toEqual({ reset: true });
    expect(await branch.abort()).toEqual({ aborted: true });
    // A fork nobody works in is deleted (with what it owns: nothing here).
    const spare = await root.fork({ at: answer });
    expect(await session.conversation(spare.conversationId).delete()).toEqual({ deleted: [spare.conversationId] });

    // Schedules: create, list, read, pause, end.
    const schedule = await session.createSchedule({ input: "daily digest", every: 3_600_000 });
    expect((await session.schedules()).items.map((item) => item.id)).toContain(schedule.id);
    expect((await session.schedule(schedule.id)).status).toBe("active");
    expect((await session.patchSchedule(schedule.id, { paused: true })).status).toBe("paused");
    expect((await session.deleteSchedule(schedule.id)).status).toBe("ended");
    expect((await session.usage({ limit: 10 })).rows.items.length).toBeGreaterThan(0);

    // An operator: tasks, abort a live one (a second schedule), inspect, release, clear the fault, shut down.
    const ops = operator.session(name);
    const live = await frontend.session(name).createSchedule({ input: "hourly", every: 3_600_000 });
    expect((await ops.tasks({ live: true })).items.map((task) => task.id)).toContain(live.id);
    expect((await ops.abortTask(live.id)).abort).toBe(true);
    const inspection = await ops.inspect();
    expect(inspection.fault).toBeUndefined();
    expect(await ops.releaseTask(live.id)).toEqual({ released: true });
    expect(await ops.clearFault()).toEqual({ cleared: false });
    // Export and import: the session as JSONL, imported under another name.
    const jsonl = await new Response(await ops.exportJsonl()).text();
    expect(jsonl.split("\n")[0]).toContain('"format":"pico-edge.session-export"');
    expect((await operator.session(`${name}-copy`).importJsonl(jsonl)).session).toBe(`${name}-copy`);
    // The copy has no rig to pause: resuming it changes nothing.
    expect((await operator.session(`${name}-copy`).resumeRig()).resumed).toBe(false);
    // Inbound endpoints: point a GitHub sender at the root, and a standard one (its secret shown once).
    const inbound = ops.inbound();
    expect(
      (await inbound.put("github", { format: "github", secret: "from-github", template: "{{action}}" })).url,
    ).toContain(`/v1/inbound/${TENANT}/${name}/github`);
    expect((await inbound.put("ci", { format: "standard" })).secret).toMatch(/^whsec_/);
    expect((await inbound.list()).items.map((item) => item.name)).toEqual(["ci", "github"]);
    expect((await inbound.get("github")).template).toBe("{{action}}");
    expect(await inbound.delete("ci")).toEqual({ deleted: true });
    // The tenant's inbound endpoints: one routed per repository and issue, its secret rotated, then gone.
    const routed = new InboundEndpointsClient(operator);
    const routedEndpoint = await routed.put("gh-routed", {
      format: "standard",
      session: `${name}-{{repository.name}}`,
      route: "{{repository.full_name}}#{{issue.number}}",
    });
    expect(routedEndpoint.secret).toMatch(/^whsec_/);
    expect((await routed.list()).items.map((item) => item.name)).toContain("gh-routed");
    expect((await routed.get("gh-routed")).route).toBe("{{repository.full_name}}#{{issue.number}}");
    expect((await routed.rotateSecret("gh-routed")).secret).toMatch(/^whsec_/);
    expect(await routed.delete("gh-routed")).toEqual({ deleted: true });

    // Events out: an endpoint of the tenant, and the session's deliveries to it.
    const hooks = operator.webhookEndpoints();
    const eventful = `${name}-events`;
    const hook = await hooks.create({
      url: "https://receiver.test/client",
      events: ["input.completed"],
      sessions: [eventful],
    });
    expect(hook.secret).toMatch(/^whsec_/);
    expect((await hooks.list()).items.map((item) => item.id)).toContain(hook.id);
    expect((await hooks.get(hook.id)).url).toBe("https://receiver.test/client");
    expect((await hooks.update(hook.id, { description: "client test" })).description).toBe("client test");
    expect((await hooks.rotateSecret(hook.id)).secret).toMatch(/^whsec_/);
    // The endpoint's receiver stands behind the host's fetch seam (no network).
    setHostSeams({ fetch: async () => new Response("ok") });
    // A session that learns of the endpoint when it first commits (sessions re-read endpoints every 30 s).
    await operator.session(eventful).create({});
    await operator.session(eventful).conversation("root").accept("an event", { wait: 10 });
    const deliveries = operator.session(eventful).deliveries();
    const [delivery] = (
      await until(
        async () =>
          (await deliveries.list({ status: "done" })).items.length > 0
            ? await deliveries.list({ status: "done" })
            : undefined,
        "a done delivery",
      )
    ).items;
    expect(delivery).toMatchObject({ endpointId: hook.id, type: "input.completed", status: "done" });
    expect((await deliveries.retry(delivery?.id ?? "")).attempts).toBe(2);
    expect(await hooks.delete(hook.id)).toEqual({ id: hook.id, deleted: true });
    // The tenant's tool catalog (operator).
    const tools = operator.tools();
    const tool = await tools.put("lookup_order", {
      description: "Look up an order",
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      handler: { type: "client" },
    });
    expect((await tools.list()).items.map((item) => item.name)).toContain("lookup_order");
    expect((await tools.get("lookup_order")).version).toBe(tool.version);
    expect((await tools.delete("lookup_order", { ifMatch: tool.version })).deleted).toBe(true);
    // An HTTP tool's secret: answered by its first PUT, rotated to the next generation.
    const http = await tools.put("notify", {
      description: "Notify",
      parameters: { type: "object" },
      handler: { type: "http", url: "https://product.test/notify" },
    });
    expect(http.secret).toMatch(/^whsec_/);
    expect(await tools.rotateSecret("notify")).toMatchObject({ name: "notify", secretGeneration: 2 });
    // The tenant's API keys (operator).
    const apiKeys = new ApiKeysClient(operator);
    const key = await apiKeys.create({ name: "tour-backend", role: "client" });
    expect(key.secret).toMatch(/^pe_live_/);
    expect((await apiKeys.list()).items.map((item) => item.id)).toContain(key.id);
    expect(await apiKeys.delete(key.id)).toEqual({ id: key.id, deleted: true });
    // Session templates and user revocation (operator).
    const users = operator.users();
    const template = await users.putTemplate("support", { model: "echo/echo", userSettable: ["title"] });
    expect((await users.templates()).items.map((item) => item.name)).toContain("support");
    expect((await users.template("support")).version).toBe(template.version);
    expect(await users.deleteTemplate("support", { ifMatch: template.version })).toEqual({
      name: "support",
      deleted: true,
    });
    const profile = await users.putProfile("support", { sections: [{ id: "role", text: "You help {{customer}}." }] });
    expect((await users.profiles()).items.map((item) => item.name)).toContain("support");
    expect((await users.profile("support")).version).toBe(profile.version);
    expect(await users.deleteProfile("support", { ifMatch: profile.version })).toEqual({
      name: "support",
      deleted: true,
      version: 1,
    });
    expect(await users.revoke("someone")).toMatchObject({ sub: "someone", sessions: 0, unreached: [] });
    // The tenant's default retention (operator).
    expect(await users.retention()).toEqual({ retention: null });
    expect(await users.putRetention({ deleteAfterDays: 30 })).toEqual({ retention: { deleteAfterDays: 30 } });
    expect(await users.retention()).toEqual({ retention: { deleteAfterDays: 30 } });
    expect(await users.putRetention(null)).toEqual({ retention: null });
    const erasure = await users.erase("someone-else");
    expect(erasure).toMatchObject({ sessionsFound: 0, sessionsRemaining: 0 });
    expect((await users.erasure(erasure.id)).id).toBe(erasure.id);
    expect(await ops.shutdown()).toEqual({ shutdown: true });

    // The rig: the mayor registers an external agent and hooks a bead on it; the agent long-polls its hook,
    // activates, touches and completes it; mail both ways; the mayor clears and deregisters.
    const rig = mayor.session(name).rig();
    const polecat = agent.session(name).rig();
    expect((await rig.registerAgent("polecat-one", { role: "polecat" })).created).toBe(true);
    expect(
      (await rig.registerAgent("polecat-two", { role: "polecat", conversation: "new" })).agent.conversationId,
    ).toBeGreaterThan(0);
    const set = await rig.setHook("polecat-one", { bead_id: "gt-1", title: "Write the tour" });
    expect(set).toMatchObject({ attempt: 1, hook: { status: "pending" } });
    expect((await rig.agentHook("polecat-one")).version).toBe(set.version);
    const own = await polecat.hook({ wait: 1 });
    expect(own.hook.work_item?.bead_id).toBe("gt-1");
    expect((await polecat.activate({ attempt: own.attempt, ifMatch: own.version })).hook.status).toBe("active");
    expect((await polecat.touch({ attempt: own.attempt })).hook.status).toBe("active");
    expect((await polecat.nudges()).nudges).toEqual([]);
    expect((await polecat.complete({ attempt: own.attempt, summary: "done" })).hook.status).toBe("completed");
    const sent = await polecat.sendMail("mayor", { bead: "gt-1", result: "done" });
    const inbox = await rig.mail();
    expect(inbox.messages.map((message) => message.id)).toContain(sent.id);
    expect((await rig.ackMail(sent.id)).ack?.by).toBe("mayor");
    expect((await rig.agents()).agents.map((row) => row.agent_id)).toEqual(["polecat-one", "polecat-two"]);
    expect((await rig.witness()).patrolIntervalMs).toBeGreaterThan(0);
    expect((await rig.patchWitness({ patrolIntervalMs: 120_000 })).patrolIntervalMs).toBe(120_000);
    expect((await rig.health()).totalAgents).toBe(2);
    expect((await rig.hookFile("polecat-one")).status).toBe("completed");
    const archive = await rig.chipsetState();
    expect(archive.byteLength % 512).toBe(0);
    expect((await rig.clearHook("polecat-one")).hook.status).toBe("empty");
    expect((await rig.terminateAgent("polecat-two")).terminated?.by).toBe("mayor");
    expect(await rig.deregisterAgent("polecat-one")).toEqual({ deleted: true });

    // A product's backend mints a user token; that user's browser creates a session under a server-assigned name.
    const minted = await new EndUserClient(operator).mintToken({ sub: "tour-user", act: ["read", "create"] });
    const browser = new PicoClient({ baseUrl: BASE, token: minted.token, fetch: checkingFetch(exchanges, failures) });
    // A user creates from one of the tenant's templates, setting only what it leaves to users.
    await users.putTemplate("browser", { model: "echo", userSettable: ["title"] });
    const created = await new EndUserClient(browser).newSession({ template: "browser", title: "Mine" });
    expect(created).toMatchObject({ created: true });
    expect((await browser.sessions({ q: created.session })).items.map((row) => row.session)).toEqual([created.session]);

    // The tenant's MCP servers (operator): a real MCP server behind the host's fetch seam.
    const mcp = new McpTestServer("tour", [
      { name: "lookup", inputSchema: { properties: { id: { type: "integer" } } } },
    ]);
    setHostSeams({ fetch: mcpFetch(mcp) });
    const servers = new McpServersClient(operator);
    expect(await servers.put("tour", { url: mcp.url, headers: { authorization: "Bearer tour" } })).toMatchObject({
      name: "tour",
    });
    expect((await servers.list()).items.map((item) => item.name)).toEqual(["tour"]);
    expect(await servers.get("tour")).toMatchObject({ name: "tour" });
    expect(await servers.refresh("tour")).toMatchObject({ name: "tour" });
    expect(await servers.delete("tour")).toMatchObject({ deleted: true });

    // The tenant's identity providers (operator): registering one fetches nothing.
    const issuers = new IssuersClient(operator);
    const registration = {
      issuer: "https://tour.idp.test/",
      jwksUri: "https://tour.idp.test/.well-known/jwks.json",
      audience: "pico-api",
    };
    expect(await issuers.put("tour", registration)).toMatchObject({ name: "tour", ...registration });
    expect((await issuers.list()).items.map((item) => item.name)).toEqual(["tour"]);
    expect(await issuers.get("tour")).toMatchObject({ name: "tour" });
    expect(await issuers.delete("tour")).toEqual({ name: "tour", deleted: true });

    // Limits and usage: the operator sets them and reads every user's usage; a user reads their own.
    const limits = new LimitsClient(operator);
    expect(await limits.put({ user: { inputsPerDay: 1000 } })).toMatchObject({ user: { inputsPerDay: 1000 } });
    expect(await limits.get()).toMatchObject({ user: { inputsPerDay: 1000 } });
    expect((await limits.usage({ sub: "tour-user" })).items).toEqual([]);
    expect((await new LimitsClient(browser).mine()).items).toEqual([]);
    expect((await limits.stats()).sessions).toMatchObject({ idle: expect.any(Number) });

    // Finally the session goes.
    expect(await operator.session(name).delete()).toEqual({ deleted: true });

    // Every body parsed with its strict schema (a parse failure fails here, with the route and body).
    const problems = (await Promise.all(exchanges.map((exchange) => exchange.problem))).filter(
      (problem) => problem !== undefined,
    );
    expect(problems).toEqual([]);
    expect(failures).toEqual(["getInput 404", "answerPending 404"]);

    // Every client method was called, and every route but the documented exclusions was reached.
    const all = Object.entries(CLASSES).flatMap(([owner, constructor]) => methodsOf(owner, constructor.prototype));
    expect([...called].sort()).toEqual(all.sort());
    const reached = new Set(exchanges.map((exchange) => exchange.operationId));
    const expected = API_ROUTES.map((route) => route.operationId).filter(
      (id) => CLIENT_EXCLUDED_OPERATIONS[id] === undefined,
    );
    expect([...reached].sort()).toEqual(expected.sort());
  });
});
