/**
 * `muse runner`, `muse submit` and `muse attach`: sessions on a cluster of runners that share a
 * Postgres database (the event log, the blobs, and `@effect/cluster`'s runner and message storage).
 *
 * A runner runs each session it is given in a `muse` process of its own, in a workspace of its
 * own: a fresh clone of the session's repository at its base commit, with every file change the
 * log recorded put back from the blob store. A session the log already holds is resumed (the
 * resume settles what was in flight, as a local `muse resume` does); what the log cannot put back
 * (what shell commands wrote) is told to the agent in the conversation.
 *
 * @example
 * ```sh
 * muse runner --log postgres://muse@db/muse --host 10.0.0.5 --port 34431
 * muse submit "fix the failing test" --repo https://git.example.com/app.git --log postgres://muse@db/muse
 * muse attach 2026-12-01T22-50-00-1a2b --log postgres://muse@db/muse
 * ```
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Event, EventLog } from "@musekit/core"
import { EventLogFile, Git, WorkspaceNode } from "@musekit/node"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { CliError, ExitCode } from "./exit.js"
import * as History from "./history.js"
import type * as LogStore from "./logStore.js"

const clusterModule = () => Effect.promise(() => import("@musekit/pg/SessionCluster"))

const needPostgres = (location: LogStore.Location, command: string) =>
  location.kind === "postgres"
    ? Effect.succeed(location.url)
    : Effect.fail(
        new CliError({
          code: ExitCode.Usage,
          message: `muse ${command} needs the sessions in Postgres: give --log postgres://user@host/db (or MUSE_LOG)`
        })
      )

/**
 * `git <args>` hardened (`Git` in `@musekit/node`) in `cwd`; a command that talks to a remote
 * (`remote`) runs with the transports the user's own configuration allows.
 */
const git = (args: ReadonlyArray<string>, cwd: string, remote = false) => {
  const r = Git.runSync(args, { cwd, remote })
  return { ok: r.status === 0, out: (r.stdout ?? "").trim(), err: (r.stderr ?? "").trim() }
}

/** {@link git} without blocking the process (a runner's clone can take minutes; its other sessions go on). */
const gitAsync = (args: ReadonlyArray<string>, cwd: string, remote = false) =>
  Effect.promise(() => Git.run(args, { cwd, remote })).pipe(
    Effect.map((r) => ({ ok: r.status === 0, out: (r.stdout ?? "").trim(), err: (r.stderr ?? "").trim() }))
  )

/**
 * `dir` as a fresh clone of `repo` at `base` (each try at a session starts from one: a clone an earlier
 * try left could hold what that try wrote, inside `.git` too). Exported for tests.
 */
export const checkoutAt = (repo: string, base: string, dir: string, workDir: string) =>
  Effect.gen(function* () {
    fs.rmSync(dir, { recursive: true, force: true })
    const clone = yield* gitAsync(["clone", "--quiet", "--", repo, dir], workDir, true)
    return clone.ok ? yield* gitAsync(["checkout", "--quiet", "--detach", base], dir) : clone
  })

/** The commit `repo` is at now (a local path) or its remote HEAD (a URL). */
export const baseOf = (repo: string): Effect.Effect<string, CliError> => {
  const local = fs.existsSync(repo)
  if (repo.startsWith("-")) {
    return Effect.fail(
      new CliError({ code: ExitCode.Usage, message: `--repo ${repo}: a repository location cannot start with '-'` })
    )
  }
  const r = local ? git(["rev-parse", "HEAD"], repo) : git(["ls-remote", "--", repo, "HEAD"], os.tmpdir(), true)
  const sha = r.out.split(/\s/)[0] ?? ""
  return r.ok && /^[0-9a-f]{40}$/.test(sha)
    ? Effect.succeed(sha)
    : Effect.fail(
        new CliError({
          code: ExitCode.Usage,
          message: `--repo ${repo}: not a git repository with a commit to start from${r.err ? ` (${r.err.split("\n")[0]})` : ""}`
        })
      )
}

export interface SubmitOptions {
  readonly task: string
  readonly repo: string
  readonly args: ReadonlyArray<string>
  readonly location: LogStore.Location
  readonly env: NodeJS.ProcessEnv
}

/** Start a session on the cluster; returns its id. */
export const submit = (options: SubmitOptions): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const url = yield* needPostgres(options.location, "submit")
    if (options.task.trim() === "") {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: 'muse submit needs a task: muse submit "fix the test"'
      })
    }
    const repo = fs.existsSync(options.repo) ? path.resolve(options.repo) : options.repo
    const base = yield* baseOf(repo)
    const SessionCluster = yield* clusterModule()
    const session = EventLogFile.newSessionId()
    yield* SessionCluster.submit(
      url,
      { session, task: options.task, repo, base, args: [...options.args] },
      SessionCluster.timingsFromEnv(options.env)
    ).pipe(
      Effect.mapError(
        (e) =>
          new CliError({ code: ExitCode.Failed, message: `cannot submit to ${options.location.display}: ${String(e)}` })
      )
    )
    return session
  })

/** What a new workspace cannot have that the session's earlier runs had. */
export const takeoverNote = (
  events: ReadonlyArray<Event.Envelope>,
  missing: ReadonlyArray<string> = []
): string | undefined => {
  const commands = events.filter((e) => e.type === "tool.started" && (e.data as { tool?: string }).tool === "run_shell")
  if (commands.length === 0 && missing.length === 0) return undefined
  const parts = [
    "This session moved to another machine: its workspace is a fresh clone at the session's base commit with every " +
      "file change the session's tools made put back."
  ]
  if (commands.length > 0) {
    parts.push(
      "What shell commands wrote outside those changes (build outputs, installed packages, files they created) is " +
        `not there: ${commands.length} shell command(s) ran before. Run again what you need.`
    )
  }
  if (missing.length > 0) {
    parts.push(
      `The log does not hold what the session's changes left in ${missing.join(", ")}: ` +
        `${missing.length === 1 ? "it is" : "they are"} as the base commit has ${missing.length === 1 ? "it" : "them"}.`
    )
  }
  return parts.join(" ")
}

/**
 * Put back every file the log records a change of, as the last change left it (from the blob
 * store). Returns the files put back and those whose content the store does not hold (a log
 * written before the content after each change was kept): those stay as the base commit has them.
 */
export const restoreFiles = (
  events: ReadonlyArray<Event.Envelope>,
  store: EventLog.StoreService,
  root: string
): Effect.Effect<{ readonly restored: number; readonly missing: ReadonlyArray<string> }, CliError> =>
  Effect.gen(function* () {
    const last = new Map<string, string | null>()
    for (const e of events) {
      if (e.type !== "file.changed" || e.agent !== "main") continue
      const d = e.data as { path?: string; after?: string | null }
      if (typeof d.path === "string") last.set(d.path, d.after ?? null)
    }
    const missing: Array<string> = []
    let restored = 0
    const realRoot = fs.realpathSync(root)
    for (const [p, hash] of last) {
      const file = path.resolve(realRoot, p)
      const rel = path.relative(realRoot, file)
      if (rel === "" || rel.startsWith("..") || path.isAbsolute(rel)) continue
      // the clone may hold symbolic links where the session had files: never write through one
      if (WorkspaceNode.symlinkEscape(realRoot, file, { anyLink: true }) !== undefined) {
        missing.push(p)
        continue
      }
      if (hash === null) {
        fs.rmSync(file, { force: true })
        restored++
        continue
      }
      const bytes = yield* store.getBlob(hash).pipe(
        Effect.map((b): Uint8Array | undefined => b),
        // not there, or sealed with another machine's blob key: the file stays as the base commit has it
        Effect.catchTags({
          BlobNotFound: () => Effect.succeed(undefined),
          BlobCorrupted: () => Effect.succeed(undefined)
        }),
        Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: `cannot put back ${p}: ${e.message}` }))
      )
      if (bytes === undefined) {
        missing.push(p)
        continue
      }
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, bytes)
      restored++
    }
    return { restored, missing }
  })

export interface RunnerOptions {
  readonly location: LogStore.Location
  readonly host: string
  readonly port: number
  readonly workDir: string
  readonly env: NodeJS.ProcessEnv
  readonly openStore: Effect.Effect<EventLog.StoreService, CliError, import("effect").Scope.Scope>
  readonly say: (line: string) => void
}

/**
 * How long a runner waits before its next try (`attempt` from 0) at a session whose log the process
 * that ran it before still holds: every second for the first five tries (a killed process's
 * connection drops within seconds), then doubling up to 30 s (a lost machine's connection can take
 * minutes to drop, see docs/cluster.md).
 */
export const retryDelayMs = (attempt: number): number =>
  attempt < 5 ? 1000 : Math.min(1000 * 2 ** Math.min(attempt - 4, 5), 30_000)

const binPath = () => path.join(path.dirname(fileURLToPath(import.meta.url)), "bin.js")

/** Serve sessions until interrupted. */
export const runner = (options: RunnerOptions): Effect.Effect<never, CliError> =>
  Effect.gen(function* () {
    const url = yield* needPostgres(options.location, "runner")
    const SessionCluster = yield* clusterModule()
    const workDir = path.resolve(options.workDir)
    fs.mkdirSync(workDir, { recursive: true })
    const runOne = (job: import("@musekit/pg/SessionCluster").Job) =>
      Effect.gen(function* () {
        if (!SessionCluster.SESSION_ID.test(job.session)) {
          return { status: "refused: the session id is not a plain name", exitCode: ExitCode.Usage }
        }
        const store = yield* options.openStore
        const dir = path.join(workDir, job.session)
        for (let attempt = 0; ; attempt++) {
          // a session the log does not have yet is new; any other failure to read (the database
          // away for a moment) dies, and the cluster delivers the message again: taken for a new
          // session, a started one would fail as "already exists" and never be resumed
          const events = yield* store.read(job.session).pipe(
            Effect.catchTag("SessionNotFound", () => Effect.succeed([] as ReadonlyArray<Event.Envelope>)),
            Effect.orDie
          )
          const checkout = yield* checkoutAt(job.repo, job.base, dir, workDir)
          if (!checkout.ok) {
            options.say(`session ${job.session}: cannot clone ${job.repo} at ${job.base}: ${checkout.err}`)
            return { status: "failed", exitCode: ExitCode.Failed }
          }
          const started = events.length > 0
          const { missing } = started ? yield* restoreFiles(events, store, dir) : { missing: [] }
          const note = started ? takeoverNote(events, missing) : undefined
          const args = started
            ? [
                "resume",
                job.session,
                "--cwd",
                dir,
                "--output-format",
                "stream-json",
                ...(note ? ["--notice", note] : []),
                ...job.args
              ]
            : ["run", job.task, "--session-id", job.session, "--output-format", "stream-json", ...job.args]
          // (said once: a try again after the log was found in use says nothing new)
          if (attempt === 0) {
            options.say(`session ${job.session}: ${started ? "taking over" : "starting"} in ${dir}`)
            if (note) options.say(`session ${job.session}: ${note}`)
          }
          const result = yield* Effect.async<{ code: number; inUse: boolean; nothing: boolean }>((resume) => {
            const child = spawn(process.execPath, [binPath(), ...args], {
              cwd: dir,
              env: {
                ...options.env,
                MUSE_LOG: url,
                MUSE_EXIT_WITH_PARENT: "1"
              },
              stdio: ["pipe", "pipe", "pipe"]
            })
            let inUse = false
            let nothing = false
            let buf = ""
            child.stdout!.setEncoding("utf8").on("data", (d: string) => {
              buf += d
              for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
                const line = buf.slice(0, nl)
                buf = buf.slice(nl + 1)
                if (!line.startsWith('{"kind":"result"')) continue
                const o = JSON.parse(line) as { status?: string; reason?: string }
                if (/is in use/.test(o.reason ?? "")) inUse = true
                if (o.status === "nothing to resume") nothing = true
              }
            })
            let errTail = ""
            child.stderr!.setEncoding("utf8").on("data", (d: string) => {
              if (/is in use/.test(d)) inUse = true
              errTail = (errTail + d).slice(-2000)
            })
            child.on("exit", (code) => {
              if (code !== 0 && !inUse)
                options.say(`session ${job.session}: muse ${args[0]} exited ${code}: ${errTail.trim()}`)
            })
            child.on("exit", (code) => resume(Effect.succeed({ code: code ?? ExitCode.Failed, inUse, nothing })))
            return Effect.sync(() => child.kill("SIGKILL"))
          })
          // the process that ran it before still holds it (its connection not yet dropped): try again
          if (result.inUse) {
            if (attempt === 0) {
              options.say(
                `session ${job.session}: its log is still held by the process that ran it before (its connection not yet dropped): trying again, at most every ${retryDelayMs(Number.POSITIVE_INFINITY) / 1000} s`
              )
            }
            yield* Effect.sleep(Duration.millis(retryDelayMs(attempt)))
            continue
          }
          return {
            status: result.code === 0 || result.nothing ? "completed" : `exit ${result.code}`,
            exitCode: result.code
          }
        }
      }).pipe(Effect.scoped, Effect.orDie)
    options.say(`runner ${options.host}:${options.port} joined the cluster at ${options.location.display}`)
    return yield* Layer.launch(
      SessionCluster.runner({
        url,
        host: options.host,
        port: options.port,
        timings: SessionCluster.timingsFromEnv(options.env),
        run: (job) => runOne(job)
      })
    ).pipe(
      options.env.MUSE_CLUSTER_DEBUG ? Logger.withMinimumLogLevel(LogLevel.Debug) : (x) => x,
      Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: `the runner stopped: ${String(e)}` }))
    )
  })

/** Print a session's events as they are stored, until its task ends. */
export const attach = (
  session: string,
  store: EventLog.StoreService,
  json: boolean,
  out: History.Out
): Effect.Effect<void, CliError> =>
  Effect.gen(function* () {
    let next = 0
    for (;;) {
      const events = yield* store.read(session, next).pipe(Effect.orElseSucceed(() => [] as Array<Event.Envelope>))
      if (events.length > 0) {
        History.printLog(events, { agent: undefined, type: undefined, json }, out)
        next = events.at(-1)!.seq + 1
        const done = events.some(
          (e) => e.agent === "main" && (e.type === "turn.completed" || e.type === "session.ended")
        )
        if (done) return
      }
      yield* Effect.sleep("300 millis")
    }
  })

/** The cluster's sessions (runner and state), newest first. */
export const list = (location: LogStore.Location) =>
  Effect.gen(function* () {
    const url = yield* needPostgres(location, "sessions --cluster")
    const SessionCluster = yield* clusterModule()
    return yield* SessionCluster.list(url).pipe(
      Effect.mapError(
        (e) => new CliError({ code: ExitCode.Failed, message: `cannot read ${location.display}: ${String(e)}` })
      )
    )
  })
