/**
 * `npm run bench:load -- --profile`: a CPU profile of the Worker's isolate (its routes and its Durable Objects run
 * in one isolate under `wrangler dev --local`) over a run's measured phase, through the DevTools protocol wrangler
 * dev serves on its --inspector-port. Writes the `.cpuprofile` (open it in Chrome DevTools) and prints the functions
 * with the most self time and the source files with the most, as shares of the sampled time.
 */
import { writeFileSync } from "node:fs";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/** A started profile: `stop` ends it and answers the profile. */
export interface Profiling {
  stop(): Promise<Profile>;
}

async function target(inspector: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${inspector}/json`);
  const targets = (await response.json()) as { webSocketDebuggerUrl?: string; title?: string }[];
  const url = targets.find((t) => t.webSocketDebuggerUrl !== undefined)?.webSocketDebuggerUrl;
  if (url === undefined) throw new Error(`no inspector target on port ${inspector}`);
  return url;
}

/** Start sampling the Worker's isolate (every 200 µs). */
export async function startProfile(inspector: number): Promise<Profiling> {
  // wrangler's inspector proxy wants an Origin it allows (undici's WebSocket takes headers as an extension).
  const socket = new WebSocket(await target(inspector), {
    headers: { Origin: "http://localhost" },
  } as unknown as string[]);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve(), { once: true });
    socket.addEventListener("error", () => reject(new Error("inspector connection failed")), { once: true });
  });
  let next = 0;
  const waiting = new Map<number, (result: unknown) => void>();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  const send = (method: string, params: Record<string, unknown> = {}): Promise<unknown> =>
    new Promise((resolve) => {
      next += 1;
      waiting.set(next, resolve);
      socket.send(JSON.stringify({ id: next, method, params }));
    });
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 200 });
  await send("Profiler.start");
  return {
    stop: async () => {
      const result = (await send("Profiler.stop")) as { profile: Profile };
      socket.close();
      return result.profile;
    },
  };
}

function place(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^.*\/(src|node_modules)\//, "$1/");
  return `${functionName === "" ? "(anonymous)" : functionName} ${file === "" ? "" : `${file}:${lineNumber + 1}`}`;
}

function fileOf(node: ProfileNode): string {
  const url = node.callFrame.url;
  if (url === "") return `(${node.callFrame.functionName || "native"})`;
  const pkg = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg !== null) return `node_modules/${pkg[1]}`;
  return url.replace(/^.*\/src\//, "src/");
}

/** Save the profile as `path` and print its top functions and files by self time. */
export function summarize(profile: Profile, path: string, label: string, top = 30): string {
  writeFileSync(path, JSON.stringify(profile));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let total = 0;
  samples.forEach((id, i) => {
    const dt = deltas[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  });
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (node === undefined) continue;
    fn.set(place(node), (fn.get(place(node)) ?? 0) + us);
    file.set(fileOf(node), (file.get(fileOf(node)) ?? 0) + us);
  }
  const idle = [...fn].filter(([name]) => name.startsWith("(idle)")).reduce((n, [, us]) => n + us, 0);
  const busy = total - idle;
  const rows = (map: Map<string, number>): string[] =>
    [...map]
      .filter(([name]) => !name.startsWith("(idle)"))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(
        ([name, us]) =>
          `  ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`,
      );
  return [
    `${label}: ${(busy / 1000).toFixed(0)} ms sampled busy (${(idle / 1000).toFixed(0)} ms idle), profile ${path}`,
    "self time by function:",
    ...rows(fn),
    "self time by file or package:",
    ...rows(file),
  ].join("\n");
}
