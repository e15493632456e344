/**
 * The commit line (§6.1): one serialized FIFO per session. JavaScript runs one thing at a time, but a
 * Durable Object interleaves requests at every `await` on outside I/O, so the input gate alone is not a
 * line; every commit, driver decision and watch registration runs here, one at a time.
 */
export class CommitLine {
  #tail: Promise<void> = Promise.resolve();
  #depth = 0;

  /** Run `op` after every earlier operation has finished; its result or error is the caller's. */
  run<T>(op: () => T | Promise<T>): Promise<T> {
    const result = this.#tail.then(async () => {
      this.#depth += 1;
      try {
        return await op();
      } finally {
        this.#depth -= 1;
      }
    });
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** True while an operation runs; a listener that sees this must not await the line (deadlock). */
  get busy(): boolean {
    return this.#depth > 0;
  }
}
