/**
 * Running real `git` as a child process, hardened, with lock-contention retries.
 *
 * @internal
 */
import { spawn } from "node:child_process"
import { Git } from "@musekit/node"
import { Duration, Effect, Schedule, Schema } from "effect"

/** A git command exited non-zero or could not be started. */
export class GitFailed extends Schema.TaggedError<GitFailed>("@musekit/plugin-worktree/GitFailed")("GitFailed", {
  args: Schema.Array(Schema.String),
  cwd: Schema.String,
  exitCode: Schema.Number,
  stderr: Schema.String
}) {
  override get message() {
    const detail = this.stderr.trim().split("\n").slice(0, 6).join("\n")
    return this.exitCode < 0
      ? `could not run git ${this.args.join(" ")} in ${this.cwd}: ${detail}`
      : `git ${this.args.join(" ")} failed in ${this.cwd} (exit ${this.exitCode}): ${detail}`
  }
}

export interface GitResult {
  readonly code: number
  readonly stdout: string
  readonly stdoutBytes: Buffer
  readonly stderr: string
}

export interface RunOptions {
  readonly cwd: string
  /** Extra environment variables for this call. */
  readonly env?: Record<string, string> | undefined
  /** Written to the child's stdin, then closed. */
  readonly input?: string | Uint8Array | undefined
  /** Read-only commands pass `false` so they never take optional locks (`git status` refreshing the index). */
  readonly optionalLocks?: boolean | undefined
}

/** Start `git <args>` with a prepared environment; never fails on a non-zero exit. */
const spawnGit = (
  args: ReadonlyArray<string>,
  cwd: string,
  env: Record<string, string>,
  input: string | Uint8Array | undefined
): Effect.Effect<GitResult, GitFailed> =>
  Effect.async<GitResult, GitFailed>((resume) => {
    const child = spawn("git", args as Array<string>, { cwd, env, stdio: ["pipe", "pipe", "pipe"] })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    let done = false
    let exited = false
    child.once("exit", () => {
      exited = true
    })
    child.stdout.on("data", (b: Buffer) => out.push(b))
    child.stderr.on("data", (b: Buffer) => err.push(b))
    child.stdin.on("error", () => {})
    child.on("error", (e) => {
      if (done) return
      done = true
      resume(Effect.fail(new GitFailed({ args: [...args], cwd, exitCode: -1, stderr: e.message })))
    })
    child.on("close", (code, signal) => {
      if (done) return
      done = true
      const stdoutBytes = Buffer.concat(out)
      const stderr = Buffer.concat(err).toString("utf8")
      resume(
        Effect.succeed({
          code: code ?? (signal ? 128 : 1),
          stdout: stdoutBytes.toString("utf8"),
          stdoutBytes,
          stderr: signal ? `${stderr}killed by ${signal}` : stderr
        })
      )
    })
    if (input !== undefined) child.stdin.end(input)
    else child.stdin.end()
    // On interruption, stop git and wait until it is gone, so whatever runs next (a rollback)
    // never races a git process still writing into the same worktree.
    return Effect.async<void>((stopped) => {
      if (exited || child.exitCode !== null || child.signalCode !== null) return stopped(Effect.void)
      const force = setTimeout(() => child.kill("SIGKILL"), 2000)
      child.once("exit", () => {
        clearTimeout(force)
        stopped(Effect.void)
      })
      child.kill("SIGTERM")
    })
  })

/**
 * Run `git <args>` hardened (see `Git` in `@musekit/node`): the steps `Git.steps` gives (the
 * version check once per process, fixed overrides, a clean environment, and — for commands that
 * may read file contents — overrides for every filter and driver the repository's own
 * configuration defines, listed just before), each run here. Never fails on a non-zero exit (see
 * {@link git} for that); fails when git is missing or too old, or the configuration cannot be listed.
 */
export const run = (args: ReadonlyArray<string>, options: RunOptions): Effect.Effect<GitResult, GitFailed> =>
  Effect.gen(function* () {
    const extra = {
      ...(options.optionalLocks === false ? { GIT_OPTIONAL_LOCKS: "0" } : {}),
      ...options.env
    }
    const steps = Git.steps<GitResult & Git.Ran>(args, { cwd: options.cwd, env: extra, input: options.input })
    let step = steps.next()
    let last: Git.GitCall | undefined
    while (!step.done) {
      const call = step.value
      last = call
      // (`git version` runs where this process is, as Git's own drivers run it: a missing cwd is not a missing git)
      const ran = spawnGit(call.args, call.cwd ?? process.cwd(), call.env as Record<string, string>, call.input)
      // `git version` (no cwd) that cannot start is an answer: the steps say git is missing
      const r =
        call.cwd === undefined
          ? yield* Effect.catchAll(ran, (e) =>
              Effect.succeed({
                code: -1,
                stdout: "",
                stdoutBytes: Buffer.alloc(0),
                stderr: e.stderr,
                error: new Error(e.stderr)
              })
            )
          : yield* ran
      step = steps.next({ ...r, status: r.code < 0 ? null : r.code })
    }
    const result = step.value
    if (typeof result === "string") {
      return yield* new GitFailed({ args: [...args], cwd: options.cwd, exitCode: -1, stderr: result })
    }
    // (the listing failed: the command did not run)
    if (last?.args === Git.LIST_CONFIG) {
      return yield* new GitFailed({
        args: [...Git.LIST_CONFIG],
        cwd: options.cwd,
        exitCode: result.code,
        stderr: result.stderr
      })
    }
    return result
  })

/** Run `git <args>`; a non-zero exit fails with {@link GitFailed}. */
export const git = (args: ReadonlyArray<string>, options: RunOptions): Effect.Effect<GitResult, GitFailed> =>
  Effect.flatMap(run(args, options), (r) =>
    r.code === 0
      ? Effect.succeed(r)
      : Effect.fail(new GitFailed({ args: [...args], cwd: options.cwd, exitCode: r.code, stderr: r.stderr }))
  )

/** stdout of a successful git command, without the trailing newline. */
export const gitText = (args: ReadonlyArray<string>, options: RunOptions): Effect.Effect<string, GitFailed> =>
  Effect.map(git(args, options), (r) => r.stdout.replace(/\n$/, ""))

const lockPatterns: ReadonlyArray<RegExp> = [
  /\.lock'?:? File exists/i,
  /index\.lock/,
  /could not lock config file/i,
  /unable to (create|write) (new )?index file/i,
  // git 2.39 races while another `worktree add` is half-way through creating its admin directory
  /failed to read .*\/worktrees\/[^/\s]+\/(commondir|gitdir|HEAD)/,
  /could not create (leading )?director(y|ies) of '.*\/worktrees\//,
  /Unable to create '.*\/worktrees\/[^/\s]+\//
]

/** Whether a failure looks like another git process holding a lock (worth retrying). */
export const isLockContention = (e: GitFailed): boolean =>
  e.exitCode > 0 && lockPatterns.some((re) => re.test(e.stderr))

/** Backoff used for lock contention: 25 ms doubling up to 1 s a step, jittered, 12 retries (~8 s at most). */
export const lockSchedule = Schedule.exponential("25 millis", 2).pipe(
  Schedule.modifyDelay((_, d) => Duration.min(d, Duration.seconds(1))),
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(12))
)

/** Retry an effect while it fails with lock contention. */
export const retryOnLock = <A, E>(effect: Effect.Effect<A, E | GitFailed>): Effect.Effect<A, E | GitFailed> =>
  Effect.retry(effect, {
    schedule: lockSchedule,
    while: (e) => e instanceof GitFailed && isLockContention(e)
  })
