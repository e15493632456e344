/**
 * Browser tests of the console, of a page on another origin, and of a React page with useChat there
 * (docs/console.md, docs/frontends.md): Debian's Chromium (/usr/bin/chromium, or $CHROMIUM) driven by
 * playwright-core against `wrangler dev` started here (port 8809, inspector 9309; PICO_BROWSER_PORT moves
 * them). Run by `npm run test:browser` (Node's test runner, type stripping), never by `npm test`. When no
 * browser starts, the tests fail; they never skip.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { sign } from "hono/jwt";
import { build } from "esbuild";
import { startToolEndpoint } from "../../scripts/tool-endpoint.ts";

// PICO_BROWSER_PORT moves every port (engineers sharing a machine): wrangler dev on it, its inspector on
// it + 500, the other-origin page on it + 10, the dropping proxy on it + 20.
const PORT = Number(process.env["PICO_BROWSER_PORT"] ?? "8809");
const INSPECTOR = PORT + 500;
const OTHER_PORT = PORT + 10;
const PROXY_PORT = PORT + 20;
const BASE = `http://127.0.0.1:${PORT}`;
const PROXIED = `http://127.0.0.1:${PROXY_PORT}`;
/** Watch tokens live this long here, so a test can outlive one. */
const WATCH_TOKEN_SECONDS = 3;
const SECRET = "browser-test-jwt-secret-not-for-production";
const CHROMIUM = process.env["CHROMIUM"] ?? "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/**
 * `PICO_SCREENSHOTS=1 npm run test:browser` writes the README's screenshots into docs/ (any other value
 * is a directory to write them into), at the viewport below, from the tests that build each scene.
 */
const SCREENSHOTS = process.env["PICO_SCREENSHOTS"] === "1" ? "docs" : process.env["PICO_SCREENSHOTS"] || undefined;
const VIEWPORT = { width: 1280, height: 800 };

/** Write `docs/<file>` (when screenshots are asked for) with the center column scrolled to its end. */
async function screenshot(p: Page, file: string): Promise<void> {
  if (SCREENSHOTS === undefined) return;
  await p.$eval("#center", (center) => center.scrollTo(0, center.scrollHeight));
  await p.screenshot({ path: join(SCREENSHOTS, file) });
}

/**
 * A TCP proxy in front of wrangler dev that records every request line (method and URL) and can drop
 * every connection at once, as a network change or the platform would.
 */
class DroppingProxy {
  readonly requests: { method: string; url: string }[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #server: NetServer;

  constructor() {
    this.#server = createNetServer((client) => {
      const upstream = connect(PORT, "127.0.0.1");
      this.#sockets.add(client).add(upstream);
      client.on("data", (chunk: Buffer) => {
        for (const match of chunk
          .toString("latin1")
          .matchAll(/(?:^|\r\n)(GET|POST|PUT|PATCH|DELETE|OPTIONS) (\S+) HTTP\/1\.1\r\n/g))
          this.requests.push({ method: match[1] ?? "", url: match[2] ?? "" });
      });
      client.pipe(upstream).pipe(client);
      const forget = (): void => {
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
        client.destroy();
        upstream.destroy();
      };
      client.on("close", forget).on("error", forget);
      upstream.on("close", forget).on("error", forget);
    });
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.#server.listen(PROXY_PORT, "127.0.0.1", resolve));
  }

  /** Destroy every open connection (both sides). */
  drop(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  close(): Promise<void> {
    this.drop();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

let wrangler: ChildProcess | undefined;
let proxy: DroppingProxy | undefined;
let other: Server | undefined;
let context: BrowserContext | undefined;
let profile: string | undefined;
/** wrangler dev's state, of its own, so the tests run beside the other CI stages (SQLite locks a shared state). */
const state = mkdtempSync(join(tmpdir(), "pico-edge-browser-state-"));
const tenant = `browser-${Date.now().toString(36)}`;

type Role = "client" | "operator" | "mayor" | { readonly agent: string; readonly session: string };

async function token(role: Role): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims = typeof role === "string" ? { role } : { role: "agent", agent: role.agent, sessions: [role.session] };
  return sign({ tenant, ...claims, iat: now, exp: now + 3600 }, SECRET, "HS256");
}

async function api(method: string, path: string, body?: unknown, role: Role = "operator"): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${await token(role)}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${BASE}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

async function waitForHealth(ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${BASE}/health`)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`wrangler dev did not answer on ${BASE} within ${ms} ms`);
}

/**
 * What went wrong on the pages of the running test, as the browser reported it: console errors, uncaught
 * exceptions, failed requests and answers of 400 or above. Every test ends with none (afterEach below)
 * but those it expects (`expectProblems`). A request aborted on purpose (a page closing, a watch the
 * console closes) is not a failure.
 */
const problems: string[] = [];
/** What the running test expects to go wrong: each is a list of texts that an expected problem contains. */
const expectedProblems: (readonly string[])[] = [];

/** The running test expects the browser to report problems containing every one of `texts`. */
function expectProblems(...texts: string[]): void {
  expectedProblems.push(texts);
}

async function page(): Promise<Page> {
  if (context === undefined) throw new Error("no browser context");
  const p = await context.newPage();
  p.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()} (${message.location().url})`);
  });
  p.on("pageerror", (error) => problems.push(`uncaught: ${error.message}`));
  p.on("requestfailed", (request) => {
    const reason = request.failure()?.errorText ?? "";
    if (reason !== "net::ERR_ABORTED") problems.push(`request failed: ${request.method()} ${request.url()}: ${reason}`);
  });
  p.on("response", (response) => {
    if (response.status() >= 400)
      problems.push(`answered ${response.status()}: ${response.request().method()} ${response.url()}`);
  });
  return p;
}

afterEach(() => {
  const expected = expectedProblems.splice(0);
  const seen = problems
    .splice(0)
    .filter((problem) => !expected.some((texts) => texts.every((text) => problem.includes(text))));
  assert.deepEqual(seen, [], `the browser reported:\n${seen.join("\n")}`);
});

async function signIn(p: Page, base = BASE): Promise<void> {
  await p.goto(`${base}/console/`);
  await p.fill("#token", await token("operator"));
  await p.click("#signin-button");
  await p.waitForSelector("#left:not([hidden])");
}

/** test/browser/use-chat-page.tsx and what it imports (react, @ai-sdk/react, ai), as one ES module. */
async function bundleUseChatPage(): Promise<Uint8Array> {
  const result = await build({
    entryPoints: [join(import.meta.dirname, "use-chat-page.tsx")],
    bundle: true,
    format: "esm",
    target: "es2022",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    write: false,
    logLevel: "warning",
  });
  const [output] = result.outputFiles;
  if (output === undefined) throw new Error("esbuild wrote no bundle of use-chat-page.tsx");
  return output.contents;
}

before(
  async () => {
    wrangler = spawn(
      "npx",
      [
        "wrangler",
        "dev",
        "--local",
        "--env",
        "dev",
        "--ip",
        "127.0.0.1",
        "--port",
        String(PORT),
        "--inspector-port",
        String(INSPECTOR),
        "--persist-to",
        state,
        "--var",
        `JWT_SECRET:${SECRET}`,
        "--var",
        "WEBHOOK_MASTER_SECRET:browser-test-webhook-master",
        "--var",
        "SECRETS_SEALING_KEY:browser-test-only-secrets-sealing-key-0123",
        "--var",
        `WATCH_TOKEN_LIFETIME_SECONDS:${WATCH_TOKEN_SECONDS}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    wrangler.stdout?.resume();
    wrangler.stderr?.resume();
    await waitForHealth(120_000);
    // The other origin also serves the React page (test/browser/use-chat-page.tsx), bundled here.
    const useChatScript = await bundleUseChatPage();
    other = createServer((request, response) => {
      const path = new URL(request.url ?? "/", "http://other.invalid").pathname;
      if (path === "/use-chat/app.js") {
        response.writeHead(200, { "content-type": "text/javascript" });
        response.end(useChatScript);
      } else if (path === "/use-chat/") {
        response.writeHead(200, { "content-type": "text/html" });
        response.end(
          '<!doctype html><title>useChat</title><div id="root"></div><script type="module" src="app.js"></script>',
        );
      } else {
        response.writeHead(200, { "content-type": "text/html" });
        response.end("<!doctype html><title>other origin</title><p>another origin</p>");
      }
    });
    await new Promise<void>((resolve) => other?.listen(OTHER_PORT, "127.0.0.1", resolve));
    proxy = new DroppingProxy();
    await proxy.listen();
    profile = mkdtempSync(join(tmpdir(), "pico-edge-chromium-"));
    // Throws (and so fails every test) when the browser cannot start.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: VIEWPORT,
    });
  },
  { timeout: 180_000 },
);

after(async () => {
  await context?.close().catch(() => undefined);
  if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
  await new Promise<void>((resolve) => (other === undefined ? resolve() : other.close(() => resolve())));
  await proxy?.close();
  if (wrangler?.pid !== undefined) {
    try {
      process.kill(-wrangler.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  rmSync(state, { recursive: true, force: true });
});

void describe("console", { timeout: 120_000 }, () => {
  void it("signs in and shows the tenant's sessions", async () => {
    assert.equal((await api("PUT", "/v1/sessions/shown", { title: "Shown session", labels: ["demo"] })).status, 201);
    const p = await page();
    await signIn(p);
    await p.waitForSelector('#sessions li[data-session="shown"]');
    assert.match((await p.textContent('#sessions li[data-session="shown"]')) ?? "", /Shown session/);
    // The token lives in this tab's sessionStorage: a reload stays signed in, sign-out forgets it.
    assert.ok(await p.evaluate(() => sessionStorage.getItem("pico-edge.token")));
    await p.reload();
    await p.waitForSelector('#sessions li[data-session="shown"]');
    assert.equal(await p.isHidden("#signin"), true);
    // The filter is the directory's q.
    assert.equal((await api("PUT", "/v1/sessions/hidden-by-filter", { title: "Other" })).status, 201);
    await p.fill("#filter", "Shown");
    await p.waitForFunction(
      () =>
        document.querySelectorAll("#sessions li").length === 1 &&
        document.querySelector('#sessions li[data-session="shown"]') !== null,
    );
    await p.click("#signout");
    await p.waitForSelector("#signin:not([hidden])");
    assert.equal(await p.evaluate(() => sessionStorage.getItem("pico-edge.token")), null);
    await p.close();
  });

  void it("signs in with a user token: only that user's sessions, a new one from the operator's template, and a conversation in it", async () => {
    // The product's backend: a profile and a session template, then one short-lived user token per end user.
    const profile = { sections: [{ id: "role", text: "You are the helpdesk of Acme." }] };
    assert.equal((await api("PUT", "/v1/profiles/helpdesk", profile)).status, 201);
    assert.equal(
      (await api("PUT", "/v1/templates/helpdesk", { model: "echo/echo", profile: "helpdesk", userSettable: ["title"] }))
        .status,
      201,
    );
    const mint = async (sub: string): Promise<string> =>
      ((await (await api("POST", "/v1/tokens", { sub, ttlSeconds: 900 })).json()) as { token: string }).token;
    const bob = await mint("bob");
    const bobs = await fetch(`${BASE}/v1/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${bob}`, "content-type": "application/json" },
      body: JSON.stringify({ template: "helpdesk", title: "Bob's" }),
    });
    assert.equal(bobs.status, 201);
    const bobSession = ((await bobs.json()) as { session: string }).session;
    const p = await page();
    await p.goto(`${BASE}/console/`);
    await p.fill("#token", await mint("alice"));
    await p.click("#signin-button");
    await p.waitForSelector("#left:not([hidden])");
    assert.match((await p.textContent("#who")) ?? "", /alice \(user\)/);
    // Nothing of the tenant's (other tests' sessions) or of bob's is listed.
    await p.waitForFunction(() => document.querySelector("#sessions") !== null);
    assert.deepEqual(
      await p.$$eval("#sessions li", (items) => items.map((item) => item.getAttribute("data-session"))),
      [],
    );
    // Alice starts a session from the template (POST /v1/sessions: a server-assigned name) and talks in it.
    await p.fill("#new-name", "helpdesk");
    await p.click("#create");
    await p.waitForFunction(() => document.querySelectorAll("#sessions li").length === 1);
    const [mine] = await p.$$eval("#sessions li", (items) =>
      items.map((item) => item.getAttribute("data-session") ?? ""),
    );
    assert.match(mine ?? "", /^s-/);
    assert.notEqual(mine, bobSession);
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await p.fill("#input", "hello from alice");
    await p.click("#send");
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) => e.textContent?.includes("hello from alice"))
          .length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    // The instructions the request was prepared with: the profile's text.
    await p.waitForFunction(() =>
      (document.querySelector("#instructions")?.textContent ?? "").includes(
        "[edge.profile]\nYou are the helpdesk of Acme.",
      ),
    );
    // A reload keeps her signed in and still shows only her session.
    await p.reload();
    await p.waitForSelector(`#sessions li[data-session="${mine ?? ""}"]`);
    assert.equal(await p.$$eval("#sessions li", (items) => items.length), 1);
    await p.close();
  });

  void it("opens a session, sends an input and sees the streamed answer appear, then forks", async () => {
    assert.equal((await api("PUT", "/v1/sessions/talk", { title: "Talk" })).status, 201);
    const p = await page();
    await signIn(p);
    await p.click('#sessions li[data-session="talk"]');
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await p.fill("#input", "hello from the browser");
    await p.click("#send");
    // The user's entry and the echo model's answer both arrive through the watch.
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) =>
          e.textContent?.includes("hello from the browser"),
        ).length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForSelector("#tree li");
    await p.click("#fork");
    await p.waitForFunction(
      () => /conversation \d+/.test(document.querySelector("#title")?.textContent ?? ""),
      undefined,
      { timeout: 30_000 },
    );
    // The fork starts with the source's transcript and shows in the tree.
    await p.waitForFunction(
      () =>
        document.querySelectorAll("#transcript .entry").length >= 2 &&
        document.querySelectorAll("#tree li").length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    await p.close();
  });

  void it("nests a fork under its source, a fork of it one deeper, and a subagent's child under the conversation that ran it", async () => {
    const name = `tree-${Date.now().toString(36)}`;
    const base = `/v1/sessions/${name}/conversations`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { selectedTools: ["echo", "subagent"] })).status, 201);
    const ran = await api("POST", `${base}/root/inputs?wait=30`, {
      input: '/call subagent {"command":"run","prompt":"summarize the plan"}',
    });
    assert.equal(((await ran.json()) as { result?: { status: string } }).result?.status, "done");
    const children = ((await (await api("GET", `${base}/root`)).json()) as { children: number[] }).children;
    assert.equal(children.length, 1);
    const child = children[0];
    const fork = (
      (await (await api("POST", `${base}/root/fork`, { at: "start" })).json()) as { conversationId: number }
    ).conversationId;
    const forkOfFork = (
      (await (await api("POST", `${base}/${fork}/fork`, { at: "start" })).json()) as { conversationId: number }
    ).conversationId;
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForSelector(
      `#tree li[data-conversation="1"] > ul > li[data-conversation="${fork}"] > ul > li[data-conversation="${forkOfFork}"]`,
      { timeout: 30_000 },
    );
    await p.waitForSelector(`#tree li[data-conversation="1"] > ul > li[data-conversation="${child}"]`, {
      timeout: 30_000,
    });
    assert.equal(await p.locator("#tree li").count(), 4);
    assert.match((await p.textContent(`#tree li[data-conversation="${child}"]`)) ?? "", /child/);
    assert.match((await p.textContent(`#tree li[data-conversation="${fork}"]`)) ?? "", /fork/);
    // Opening the child shows its own transcript (the subagent's prompt and answer).
    await p.click(`#tree li[data-conversation="${child}"]`);
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) =>
          e.textContent?.includes("summarize the plan"),
        ).length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    await p.close();
  });

  void it("shows a populated session: turns, a fork and a subagent's child in the tree, a job's live output", async () => {
    const name = `project-${Date.now().toString(36)}`;
    const root = `/v1/sessions/${name}/conversations/root`;
    assert.equal(
      (
        await api("PUT", `/v1/sessions/${name}`, {
          title: "Console README",
          labels: ["docs", "demo"],
          selectedTools: ["echo", "job", "subagent"],
        })
      ).status,
      201,
    );
    for (const input of [
      "Draft the console section of the README",
      '/call subagent {"command":"run","prompt":"list what the console shows"}',
      '/call job {"cmd":"echo checking links; echo 0 broken"}',
    ]) {
      const accepted = await api("POST", `${root}/inputs?wait=30`, { input });
      assert.equal(((await accepted.json()) as { result?: { status: string } }).result?.status, "done", input);
    }
    const first = ((await (await api("GET", `${root}/entries?limit=3`)).json()) as { items: { id: number }[] }).items;
    const fork = (
      (await (await api("POST", `${root}/fork`, { at: first[first.length - 1]?.id ?? "start" })).json()) as {
        conversationId: number;
      }
    ).conversationId;
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForSelector(`#tree li[data-conversation="1"] > ul > li[data-conversation="${fork}"]`, {
      timeout: 30_000,
    });
    await p.waitForSelector('#tree li[data-conversation="1"] > ul > li:has-text("child")', { timeout: 30_000 });
    await compose(p, "accept", '/call job {"cmd":"demo count 60 400"}');
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#tasks li .preview")].some((preview) => preview.textContent?.includes("4\n")),
      undefined,
      { timeout: 30_000 },
    );
    assert.match((await p.textContent("#transcript")) ?? "", /0 broken/);
    assert.match((await p.textContent("#transcript")) ?? "", /list what the console shows/);
    await p.waitForFunction(() => /^[1-9]\d* attempts/.test(document.querySelector("#usage")?.textContent ?? ""));
    await screenshot(p, "console-session.png");
    await p.click("#abort");
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 30_000 });
    await p.close();
  });

  void it("aborts a slow turn", async () => {
    assert.equal((await api("PUT", "/v1/sessions/slow", { model: "echo-slow" })).status, 201);
    const p = await page();
    await signIn(p);
    await p.click('#sessions li[data-session="slow"]');
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await p.fill(
      "#input",
      "a long answer that the paced echo model streams slowly enough to abort it midway through the turn",
    );
    await p.click("#send");
    await p.waitForSelector("#tasks li", { timeout: 30_000 });
    await p.click("#abort");
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 30_000 });
    const tasks = (await (await api("GET", "/v1/sessions/slow/tasks?live=true")).json()) as { items: unknown[] };
    assert.deepEqual(tasks.items, []);
    await p.click("#inspect");
    await p.waitForFunction(() => (document.querySelector("#inspection")?.textContent ?? "").includes('"fault"'));
    await p.close();
  });
});

void describe("console rig view", { timeout: 120_000 }, () => {
  void it("shows the rig's agents with their hooks, a stall the witness found and the mayor's mail", async () => {
    const name = `rig-${Date.now().toString(36)}`;
    const rig = `/v1/sessions/${name}/rig`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { title: "A rig" })).status, 201);
    // A witness that calls an active hook stalled after 1 s of silence and patrols every second.
    assert.equal(
      (await api("PATCH", `${rig}/witness`, { stallThresholdMs: 1000, patrolIntervalMs: 1000 }, "mayor")).status,
      200,
    );
    for (const agent of ["polecat-alpha", "polecat-bravo"])
      assert.equal((await api("PUT", `${rig}/agents/${agent}`, { role: "polecat" }, "mayor")).status, 201);
    assert.equal(
      (
        await api(
          "PUT",
          `${rig}/agents/polecat-alpha/hook`,
          { bead_id: "gt-abc12", title: "Add README section" },
          "mayor",
        )
      ).status,
      200,
    );
    assert.equal(
      (await api("PUT", `${rig}/agents/polecat-bravo/hook`, { bead_id: "gt-def34", title: "Fix the parser" }, "mayor"))
        .status,
      200,
    );
    assert.equal(
      (await api("POST", `${rig}/hook/activate`, { attempt: 1 }, { agent: "polecat-alpha", session: name })).status,
      200,
    );
    assert.equal(
      (
        await api(
          "POST",
          `${rig}/mail`,
          { to: "mayor", payload: "alpha: starting on gt-abc12" },
          { agent: "polecat-alpha", session: name },
        )
      ).status,
      201,
    );

    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.click("#tab-rig");
    await p.waitForSelector('#rig-agents tr[data-agent="polecat-bravo"]');
    const field = (agent: string, name: string): Promise<string | null> =>
      p.textContent(`#rig-agents tr[data-agent="${agent}"] td[data-field="${name}"]`);
    assert.equal(await field("polecat-bravo", "status"), "pending");
    assert.equal(await field("polecat-bravo", "bead"), "gt-def34");
    assert.equal(await field("polecat-bravo", "attempt"), "1");
    assert.equal(await field("polecat-alpha", "runs-as"), "external");
    assert.equal(await field("polecat-alpha", "title"), "Add README section");
    // Alpha's active hook goes silent past the threshold: the view refreshes by itself and shows the
    // stall (its row and the witness's stalled details) and the mayor's mail, with the witness's summary.
    await p.waitForSelector('#rig-agents tr[data-agent="polecat-alpha"][data-health="stalled"]', { timeout: 30_000 });
    assert.equal(await field("polecat-alpha", "status"), "active");
    await p.waitForSelector('#rig-stalls li[data-stalled="polecat-alpha"]');
    assert.match((await p.textContent('#rig-stalls li[data-stalled="polecat-alpha"]')) ?? "", /gt-abc12/);
    assert.match((await p.textContent("#rig-health")) ?? "", /2 agents: 1 active, 1 pending, 1 stalled/);
    assert.match((await p.textContent("#rig-mail")) ?? "", /alpha: starting on gt-abc12/);
    // The witness's patrol found it too: it nudged alpha and mailed the mayor a health summary naming it.
    await p.waitForFunction(
      () =>
        /HEALTH: 2 agents, 1 active, 1 stalled \(polecat-alpha\)/.test(
          document.querySelector("#rig-mail")?.textContent ?? "",
        ),
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForFunction(
      () =>
        /[1-9]\d* nudges? sent/.test(
          document.querySelector('#rig-stalls li[data-stalled="polecat-alpha"]')?.textContent ?? "",
        ),
      undefined,
      { timeout: 30_000 },
    );
    await screenshot(p, "console-rig.png");
    // Back to the conversation: the rig view stops reading.
    await p.click("#tab-conversation");
    assert.equal(await p.isHidden("#rig-view"), true);
    await p.close();
  });
});

/** The texts of the console's queued inputs. */
async function queued(p: Page): Promise<string[]> {
  return p.$$eval("#inbox li", (items) => items.map((item) => item.textContent ?? ""));
}

/** Send `text` from the composer with `mode`. */
async function compose(p: Page, mode: "accept" | "steer" | "followUp" | "nextRun", text: string): Promise<void> {
  await p.selectOption("#mode", mode);
  await p.fill("#input", text);
  await p.click("#send");
}

/** How many transcript entries the console shows that contain `text`. */
function shownWith(p: Page, text: string): Promise<number> {
  return p.$$eval("#transcript .entry", (rows, t) => rows.filter((row) => row.textContent?.includes(t)).length, text);
}

void describe("console composer, tasks and operator", { timeout: 180_000 }, () => {
  // About 1,500 characters at 16 per 200 ms: the long answer streams for ~20 s, so the queued inputs
  // are queued while it runs even on a loaded machine.
  void it("shows a session's deliveries for an endpoint and retries a pending one", async () => {
    // A receiver on this machine (an endpoint's url may be http: in development) that fails until healed.
    let reply = 500;
    const received: string[] = [];
    const receiver = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        received.push(String(request.headers["webhook-id"]));
        response.writeHead(reply).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(PORT + 30, "127.0.0.1", resolve));
    try {
      const name = `hooks-${Date.now().toString(36)}`;
      const created = await api("POST", "/v1/webhook-endpoints", {
        url: `http://127.0.0.1:${PORT + 30}/hook`,
        events: ["input.completed"],
        sessions: [name],
      });
      assert.equal(created.status, 201);
      assert.equal((await api("PUT", `/v1/sessions/${name}`, { title: "Hooks" })).status, 201);
      assert.equal(
        (await api("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=10`, { input: "tell the hook" }))
          .status,
        201,
      );
      for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(received.length, 1);

      const p = await page();
      await signIn(p);
      await p.click(`#sessions li[data-session="${name}"]`);
      await p.click("#tab-deliveries");
      await p.waitForSelector('#deliveries tr[data-status="pending"]');
      assert.equal(await p.textContent('#deliveries tr[data-status="pending"] td[data-field="last-status"]'), "500");
      assert.equal(await p.textContent('#deliveries tr[data-status="pending"] td[data-field="attempts"]'), "1");
      reply = 200;
      await p.click("#deliveries button[data-retry]");
      await p.waitForSelector('#deliveries tr[data-status="done"]');
      assert.equal(await p.textContent('#deliveries tr[data-status="done"] td[data-field="attempts"]'), "2");
      assert.deepEqual(new Set(received).size, 1);
      await p.close();
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });

  void it("composes with each input mode, shows the live task's streaming preview, withdraws a queued input and keeps usage totals live", async () => {
    const name = `modes-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { model: "echo-slow" })).status, 201);
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await p.waitForFunction(() => (document.querySelector("#usage")?.textContent ?? "").startsWith("0 attempts"));
    const long = `a long answer for the modes test, ${"streamed slowly by the paced echo model; ".repeat(36)}the end`;
    await compose(p, "accept", long);
    const started = Date.now();
    // The live generation is listed with its status, and its preview grows as the answer streams.
    await p.waitForSelector("#tasks li", { timeout: 30_000 });
    assert.match((await p.textContent("#tasks li")) ?? "", /generation/);
    await p.waitForFunction(
      () => (document.querySelector("#tasks li .preview")?.textContent ?? "").includes("a long answer"),
      undefined,
      { timeout: 30_000 },
    );
    const firstPreview = (await p.textContent("#tasks li .preview")) ?? "";
    assert.ok(long.startsWith(firstPreview), firstPreview);
    assert.ok(firstPreview.length < long.length, "the first preview is a part of the answer");
    // While it runs, followUp, steer and nextRun queue, and each shows with its mode.
    await compose(p, "followUp", "a follow-up to withdraw");
    await p.waitForFunction(() =>
      [...document.querySelectorAll("#inbox li")].some((li) =>
        li.textContent?.startsWith("followUp: a follow-up to withdraw"),
      ),
    );
    const followUpShown = Date.now() - started;
    await compose(p, "steer", "a steer for the next group");
    await compose(p, "nextRun", "held for the next run");
    await p
      .waitForFunction(() => document.querySelectorAll("#inbox li").length === 3, undefined, { timeout: 30_000 })
      .catch(async (error: unknown) => {
        assert.fail(
          `after ${Date.now() - started} ms (the follow-up shown after ${followUpShown} ms): queued: ${JSON.stringify(await queued(p))}, status: ${(await p.textContent("#status")) ?? ""}, transcript: ${(await p.textContent("#transcript"))?.slice(-300) ?? ""}: ${String(error)}`,
        );
      });
    const modes = (await queued(p)).map((text) => text.split(":")[0]);
    assert.deepEqual(modes, ["followUp", "steer", "nextRun"]);
    assert.ok(await p.isVisible("#tasks li"), "the long answer is still streaming");
    await screenshot(p, "console-live-turn.png");
    await p.click('#inbox li:has-text("a follow-up to withdraw") button');
    await p.waitForFunction(() => document.querySelectorAll("#inbox li").length === 2, undefined, { timeout: 30_000 });
    // The long answer ends; the steer starts the next group and is answered; the nextRun waits for the
    // next explicit accept; the withdrawn follow-up is never placed.
    await p.waitForFunction(
      (text) =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) => e.textContent?.includes(text)).length >= 2,
      long,
      { timeout: 90_000 },
    );
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) =>
          e.textContent?.includes("a steer for the next group"),
        ).length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 30_000 });
    assert.deepEqual(
      (await queued(p)).map((text) => text.split(":")[0]),
      ["nextRun"],
    );
    await compose(p, "accept", "now go");
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].some((e) => e.textContent?.includes("now go")) &&
        document.querySelectorAll("#inbox li").length === 0,
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].some((e) =>
          e.textContent?.includes("held for the next run"),
        ),
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 30_000 });
    assert.equal(await shownWith(p, "a follow-up to withdraw"), 0);
    const entries = (await (await api("GET", `/v1/sessions/${name}/conversations/root/entries?limit=100`)).json()) as {
      items: { id: number }[];
    };
    assert.deepEqual(
      await shownEntries(p),
      entries.items.map((entry) => entry.id),
    );
    // Usage: the totals the console shows follow the session's, without a reload.
    const totals = (
      (await (await api("GET", `/v1/sessions/${name}/usage?limit=1`)).json()) as { totals: { attempts: number } }
    ).totals;
    assert.ok(totals.attempts >= 3, JSON.stringify(totals));
    await p
      .waitForFunction(
        (n) => (document.querySelector("#usage")?.textContent ?? "").startsWith(`${n} attempts`),
        totals.attempts,
        { timeout: 30_000 },
      )
      .catch(async (error: unknown) => {
        assert.fail(
          `usage shows "${(await p.textContent("#usage")) ?? ""}", the session's totals are ${JSON.stringify(totals)}: ${String(error)}`,
        );
      });
    await p.close();
  });
});

void describe("console composer while a send is in flight", { timeout: 120_000 }, () => {
  void it("keeps the text typed while the previous input was in flight, and sends it", async () => {
    const name = `typing-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, {})).status, 201);
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    // Hold the first accept's response until the next input has been typed.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let answered: () => void = () => undefined;
    const responded = new Promise<void>((resolve) => (answered = resolve));
    await p.route(
      "**/conversations/root/inputs",
      async (route) => {
        await held;
        await route.continue();
        answered();
      },
      { times: 1 },
    );
    await compose(p, "accept", "the first input");
    await p.fill("#input", "typed while the first was sent");
    release();
    await responded;
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) => e.textContent?.includes("the first input"))
          .length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    assert.equal(await p.inputValue("#input"), "typed while the first was sent");
    await p.click("#send");
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) =>
          e.textContent?.includes("typed while the first was sent"),
        ).length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    // The box empties when the accept's response arrives, which can be after the watch has shown the
    // answer (two connections): wait for it rather than read it once.
    await p
      .waitForFunction(() => document.querySelector<HTMLTextAreaElement>("#input")?.value === "", undefined, {
        timeout: 30_000,
      })
      .catch(async (error: unknown) => {
        assert.fail(
          `the composer still holds "${await p.inputValue("#input")}" after the sent input was answered: ${String(error)}`,
        );
      });
    await p.close();
  });
});

void describe("console tasks and operator actions", { timeout: 120_000 }, () => {
  void it("shows a job's live output under its task while it runs", async () => {
    const name = `job-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { selectedTools: ["echo", "job"] })).status, 201);
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await compose(p, "accept", '/call job {"cmd":"demo count 40 250"}');
    // The job's task shows its scratch output as it grows (1..40, one line every 250 ms), before it ends.
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#tasks li")].some(
          (li) =>
            li.textContent?.includes(" job ") && (li.querySelector(".preview")?.textContent ?? "").includes("3\n"),
        ),
      undefined,
      { timeout: 30_000 },
    );
    const early =
      (
        await p.$$eval("#tasks li", (items) =>
          items
            .filter((li) => li.textContent?.includes(" job "))
            .map((li) => li.querySelector(".preview")?.textContent ?? ""),
        )
      )[0] ?? "";
    assert.ok(!early.includes("40"), `the output is live, not the final: ${early}`);
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#tasks li")].some(
          (li) =>
            li.textContent?.includes(" job ") && (li.querySelector(".preview")?.textContent ?? "").includes("12\n"),
        ),
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 60_000 });
    await p.close();
  });

  // A real fault or quarantine needs a session to fail-stop or an object to be killed three times mid-task;
  // here the server's inspect answers are replaced (the operator's buttons still send real requests,
  // which are recorded) to check what the console shows and which routes its buttons call.
  void it("shows a fault and a quarantined task from inspect, and release and clear fault call their routes", async () => {
    const name = `inspect-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, {})).status, 201);
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    const faulted = {
      start: [],
      inflight: [],
      orphaned: [],
      parked: [],
      quarantined: [{ id: 42, conversationId: 1, kind: "generation", role: "inflight", state: {}, after: [] }],
      fault: { at: 1, taskId: 42, kind: "generation", method: "execute", message: "boom: a kind threw" },
      kills: [{ taskId: 42, kills: 3, version: "v1" }],
      killBound: 3,
      version: "v1",
      busy: false,
    };
    const healthy = { ...faulted, quarantined: [], fault: undefined, kills: [] };
    let answer: object = faulted;
    const calls: string[] = [];
    await p.route(`**/v1/sessions/${name}/inspect`, (route) => route.fulfill({ json: answer }));
    await p.route(`**/v1/sessions/${name}/tasks/42/release`, (route) => {
      calls.push(`${route.request().method()} release`);
      return route.fulfill({ json: { released: true } });
    });
    await p.route(`**/v1/sessions/${name}/fault/clear`, (route) => {
      calls.push(`${route.request().method()} clear`);
      answer = healthy;
      return route.fulfill({ json: { cleared: true } });
    });
    await p.click("#inspect");
    await p.waitForSelector("#quarantined li");
    assert.match((await p.textContent("#inspection")) ?? "", /boom: a kind threw/);
    assert.match((await p.textContent("#quarantined li")) ?? "", /quarantined #42 generation/);
    await p.click("#quarantined li button");
    await p.waitForFunction(() => (document.querySelector("#status")?.textContent ?? "") === "");
    await p.click("#clear-fault");
    await p.waitForFunction(
      () =>
        (document.querySelector("#inspection")?.textContent ?? "").includes('"fault": null') &&
        document.querySelectorAll("#quarantined li").length === 0,
    );
    assert.deepEqual(calls, ["POST release", "POST clear"]);
    await p.close();
  });

  void it("shuts a session down from the operator panel: its live turn ends and inspect shows it idle", async () => {
    const name = `shutdown-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { model: "echo-slow" })).status, 201);
    const p = await page();
    await signIn(p);
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForFunction(() => !(document.querySelector("#transcript")?.textContent ?? "").includes("loading"));
    await compose(p, "accept", `a turn to shut down, ${"streamed slowly; ".repeat(40)}`);
    await p.waitForSelector("#tasks li", { timeout: 30_000 });
    await p.click("#inspect");
    await p.waitForFunction(
      () => (document.querySelector("#inspection")?.textContent ?? "").includes('"busy": true'),
      undefined,
      { timeout: 30_000 },
    );
    await p.click("#shutdown");
    await p.waitForFunction(
      () => (document.querySelector("#inspection")?.textContent ?? "").includes('"busy": false'),
      undefined,
      { timeout: 30_000 },
    );
    const tasks = (await (await api("GET", `/v1/sessions/${name}/tasks?live=true`)).json()) as { items: unknown[] };
    assert.deepEqual(tasks.items, []);
    await p.waitForFunction(() => document.querySelectorAll("#tasks li").length === 0, undefined, { timeout: 30_000 });
    // Clear fault on a session without one changes nothing and reports no error.
    await p.click("#clear-fault");
    await p.waitForFunction(() => (document.querySelector("#inspection")?.textContent ?? "").includes('"fault": null'));
    assert.equal(await p.textContent("#status"), "");
    await p.close();
  });
});

/** The transcript's entry ids as the console shows them, in order. */
async function shownEntries(p: Page): Promise<number[]> {
  return p.$$eval("#transcript .entry", (rows) => rows.map((row) => Number(row.getAttribute("data-entry"))));
}

void describe("console watches", { timeout: 120_000 }, () => {
  void it("watches with EventSource and watch tokens, and after a dropped stream and an expired token resumes without a gap or duplicate", async () => {
    if (proxy === undefined) throw new Error("no proxy");
    const name = `resume-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, {})).status, 201);
    assert.equal(
      (await api("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=10`, { input: "before the drop" }))
        .status,
      201,
    );
    const p = await page();
    await signIn(p, PROXIED);
    const signedInWith = await p.evaluate(() => sessionStorage.getItem("pico-edge.token") ?? "");
    await p.click(`#sessions li[data-session="${name}"]`);
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) => e.textContent?.includes("before the drop"))
          .length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    const watchPath = `/v1/sessions/${name}/conversations/root/watch`;
    const watches = (): URL[] =>
      proxy?.requests
        .filter((r) => r.method === "GET" && r.url.startsWith(`${watchPath}?`))
        .map((r) => new URL(r.url, PROXIED)) ?? [];
    // One watch so far, or more when the page took longer than a token's life to get here (a loaded
    // machine): the first connection carries a watch token and no resume position.
    assert.ok(watches().length >= 1);
    const first = watches()[0];
    assert.ok(first?.searchParams.get("access_token"));
    assert.equal(first?.searchParams.get("lastEventId"), null);
    // No bearer token in any URL: only watch tokens.
    for (const request of proxy.requests) assert.ok(!request.url.includes(signedInWith), request.url);

    // Outlive the watch token, then drop every connection: the browser's own reconnect would use the
    // expired token, so the console must mint a fresh one and resume with ?lastEventId=.
    await new Promise((resolve) => setTimeout(resolve, (WATCH_TOKEN_SECONDS + 1) * 1000));
    const beforeDrop = watches().length;
    // The dropped watch streams end unfinished: the browser reports each (and nothing else may go wrong).
    expectProblems("/watch?access_token=", "net::ERR_INCOMPLETE_CHUNKED_ENCODING");
    proxy.drop();
    assert.equal(
      (await api("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=10`, { input: "while it was away" }))
        .status,
      201,
    );
    const deadline = Date.now() + 30_000;
    const resumedAfterDrop = (): URL | undefined =>
      watches()
        .slice(beforeDrop)
        .find((url) => url.searchParams.get("lastEventId") !== null);
    while (resumedAfterDrop() === undefined) {
      if (Date.now() > deadline) throw new Error(`no resumed watch: ${JSON.stringify(proxy.requests.slice(-10))}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const resumed = resumedAfterDrop();
    assert.notEqual(resumed?.searchParams.get("access_token"), first?.searchParams.get("access_token"));
    assert.equal(
      (await api("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=10`, { input: "after the reconnect" }))
        .status,
      201,
    );
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll("#transcript .entry")].filter((e) =>
          e.textContent?.includes("after the reconnect"),
        ).length >= 2,
      undefined,
      { timeout: 30_000 },
    );
    const entries = (await (await api("GET", `/v1/sessions/${name}/conversations/root/entries?limit=100`)).json()) as {
      items: { id: number }[];
    };
    assert.deepEqual(
      await shownEntries(p),
      entries.items.map((entry) => entry.id),
    );
    await p.close();
  });
});

// The product's endpoint (scripts/tool-endpoint.ts) on PORT + 30 checks signatures with this tenant's tool secrets.
void describe("console pending list", { timeout: 120_000 }, () => {
  void it("approves one, denies one and answers one pending item, reloading in between", async () => {
    const endpoint = await startToolEndpoint({
      port: PORT + 30,
      tenant,
      api: BASE,
      masterSecret: "browser-test-webhook-master",
      delayMs: 100,
      holdMs: 0,
      log: () => undefined,
    });
    try {
      const name = `pending-${Date.now().toString(36)}`;
      const [params, http] = [
        { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
        { type: "http", url: `http://127.0.0.1:${PORT + 30}/lookup` },
      ];
      const selectedTools = ["pay_invoice", "delete_account", "confirm_address"];
      for (const tool of selectedTools) {
        const approval =
          tool === "confirm_address" ? { handler: { type: "client" } } : { handler: http, approval: "always" };
        assert.equal(
          (await api("PUT", `/v1/tools/${tool}`, { description: `the ${tool} tool`, parameters: params, ...approval }))
            .status,
          201,
        );
      }
      assert.equal((await api("PUT", `/v1/sessions/${name}`, { selectedTools })).status, 201);
      const conversations = ["root"]; // one waiting call per conversation (a parked call holds its turn): the root and two forks
      for (let i = 0; i < 2; i++) {
        const fork = String(
          (
            (await (await api("POST", `/v1/sessions/${name}/conversations/root/fork`, { at: "start" })).json()) as {
              conversationId: number;
            }
          ).conversationId,
        );
        assert.equal(
          (await api("PATCH", `/v1/sessions/${name}/conversations/${fork}/config`, { model: "echo", selectedTools }))
            .status,
          200,
        );
        conversations.push(fork);
      }
      const inputs: number[] = [];
      for (const [i, tool] of selectedTools.entries()) {
        const accepted = await api("POST", `/v1/sessions/${name}/conversations/${conversations[i] ?? "root"}/inputs`, {
          input: `/call ${tool} {"id":${i + 1}}`,
        });
        inputs.push(((await accepted.json()) as { inputId: number }).inputId);
      }
      const p = await page();
      await signIn(p);
      const open = async (count: number): Promise<void> => {
        await p.click(`#sessions li[data-session="${name}"]`);
        await p.waitForFunction((n) => document.querySelectorAll("#pending li[data-pending]").length === n, count, {
          timeout: 30_000,
        });
      };
      const item = (tool: string): string => `#pending li[data-pending]:has-text("${tool}")`;
      await open(3);
      await p.click(`${item("pay_invoice")} button[data-action="approve"]`);
      await p.waitForSelector(item("pay_invoice"), { state: "detached", timeout: 30_000 });
      await p.reload();
      await open(2);
      await p.fill(`${item("delete_account")} input[data-field="reason"]`, "not without a ticket");
      await p.click(`${item("delete_account")} button[data-action="deny"]`);
      await p.waitForSelector(item("delete_account"), { state: "detached", timeout: 30_000 });
      await p.reload();
      await open(1);
      await p.fill(`${item("confirm_address")} textarea[data-field="output"]`, '{"confirmed":"12 Main St"}');
      await p.click(`${item("confirm_address")} button[data-action="answer"]`);
      await p.waitForSelector("#pending li.none", { timeout: 30_000 });
      // Each call settled once: the approved one ran the endpoint, the denied one did not, the answer is the output.
      const answers: string[] = [];
      for (const id of inputs) {
        let result: { status: string; answer?: number } = { status: "queued" };
        for (let tries = 0; result.status !== "done" && tries < 100; tries++) {
          result = ((await (await api("GET", `/v1/sessions/${name}/inputs/${id}`)).json()) as { result: typeof result })
            .result;
          if (result.status !== "done") await new Promise((resolve) => setTimeout(resolve, 200));
        }
        assert.equal(result.status, "done", `input ${id}`);
        const entries = (await (
          await api(
            "GET",
            `/v1/sessions/${name}/conversations/${conversations[inputs.indexOf(id)] ?? "root"}/entries?limit=100`,
          )
        ).json()) as { items: { id: number }[] };
        answers.push(JSON.stringify(entries.items.find((entry) => entry.id === result.answer)));
      }
      assert.match(answers[0] ?? "", /"id\\?":1/);
      assert.match(answers[1] ?? "", /denied.*not without a ticket/);
      assert.match(answers[2] ?? "", /12 Main St/);
      assert.deepEqual(
        endpoint.requests.map((r) => r.name),
        ["pay_invoice"],
      );
      await p.close();
    } finally {
      await endpoint.close();
    }
  });
});

void describe("a page on another origin", { timeout: 120_000 }, () => {
  void it("uses fetch, EventSource and WebSocket against the API", async () => {
    const p = await page();
    await p.goto(`http://127.0.0.1:${OTHER_PORT}/`);
    const result = await p.evaluate(
      async ({ base, auth }) => {
        const headers = { authorization: `Bearer ${auth}`, "content-type": "application/json" };
        const name = `cross-${Date.now()}`;
        const created = await fetch(`${base}/v1/sessions/${name}`, { method: "PUT", headers, body: "{}" });
        const accepted = await fetch(`${base}/v1/sessions/${name}/conversations/root/inputs?wait=10`, {
          method: "POST",
          headers,
          body: JSON.stringify({ input: "over CORS" }),
        });
        const answer = (await accepted.json()) as { status: string };
        const tokenResponse = await fetch(`${base}/v1/sessions/${name}/conversations/root/watch-token`, {
          method: "POST",
          headers,
          body: "{}",
        });
        const watchToken = ((await tokenResponse.json()) as { token: string }).token;
        const sse = await new Promise<string>((resolve, reject) => {
          const source = new EventSource(
            `${base}/v1/sessions/${name}/conversations/root/watch?access_token=${encodeURIComponent(watchToken)}`,
          );
          source.addEventListener("view", (event) => {
            source.close();
            resolve((event as MessageEvent<string>).data);
          });
          source.onerror = () => {
            source.close();
            reject(new Error("EventSource failed"));
          };
        });
        const ws = await new Promise<string>((resolve, reject) => {
          const socket = new WebSocket(
            `${base.replace("http", "ws")}/v1/sessions/${name}/conversations/root/watch?access_token=${encodeURIComponent(watchToken)}`,
          );
          socket.onmessage = (event) => {
            socket.close();
            resolve(String(event.data));
          };
          socket.onerror = () => reject(new Error("WebSocket failed"));
        });
        return { created: created.status, answer: answer.status, sse, ws };
      },
      { base: BASE, auth: await token("client") },
    );
    assert.equal(result.created, 201);
    assert.equal(result.answer, "done");
    assert.match(result.sse, /over CORS/);
    assert.match(result.ws, /"type":"view"/);
    await p.close();
  });
});

/** The texts of the messages the React page shows, as `role: text` in order. */
async function chatShown(p: Page): Promise<string[]> {
  return p.$$eval("#messages li", (items) =>
    items.map(
      (item) =>
        `${item.getAttribute("data-role") ?? ""}: ${[...item.querySelectorAll(".text")].map((t) => t.textContent).join("")}`,
    ),
  );
}

void describe("a React page with useChat", { timeout: 120_000 }, () => {
  void it("A React page with useChat talks to a session in Chromium", async () => {
    const name = `react-${Date.now().toString(36)}`;
    assert.equal((await api("PUT", `/v1/sessions/${name}`, { model: "echo/echo" })).status, 201);
    // The product's backend mints the page a user token that reaches this session.
    const minted = await api("POST", "/v1/tokens", { sub: "dana", sessions: [name], ttlSeconds: 900 });
    assert.equal(minted.status, 201);
    const userToken = ((await minted.json()) as { token: string }).token;
    const fragment = new URLSearchParams({ base: BASE, session: name, token: userToken }).toString();
    const url = `http://127.0.0.1:${OTHER_PORT}/use-chat/#${fragment}`;
    const p = await page();
    const chatRequests: string[] = [];
    p.on("request", (request) => {
      if (request.url().includes(`/v1/sessions/${name}/chat`))
        chatRequests.push(`${request.method()} ${new URL(request.url()).pathname}`);
    });
    await p.goto(url);
    // An empty history, and nothing live to resume (the stream route's 204).
    await p.waitForSelector('#status[data-status="ready"]');
    await p.waitForFunction(() => document.querySelector("#send") !== null);
    assert.deepEqual(await chatShown(p), []);
    await p.fill("#input", "hello from React");
    await p.click("#send");
    // The echo model's answer, rendered by React from the assistant message's text part.
    await p.waitForFunction(
      () =>
        [...document.querySelectorAll('#messages li[data-role="assistant"] .text')].some(
          (t) => t.textContent === "hello from React",
        ),
      undefined,
      { timeout: 30_000 },
    );
    await p.waitForSelector('#status[data-status="ready"]', { timeout: 30_000 });
    assert.deepEqual(await chatShown(p), ["user: hello from React", "assistant: hello from React"]);
    assert.ok(chatRequests.includes(`POST /v1/sessions/${name}/chat`), chatRequests.join("\n"));
    // The session holds the exchange once.
    const history = (await (await api("GET", `/v1/sessions/${name}/chat/root/messages`)).json()) as {
      role: string;
    }[];
    assert.deepEqual(
      history.map((message) => message.role),
      ["user", "assistant"],
    );
    // A reload starts from the server's history (GET .../chat/root/messages): both messages, once each.
    chatRequests.length = 0;
    await p.reload();
    await p.waitForFunction(() => document.querySelectorAll("#messages li").length >= 2, undefined, {
      timeout: 30_000,
    });
    await p.waitForSelector('#status[data-status="ready"]');
    assert.deepEqual(await chatShown(p), ["user: hello from React", "assistant: hello from React"]);
    assert.ok(chatRequests.includes(`GET /v1/sessions/${name}/chat/root/messages`), chatRequests.join("\n"));
    assert.ok(chatRequests.includes(`GET /v1/sessions/${name}/chat/root/stream`), chatRequests.join("\n"));
    await p.close();
  });

  void it("A useChat page reloads mid-approval, approves, and sees one answer", async () => {
    const endpoint = await startToolEndpoint({
      port: PORT + 31,
      tenant,
      api: BASE,
      masterSecret: "browser-test-webhook-master",
      delayMs: 0,
      holdMs: 0,
      log: () => undefined,
    });
    try {
      const tool = {
        description: "ships an order",
        parameters: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
        handler: { type: "http", url: `http://127.0.0.1:${PORT + 31}/lookup` },
        approval: "always",
      };
      assert.equal((await api("PUT", "/v1/tools/ship_order", tool)).status, 201);
      const name = `react-approve-${Date.now().toString(36)}`;
      assert.equal(
        (await api("PUT", `/v1/sessions/${name}`, { model: "echo/echo", selectedTools: ["ship_order"] })).status,
        201,
      );
      const minted = await api("POST", "/v1/tokens", { sub: "dana", sessions: [name], ttlSeconds: 900 });
      assert.equal(minted.status, 201);
      const userToken = ((await minted.json()) as { token: string }).token;
      const fragment = new URLSearchParams({ base: BASE, session: name, token: userToken }).toString();
      const p = await page();
      await p.goto(`http://127.0.0.1:${OTHER_PORT}/use-chat/#${fragment}`);
      await p.waitForSelector('#status[data-status="ready"]');
      await p.fill("#input", '/call ship_order {"id":8}');
      await p.click("#send");
      await p.waitForSelector('.tool[data-state="approval-requested"] .approve', { timeout: 30_000 });

      // The reload: the page starts again from the server's history, the approval still asked.
      await p.reload();
      await p.waitForSelector('.tool[data-state="approval-requested"] .approve', { timeout: 30_000 });
      await p.waitForSelector('#status[data-status="ready"]');
      await p.click(".approve");
      await p.waitForSelector('.tool[data-state="output-available"]', { state: "attached", timeout: 30_000 });
      await p.waitForSelector('#status[data-status="ready"]', { timeout: 30_000 });
      const shown = await chatShown(p);
      assert.equal(shown.length, 2, shown.join("\n"));
      assert.equal(shown[0], 'user: /call ship_order {"id":8}');
      // One input, one call, one answer: nothing asks again.
      const entries = async (kind: string): Promise<number> =>
        (
          (await (await api("GET", `/v1/sessions/${name}/conversations/root/entries?kind=${kind}`)).json()) as {
            items: unknown[];
          }
        ).items.length;
      assert.equal(await entries("user"), 1);
      assert.equal(await entries("tool_result"), 1);
      assert.equal(await p.$$eval(".approve", (buttons) => buttons.length), 0);

      // Edit: the newest user message gets another text; the chat follows the fork and shows its answer.
      await p.fill("#input", "an edited message");
      await p.click("#edit");
      await p.waitForFunction(
        () =>
          [...document.querySelectorAll('#messages li[data-role="assistant"] .text')].some(
            (t) => t.textContent === "an edited message",
          ),
        undefined,
        { timeout: 30_000 },
      );
      await p.waitForSelector('#status[data-status="ready"]', { timeout: 30_000 });
      assert.deepEqual(await chatShown(p), ["user: an edited message", "assistant: an edited message"]);
      // Regenerate: the answer runs again on a fork; still one exchange on the page, and after a reload.
      await p.click("#regenerate");
      await p.waitForSelector('#status[data-status="ready"]', { timeout: 30_000 });
      assert.deepEqual(await chatShown(p), ["user: an edited message", "assistant: an edited message"]);
      await p.reload();
      await p.waitForFunction(() => document.querySelectorAll("#messages li").length >= 2, undefined, {
        timeout: 30_000,
      });
      assert.deepEqual(await chatShown(p), ["user: an edited message", "assistant: an edited message"]);
      // The first branch is a conversation of its own, unchanged.
      assert.equal(await entries("user"), 1);
      await p.close();
    } finally {
      await endpoint.close();
    }
  });
});
