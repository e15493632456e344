/**
 * The two ExecutionEnvs (§8.6, docs/jobs.md): the scripted fake on a FakeClock, and the Sandbox SDK
 * adapter driven through a fake of the SDK slice it uses (`SandboxExec`, typed from the SDK's own
 * `ISandbox`, so an SDK change that breaks the adapter breaks the type check).
 */
import type { ExecOptions as SdkExecOptions, ExecResult as SdkExecResult, Sandbox } from "@cloudflare/sandbox";
import { describe, expect, it } from "vitest";
import { FileSystemError } from "../../src/kinds/exec-env.js";
import { FakeExecutionEnv } from "../../src/kinds/exec-fake.js";
import { SandboxExecutionEnv, sandboxEnvFor, type SandboxExec } from "../../src/worker/platform/sandbox-env.js";
import { FakeClock } from "../core/driver-fixtures.js";

describe("scripted fake ExecutionEnv", () => {
  it("prints, sleeps on the injected clock and exits with a code; onUpdate sees each chunk as it is printed", async () => {
    const clock = new FakeClock();
    const env = new FakeExecutionEnv({ clock });
    const chunks: string[] = [];
    const running = env.exec("demo count 3 500; echo done; exit 2", { onUpdate: (c) => chunks.push(c) });
    await Promise.resolve();
    expect(chunks).toEqual(["1\n"]);
    clock.advance(500);
    await Promise.resolve();
    expect(chunks).toEqual(["1\n", "2\n"]);
    clock.advance(500);
    expect(await running).toEqual({ exitCode: 2, output: "1\n2\n3\ndone\n", totalChars: 11 });
  });

  it("keeps only the tail within limits; an unknown command exits 127", async () => {
    const env = new FakeExecutionEnv({ clock: new FakeClock() });
    expect(await env.exec("repeat 3 abc", { limits: { maxChars: 5 } })).toEqual({
      exitCode: 0,
      output: "\nabc\n",
      totalChars: 12,
    });
    expect((await env.exec("frobnicate", {})).exitCode).toBe(127);
  });

  it("a kill rejects with the signal's reason and stops output", async () => {
    const clock = new FakeClock();
    const env = new FakeExecutionEnv({ clock });
    const controller = new AbortController();
    const chunks: string[] = [];
    const running = env.exec("demo count 5 1000", { signal: controller.signal, onUpdate: (c) => chunks.push(c) });
    const reason = new Error("killed");
    controller.abort(reason);
    await expect(running).rejects.toBe(reason);
    clock.advance(10_000);
    expect(chunks).toEqual(["1\n"]);
  });
});

describe("the fake's FileSystem half", () => {
  it("an in-memory tree under / with /workspace as the working directory; errors name their code and path", async () => {
    const env = new FakeExecutionEnv({
      clock: new FakeClock(),
      files: { "notes/todo.md": "- ship", "/etc/motd": "hi" },
    });
    expect(await env.readFile("/workspace/notes/todo.md")).toBe("- ship");
    expect(await env.readFile("notes/../notes/./todo.md")).toBe("- ship");
    expect(await env.listFiles("/")).toEqual([
      { name: "etc", type: "directory", size: 0 },
      { name: "workspace", type: "directory", size: 0 },
    ]);
    await env.writeFile("notes/done.md", "ünï");
    expect(await env.listFiles("notes")).toEqual([
      { name: "done.md", type: "file", size: 5 },
      { name: "todo.md", type: "file", size: 6 },
    ]);
    await expect(env.writeFile("missing/dir/x", "")).rejects.toMatchObject({
      code: "not_found",
      path: "/workspace/missing/dir",
    });
    await expect(env.readFile("notes")).rejects.toMatchObject({ code: "not_a_file" });
    await expect(env.listFiles("notes/todo.md")).rejects.toMatchObject({ code: "not_a_directory" });
    await expect(env.mkdir("a/b")).rejects.toMatchObject({ code: "not_found" });
    await env.mkdir("a/b", { recursive: true });
    expect(await env.exists("/workspace/a/b")).toBe(true);
    await env.deleteFile("notes/done.md");
    expect(await env.exists("notes/done.md")).toBe(false);
    await expect(env.deleteFile("notes/done.md")).rejects.toBeInstanceOf(FileSystemError);
  });
});

describe("Sandbox SDK adapter", () => {
  function fakeSandbox(script: (options: SdkExecOptions) => Promise<number>): {
    sandbox: SandboxExec;
    seen: { command: string; options: SdkExecOptions }[];
  } {
    const seen: { command: string; options: SdkExecOptions }[] = [];
    const sandbox: SandboxExec = {
      async exec(command: string, options?: SdkExecOptions): Promise<SdkExecResult> {
        const opts = options ?? {};
        seen.push({ command, options: opts });
        const exitCode = await script(opts);
        return {
          success: exitCode === 0,
          exitCode,
          stdout: "",
          stderr: "",
          command,
          duration: 1,
          timestamp: new Date(0).toISOString(),
        };
      },
      ...sdkFiles(new FakeExecutionEnv({ clock: new FakeClock() })),
    };
    return { sandbox, seen };
  }

  /** The SDK's file calls over an in-memory tree (the fake env's), failing as the SDK does: with a plain error. */
  function sdkFiles(fs: FakeExecutionEnv): Omit<SandboxExec, "exec"> {
    const timestamp = new Date(0).toISOString();
    const plain = async <T>(op: () => Promise<T>): Promise<T> => {
      try {
        return await op();
      } catch (error) {
        throw new Error(`SDK: ${(error as Error).message}`);
      }
    };
    return {
      readFile: (async (path: string) => ({
        success: true,
        path,
        content: await plain(() => fs.readFile(path)),
        timestamp,
      })) as SandboxExec["readFile"],
      writeFile: async (path: string, content: string | ReadableStream<Uint8Array>) => {
        await plain(() => fs.writeFile(path, typeof content === "string" ? content : ""));
        return { success: true, path, timestamp };
      },
      exists: async (path: string) => ({ success: true, path, exists: await fs.exists(path), timestamp }),
      listFiles: async (path: string) => {
        const files = await plain(() => fs.listFiles(path));
        return {
          success: true,
          path,
          count: files.length,
          timestamp,
          files: files.map((f) => ({
            name: f.name,
            absolutePath: `${path}/${f.name}`,
            relativePath: f.name,
            type: f.type,
            size: f.size,
            modifiedAt: timestamp,
            mode: "rw-r--r--",
            permissions: { readable: true, writable: true, executable: false },
          })),
        };
      },
      mkdir: async (path: string, options?: { recursive?: boolean }) => {
        await plain(() => fs.mkdir(path, options));
        return { success: true, path, recursive: options?.recursive === true, timestamp };
      },
      deleteFile: async (path: string) => {
        await plain(() => fs.deleteFile(path));
        return { success: true, path, timestamp };
      },
    };
  }

  it("FileSystem half: reads, writes, lists, creates and deletes through the SDK's file calls; a missing path is not_found", async () => {
    const { sandbox } = fakeSandbox(async () => 0);
    const env = new SandboxExecutionEnv(sandbox);
    await env.mkdir("/workspace/src", { recursive: true });
    await env.writeFile("/workspace/src/a.txt", "alpha");
    expect(await env.readFile("/workspace/src/a.txt")).toBe("alpha");
    expect(await env.exists("/workspace/src/a.txt")).toBe(true);
    expect(await env.listFiles("/workspace/src")).toEqual([{ name: "a.txt", type: "file", size: 5 }]);
    await env.deleteFile("/workspace/src/a.txt");
    expect(await env.exists("/workspace/src/a.txt")).toBe(false);
    const missing = await env.readFile("/workspace/nope.txt").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(missing).toBeInstanceOf(FileSystemError);
    expect(missing).toMatchObject({ code: "not_found", path: "/workspace/nope.txt" });
    await expect(env.listFiles("/workspace/src/..x")).rejects.toMatchObject({ code: "not_found" });
  });

  it("streams the SDK's onOutput (stdout and stderr in arrival order) to onUpdate, keeps a bounded tail, returns the exit code", async () => {
    const { sandbox, seen } = fakeSandbox(async (o) => {
      o.onOutput?.("stdout", "hello ");
      o.onOutput?.("stderr", "warn ");
      o.onOutput?.("stdout", "world\n");
      return 3;
    });
    const env = new SandboxExecutionEnv(sandbox);
    const chunks: string[] = [];
    const result = await env.exec("make test", {
      cwd: "/workspace/app",
      env: { CI: "1" },
      onUpdate: (c) => chunks.push(c),
      limits: { maxChars: 8 },
    });
    expect(chunks).toEqual(["hello ", "warn ", "world\n"]);
    expect(result).toEqual({ exitCode: 3, output: "n world\n", totalChars: 17 });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.command).toBe("make test");
    expect(seen[0]?.options).toMatchObject({ stream: true, cwd: "/workspace/app", env: { CI: "1" } });
  });

  it("passes the kill signal to the SDK; a killed exec rejects with the signal's reason, late output is dropped", async () => {
    const controller = new AbortController();
    const reason = new Error("killed");
    const { sandbox, seen } = fakeSandbox(async (o) => {
      o.onOutput?.("stdout", "before\n");
      controller.abort(reason);
      o.onOutput?.("stdout", "after\n");
      throw new Error("Operation was aborted");
    });
    const chunks: string[] = [];
    await expect(
      new SandboxExecutionEnv(sandbox).exec("sleep 100", {
        signal: controller.signal,
        onUpdate: (c) => chunks.push(c),
      }),
    ).rejects.toBe(reason);
    expect(seen[0]?.options.signal).toBe(controller.signal);
    expect(chunks).toEqual(["before\n"]);
  });

  it("is enabled only when the SANDBOX binding is configured", () => {
    expect(sandboxEnvFor({}, "s")).toBeUndefined();
    // With the binding, the session gets the adapter (the SDK is loaded and the sandbox addressed only on
    // the first exec, so a stand-in namespace is enough here).
    const binding = { SANDBOX: {} as unknown as DurableObjectNamespace<Sandbox> };
    const enabled = sandboxEnvFor(binding, "s");
    expect(enabled).toBeInstanceOf(SandboxExecutionEnv);
    expect(enabled?.name).toBe("sandbox");
  });
});
