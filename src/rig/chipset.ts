/**
 * The filesystem contract (seed 000 "Filesystem Contract", seed 002 escalation paths): the
 * `.chipset/state/` tree other Gastown tools read, laid out from session state: `hooks/{agent_id}.json`
 * (the hook file, sorted keys, as the document's `serializeSorted` writes it) and
 * `mail/{owner}/{timestamp}-{from}.json` for every mailbox (the mayor's, the witness's and each registered
 * agent's, every message, read page by page; a second message with the same name gets its id appended). Exported as a
 * POSIX ustar archive, which `tar -x` unpacks.
 */
import { RigError } from "./errors.js";
import { serializeSorted } from "./hooks.js";
import type { Rig } from "./rig.js";
import { MAYOR_ID, WITNESS_ID, type Actor } from "./types.js";

export interface ChipsetFile {
  readonly path: string;
  readonly content: string;
}

/** Every file of `.chipset/state/` (mayor and operators only). */
export async function chipsetFiles(rig: Rig, actor: Actor): Promise<ChipsetFile[]> {
  if (actor.role !== "mayor" && actor.role !== "operator")
    throw new RigError(
      "rig_forbidden",
      `only the mayor or an operator exports the rig state (this token's role is ${actor.role})`,
    );
  const files: ChipsetFile[] = [];
  const agents: string[] = [];
  for (const listing of await rig.agents()) {
    agents.push(listing.agent.agent_id);
    files.push({
      path: `.chipset/state/hooks/${listing.agent.agent_id}.json`,
      content: serializeSorted(listing.hook.hook),
    });
  }
  for (const owner of [MAYOR_ID, WITNESS_ID, ...agents]) {
    const taken = new Set<string>();
    for await (const message of rig.mailbox(owner)) {
      const { id, ...file } = message;
      let name = `${message.timestamp}-${message.from}.json`;
      if (taken.has(name)) name = `${message.timestamp}-${message.from}-${id}.json`;
      taken.add(name);
      files.push({ path: `.chipset/state/mail/${owner}/${name}`, content: serializeSorted(file) });
    }
  }
  return files;
}

export async function chipsetArchive(rig: Rig, actor: Actor): Promise<Uint8Array> {
  return tar(await chipsetFiles(rig, actor), Math.floor(rig.now() / 1000));
}

const BLOCK = 512;

/** A ustar archive of regular files (mode 0644) and their parent directories. */
export function tar(files: readonly ChipsetFile[], mtime: number): Uint8Array {
  const encoder = new TextEncoder();
  const dirs = new Set<string>();
  for (const file of files) {
    const parts = file.path.split("/");
    for (let i = 1; i < parts.length; i++) dirs.add(`${parts.slice(0, i).join("/")}/`);
  }
  const chunks: Uint8Array[] = [];
  for (const dir of [...dirs].sort()) chunks.push(header(encoder, dir, 0, mtime, "5", 0o755));
  for (const file of files) {
    const data = encoder.encode(file.content);
    chunks.push(header(encoder, file.path, data.length, mtime, "0", 0o644));
    const padded = new Uint8Array(Math.ceil(data.length / BLOCK) * BLOCK);
    padded.set(data);
    chunks.push(padded);
  }
  chunks.push(new Uint8Array(BLOCK * 2));
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

function header(
  encoder: TextEncoder,
  path: string,
  size: number,
  mtime: number,
  type: "0" | "5",
  mode: number,
): Uint8Array {
  const h = new Uint8Array(BLOCK);
  const bytes = encoder.encode(path);
  let name: Uint8Array = bytes;
  let prefix: Uint8Array = new Uint8Array(0);
  if (bytes.length > 100) {
    const cut = path.lastIndexOf("/", path.length - 2 - Math.max(0, path.length - 101));
    prefix = encoder.encode(path.slice(0, cut));
    name = encoder.encode(path.slice(cut + 1));
    if (name.length > 100 || prefix.length > 155)
      throw new RigError("rig_invalid", `path too long for a tar header: ${path}`);
  }
  const put = (offset: number, value: Uint8Array): void => h.set(value, offset);
  const octal = (offset: number, length: number, value: number): void =>
    put(offset, encoder.encode(`${value.toString(8).padStart(length - 1, "0")}\0`));
  put(0, name);
  octal(100, 8, mode);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, mtime);
  put(148, encoder.encode("        "));
  put(156, encoder.encode(type));
  put(257, encoder.encode("ustar\0"));
  put(263, encoder.encode("00"));
  put(345, prefix);
  let sum = 0;
  for (const byte of h) sum += byte;
  put(148, encoder.encode(`${sum.toString(8).padStart(6, "0")}\0 `));
  return h;
}

/** Read a ustar archive back (tests and tools): path -> content of each regular file. */
export function untar(archive: Uint8Array): Map<string, string> {
  const decoder = new TextDecoder();
  const files = new Map<string, string>();
  let at = 0;
  while (at + BLOCK <= archive.length) {
    const h = archive.subarray(at, at + BLOCK);
    if (h.every((b) => b === 0)) break;
    const text = (start: number, length: number): string =>
      decoder.decode(h.subarray(start, start + length)).replace(/\0.*$/s, "");
    const name = text(0, 100);
    const prefix = text(345, 155);
    const size = parseInt(text(124, 12).trim(), 8);
    const type = text(156, 1);
    at += BLOCK;
    if (type === "0" || type === "")
      files.set(prefix === "" ? name : `${prefix}/${name}`, decoder.decode(archive.subarray(at, at + size)));
    at += Math.ceil(size / BLOCK) * BLOCK;
  }
  return files;
}
