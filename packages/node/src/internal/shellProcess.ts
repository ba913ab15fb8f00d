/**
 * Run `sh -c <command>` in its own process group, stream its output, keep only the tail of it, and
 * kill the whole group (`kill(-pgid, SIGKILL)`) on timeout or when the running effect is interrupted.
 *
 * @example
 * ```ts
 * const r = yield* runShell({ command: "make test", cwd: root, timeoutMs: 120_000, maxOutputBytes: 65_536,
 *   onOutput: (chunk) => ctx.progress(chunk) })
 * r.exitCode // 0
 * ```
 */
import { type ChildProcess, spawn } from "node:child_process"
import { StringDecoder } from "node:string_decoder"
import { Effect, Fiber, Queue } from "effect"
import type { WarmChild } from "./sandbox/warm.js"

export interface ShellOptions {
  readonly command: string
  readonly cwd: string
  readonly timeoutMs: number
  readonly maxOutputBytes: number
  readonly shell?: string | undefined
  readonly env?: NodeJS.ProcessEnv | undefined
  /**
   * How long to wait, after the shell itself exited, for background processes that still hold its
   * output open before the rest of its process group is killed.
   */
  readonly graceMs?: number | undefined
  /** Receives output as it arrives (stdout and stderr, interleaved). */
  readonly onOutput?: ((chunk: string) => Effect.Effect<void>) | undefined
  /**
   * Start this program instead of `<shell> -c <command>` (the sandbox's wrapper around it), with
   * more descriptors from fd 3 on, and a hook that runs right after the spawn.
   */
  readonly launch?:
    | {
        readonly file: string
        readonly args: ReadonlyArray<string>
        readonly env: NodeJS.ProcessEnv
        readonly stdio: ReadonlyArray<number | "pipe">
        readonly started: (child: import("node:child_process").ChildProcess) => void
        /** Run the command in a sandbox that already runs, instead of spawning `file` (see `Sandbox`). */
        readonly run?: (() => WarmChild) | undefined
      }
    | undefined
}

export interface ShellOutcome {
  readonly exitCode: number | null
  readonly signal: string | null
  readonly output: string
  readonly timedOut: boolean
  /** Bytes of output dropped from the front to keep the tail within `maxOutputBytes`. */
  readonly droppedBytes: number
  readonly totalBytes: number
  /** Background processes still holding the output open after the shell exited were killed. */
  readonly killedLeftovers: boolean
}

/** Kill every process in the group led by `pid`; quiet when none is left. */
export const killGroup = (pid: number | undefined): void => {
  if (pid === undefined) return
  try {
    process.kill(-pid, "SIGKILL")
  } catch {}
}

/** Keeps the last `cap` bytes of what is appended to it. */
class TailBuffer {
  private chunks: Array<Buffer> = []
  private size = 0
  dropped = 0
  total = 0
  constructor(private readonly cap: number) {}
  push(b: Buffer) {
    this.total += b.length
    this.chunks.push(b)
    this.size += b.length
    while (this.size > this.cap) {
      const first = this.chunks[0]!
      const excess = this.size - this.cap
      if (first.length <= excess) {
        this.chunks.shift()
        this.size -= first.length
        this.dropped += first.length
      } else {
        this.chunks[0] = first.subarray(excess)
        this.size -= excess
        this.dropped += excess
      }
    }
  }
  text(): string {
    let buf = Buffer.concat(this.chunks)
    if (this.dropped > 0) {
      // do not start in the middle of a UTF-8 sequence
      let i = 0
      while (i < buf.length && i < 4 && (buf[i]! & 0xc0) === 0x80) i++
      this.dropped += i
      buf = buf.subarray(i)
    }
    return buf.toString("utf8")
  }
}

export class SpawnFailed extends Error {}

export const runShell = (options: ShellOptions): Effect.Effect<ShellOutcome, SpawnFailed> =>
  Effect.gen(function* () {
    const onOutput = options.onOutput
    const queue = yield* Queue.unbounded<string | null>()
    const consumer = yield* Effect.fork(
      Effect.gen(function* () {
        while (true) {
          const chunk = yield* Queue.take(queue)
          if (chunk === null) return
          if (onOutput) yield* onOutput(chunk)
        }
      })
    )
    const tail = new TailBuffer(options.maxOutputBytes)
    const state = { closed: false, exited: false, timedOut: false, killedLeftovers: false }

    /** Kill the command's whole process group (one started by a running sandbox: inside it). */
    const killAll = (child: ChildProcess | WarmChild) =>
      "killGroup" in child ? child.killGroup() : killGroup(child.pid)
    const child = yield* Effect.acquireRelease(
      Effect.try<ChildProcess | WarmChild, SpawnFailed>({
        try: () => {
          const launch = options.launch
          if (launch?.run) return launch.run()
          if (!launch) {
            return spawn(options.shell ?? "sh", ["-c", options.command], {
              cwd: options.cwd,
              env: options.env ?? process.env,
              detached: true,
              stdio: ["ignore", "pipe", "pipe"]
            })
          }
          const child = spawn(launch.file, [...launch.args], {
            cwd: options.cwd,
            env: launch.env,
            detached: true,
            stdio: ["ignore", "pipe", "pipe", ...launch.stdio]
          })
          // a command killed as it starts (Ctrl-C, a timeout) can leave a write to one of its pipes
          // failing with EPIPE: that is the command's end, not muse's
          for (const stream of child.stdio.slice(3)) (stream as NodeJS.EventEmitter | null)?.on("error", () => {})
          if (child.pid !== undefined) launch.started(child)
          return child
        },
        catch: (e) => new SpawnFailed(`could not start the shell: ${(e as Error).message}`)
      }),
      (child) =>
        Effect.async<void>((resume) => {
          // interrupted (or done): make sure nothing of the group outlives the call
          if (state.closed && state.exited) return resume(Effect.void)
          killAll(child)
          if (state.exited || ("pid" in child && child.pid === undefined)) return resume(Effect.void)
          const t = setTimeout(() => resume(Effect.void), 2000)
          child.once("exit", () => {
            clearTimeout(t)
            resume(Effect.void)
          })
        })
    )

    const listen = (stream: NodeJS.ReadableStream) => {
      const decoder = new StringDecoder("utf8")
      stream.on("data", (b: Buffer) => {
        tail.push(b)
        const text = decoder.write(b)
        if (text !== "") queue.unsafeOffer(text)
      })
      stream.on("end", () => {
        const text = decoder.end()
        if (text !== "") queue.unsafeOffer(text)
      })
    }
    listen(child.stdout!)
    listen(child.stderr!)
    // errors of a process whose outcome is already settled (reported once, below) are not muse's
    child.on("error", () => {})
    child.stdout!.on("error", () => {})
    child.stderr!.on("error", () => {})

    const result = yield* Effect.async<{ code: number | null; signal: string | null }, SpawnFailed>((resume) => {
      let exitInfo: { code: number | null; signal: string | null } = { code: null, signal: null }
      let grace: NodeJS.Timeout | undefined
      let settled = false
      const timer = setTimeout(() => {
        state.timedOut = true
        killAll(child)
      }, options.timeoutMs)
      child.once("error", (e) => {
        clearTimeout(timer)
        if (grace) clearTimeout(grace)
        state.exited = true
        state.closed = true
        if (settled) return
        settled = true
        resume(Effect.fail(new SpawnFailed(`could not start the shell: ${e.message}`)))
      })
      child.once("exit", (code, signal) => {
        state.exited = true
        exitInfo = { code, signal }
        clearTimeout(timer)
        grace = setTimeout(() => {
          if (state.closed) return
          state.killedLeftovers = !state.timedOut
          killAll(child)
          // a process that left the group may still hold the pipes: stop reading them
          setTimeout(() => {
            child.stdout?.destroy()
            child.stderr?.destroy()
          }, 200)
        }, options.graceMs ?? 1000)
      })
      child.once("close", () => {
        state.closed = true
        clearTimeout(timer)
        if (grace) clearTimeout(grace)
        if (settled) return
        settled = true
        resume(Effect.succeed(exitInfo))
      })
      return Effect.sync(() => {
        clearTimeout(timer)
        if (grace) clearTimeout(grace)
      })
    })

    yield* Queue.offer(queue, null)
    yield* Fiber.join(consumer)
    const output = tail.text()
    return {
      exitCode: result.code,
      signal: result.signal,
      output,
      timedOut: state.timedOut,
      droppedBytes: tail.dropped,
      totalBytes: tail.total,
      killedLeftovers: state.killedLeftovers
    }
  }).pipe(Effect.scoped)
