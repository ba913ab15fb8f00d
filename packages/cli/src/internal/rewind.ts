/**
 * `muse rewind` and `muse fork`: a stopped session's files (and conversation) back to any point of
 * its log, and a new session that goes on from such a point in a worktree of its own.
 *
 * ```
 * muse rewind 20261201-101500-a1b2c3 --to turn:2   # before the second prompt
 * muse rewind --to undo                            # take the latest rewind back
 * muse fork 20261201-101500-a1b2c3 --at turn:3     # a second continuation to compare
 * ```
 */
import { Rewind } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect, Either } from "effect"
import { escapeUnsafe } from "./ansi.js"
import { CliError, ExitCode } from "./exit.js"
import type * as History from "./history.js"
import * as Session from "./session.js"
import * as Tools from "./tools.js"

export interface RewindOptions {
  readonly session: string | undefined
  readonly to: string | undefined
  readonly force: boolean
  readonly cwd: string | undefined
  readonly script: string | undefined
  readonly env: Session.Env
}

const who = (agent: string, p: string) => (agent === "main" ? p : `${agent}:${p}`)

const toCli = (e: { readonly _tag: string; readonly message: string }) =>
  new CliError({
    code: e._tag === "RewindError" || e._tag === "SessionNotFound" ? ExitCode.Usage : ExitCode.Failed,
    message: e.message
  })

/** The state directory of the file log (rewind and fork read and write its files). */
const fileDir = (cwd: string | undefined, env: Session.Env) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { location, store } = yield* Session.storeFor({ cwd, log: undefined }, env)
      if (location.kind !== "dir") {
        return yield* new CliError({
          code: ExitCode.Usage,
          message: `rewind and fork work on sessions in a state directory; ${location.display} is a database`
        })
      }
      return { dir: location.dir, store }
    })
  )

/** The turns of a session, for a person to pick a point from. */
export const describeTurns = (turns: ReadonlyArray<Rewind.Turn>): ReadonlyArray<string> =>
  turns.map((t) => {
    const text = t.text.replace(/\s+/g, " ")
    const files = t.files.map((f) => who(f.agent, f.path))
    return `turn ${t.n} (seq ${t.seq}): ${text.length > 60 ? `${text.slice(0, 59)}…` : text}${
      files.length > 0
        ? ` — ${files.length > 4 ? `${files.slice(0, 4).join(", ")} and ${files.length - 4} more` : files.join(", ")}`
        : ""
    }`
  })

/** `muse rewind [id] --to <seq|turn:n|last|undo> [--force]`. */
export const rewind = (options: RewindOptions, out: History.Out): Effect.Effect<number, CliError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const { dir } = yield* fileDir(options.cwd, options.env)
      const session = options.session ?? (yield* latest(dir))
      if (options.to === undefined) {
        const events = yield* EventLogFile.readSession(session, { dir }).pipe(Effect.mapError(toCli))
        const turns = Rewind.turns(events)
        out.write(
          `${[
            `session ${session}: pick a point with --to (turn:<n> is just before that turn's prompt)`,
            ...describeTurns(turns)
          ]
            .map((l) => escapeUnsafe(l, out.style))
            .join("\n")}\n`
        )
        return ExitCode.Usage
      }
      const prepared = yield* Session.prepareResume(
        session,
        { ...Session.emptyFlags, cwd: options.cwd, script: options.script },
        options.env,
        Session.headlessTrust({ ...Session.emptyFlags, trust: false }, options.env)
      )
      const notes: Array<string> = []
      const done = yield* SessionRuntime.rewind({
        session,
        dir,
        to: options.to,
        force: options.force,
        services: {
          languageModel: prepared.languageModel,
          plugins: prepared.plugins.plugins,
          tools: Tools.make(prepared.events)
        },
        io: { output: (text) => Effect.sync(() => void notes.push(text)) }
      }).pipe(
        Effect.catchTag("RewindRefused", (e) =>
          Effect.fail(
            new CliError({
              code: ExitCode.Failed,
              message: `not rewound: ${e.files.length} file${e.files.length === 1 ? " was" : "s were"} changed since the session last wrote ${e.files.length === 1 ? "it" : "them"}: ${e.files.join(", ")}`,
              detail: `They are left as they are. To put them back anyway (their current content is kept in the log, so the rewind can be undone): muse rewind ${session} --to ${options.to} --force`
            })
          )
        ),
        Effect.mapError((e) => (e instanceof CliError ? e : toCli(e as { _tag: string; message: string })))
      )
      yield* prepared.plugins.close
      const lines = [...Rewind.describe(done.plan, done.result)]
      lines.push(
        `the conversation goes on from turn ${done.plan.target.turn}: muse resume ${session}`,
        `undo: muse rewind ${session} --to undo`
      )
      out.write(`${lines.map((l) => escapeUnsafe(l, out.style)).join("\n")}\n`)
      return done.result.failed.length > 0 ? ExitCode.Failed : ExitCode.Success
    })
  )

export interface ForkOptions {
  readonly session: string | undefined
  readonly at: string | undefined
  readonly cwd: string | undefined
  readonly json: boolean
  readonly env: Session.Env
}

/** `muse fork [id] --at <seq|turn:n|last>`. */
export const fork = (options: ForkOptions, out: History.Out): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const { dir } = yield* fileDir(options.cwd, options.env)
    const session = options.session ?? (yield* latest(dir))
    const at = options.at ?? "last"
    const forked = yield* SessionRuntime.fork({ session, at, dir }).pipe(
      Effect.mapError((e) => toCli(e as { _tag: string; message: string }))
    )
    if (options.json) {
      out.write(`${JSON.stringify(forked)}\n`)
      return ExitCode.Success
    }
    const lines = [
      `forked ${session} at seq ${forked.target.seq} (before turn ${forked.target.turn}) as ${forked.session}`,
      forked.worktree
        ? `it works in ${forked.root} (a git worktree of its own); ${session} is unchanged`
        : `not a git repository: it works in the same folder, ${forked.root}`,
      `go on with: muse resume ${forked.session}`
    ]
    out.write(`${lines.map((l) => escapeUnsafe(l, out.style)).join("\n")}\n`)
    return ExitCode.Success
  })

/** The fork each session was made from (`config.fork` of its first event), for `muse sessions`. */
export const forkOf = (
  dir: string,
  session: string
): { readonly session: string; readonly seq: number } | undefined => {
  const ends = Effect.runSync(Effect.either(EventLogFile.readEnds(session, { dir })))
  if (Either.isLeft(ends)) return undefined
  const fork = (ends.right.first?.data as { config?: { fork?: unknown } } | undefined)?.config?.fork as
    | { session?: unknown; seq?: unknown }
    | undefined
  return typeof fork?.session === "string" && typeof fork.seq === "number"
    ? { session: fork.session, seq: fork.seq }
    : undefined
}

/** The newest session of a state directory. */
const latest = (dir: string): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const list = yield* EventLogFile.sessions({ dir }).pipe(Effect.mapError(Session.logError))
    const first = list.find((s) => s.events > 0)
    if (!first) return yield* new CliError({ code: ExitCode.Usage, message: `no sessions in ${dir} yet` })
    return first.id
  })
