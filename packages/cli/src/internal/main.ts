/**
 * The `muse` command line: commands, flags, and the mapping from outcomes to exit codes.
 */
import * as path from "node:path"
import { Args, CliConfig, Command, Options, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Cause, type Console, Effect, Either, Exit, Option } from "effect"
import { plain, stringifySafe, stripAnsi, styleFor, terminalSafe } from "./ansi.js"
import * as Argv from "./argv.js"
import * as Cluster from "./cluster.js"
import { CliError, ExitCode } from "./exit.js"
import * as Headless from "./headless.js"
import * as History from "./history.js"
import * as Rewinds from "./rewind.js"
import * as Session from "./session.js"
import * as Trust from "./trust.js"
import { version } from "./version.js"

export interface ProcessIo {
  readonly argv: ReadonlyArray<string>
  readonly env: NodeJS.ProcessEnv
  readonly cwd: string
  readonly stdin: NodeJS.ReadStream
  readonly stdout: NodeJS.WriteStream
  readonly stderr: NodeJS.WriteStream
}

const modes = ["read-only", "ask", "auto-edit", "auto"] as const

const shared = {
  model: Options.text("model").pipe(
    Options.withAlias("m"),
    Options.withDescription(
      "provider/model, e.g. anthropic/claude-sonnet-4-5 or ollama/qwen2.5-coder (default: config or MUSE_MODEL)"
    ),
    Options.optional
  ),
  approvalMode: Options.choice("approval-mode", modes).pipe(
    Options.withDescription("read-only | ask | auto-edit (default) | auto"),
    Options.optional
  ),
  sandbox: Options.choice("sandbox", ["workspace-write", "read-only", "off"] as const).pipe(
    Options.withDescription(
      "workspace-write (default): commands write only the project and /tmp, no network, secrets hidden | read-only | off"
    ),
    Options.optional
  ),
  allow: Options.text("allow").pipe(
    Options.withDescription(
      'allow a tool call without asking: "<tool>[:<pattern>]", e.g. "run_shell:npm test*" (repeatable)'
    ),
    Options.repeated
  ),
  deny: Options.text("deny").pipe(
    Options.withDescription('deny a tool call: "<tool>[:<pattern>]" (repeatable)'),
    Options.repeated
  ),
  maxTurns: Options.integer("max-turns").pipe(
    Options.withDescription("model calls per task before stopping (exit 3)"),
    Options.optional
  ),
  contextWindow: Options.integer("context-window").pipe(
    Options.withDescription(
      "the model's context window in tokens, for a model muse does not know (default: config, the server, 32768)"
    ),
    Options.optional
  ),
  noCrew: Options.boolean("no-crew").pipe(Options.withDescription("run without the crew of background agents")),
  noWorktrees: Options.boolean("no-worktrees").pipe(
    Options.withDescription("crew members work in the checkout itself, not in git worktrees of their own")
  ),
  trust: Options.boolean("trust").pipe(
    Options.withDescription(
      "use this folder's own settings (.muse/config.json, .muse/permissions.json, skills) for this run (see muse trust)"
    )
  ),
  cwd: Options.directory("cwd").pipe(
    Options.withDescription("the project directory (default: the current one)"),
    Options.optional
  ),
  log: Options.text("log").pipe(
    Options.withDescription(
      "where sessions are kept: a directory, or a Postgres database (postgres://user@host/db) (default: MUSE_LOG, the config's log, the state directory)"
    ),
    Options.optional
  )
}

const outputFormat = Options.choice("output-format", ["text", "json", "stream-json"] as const).pipe(
  Options.withDescription("text (default), json (one object at the end) or stream-json (one JSON object per line)"),
  Options.withDefault("text" as const)
)

type SharedValues = {
  readonly model: Option.Option<string>
  readonly approvalMode: Option.Option<(typeof modes)[number]>
  readonly sandbox: Option.Option<"workspace-write" | "read-only" | "off">
  readonly allow: ReadonlyArray<string>
  readonly deny: ReadonlyArray<string>
  readonly maxTurns: Option.Option<number>
  readonly contextWindow: Option.Option<number>
  readonly noCrew: boolean
  readonly noWorktrees: boolean
  readonly trust: boolean
  readonly cwd: Option.Option<string>
  readonly log: Option.Option<string>
}

const toFlags = (v: SharedValues, script: string | undefined): Session.Flags => ({
  model: Option.getOrUndefined(v.model),
  approvalMode: Option.getOrUndefined(v.approvalMode),
  sandbox: Option.getOrUndefined(v.sandbox),
  allow: v.allow,
  deny: v.deny,
  maxTurns: Option.getOrUndefined(v.maxTurns),
  contextWindow: Option.getOrUndefined(v.contextWindow),
  noCrew: v.noCrew,
  noWorktrees: v.noWorktrees,
  trust: v.trust,
  cwd: Option.getOrUndefined(v.cwd),
  log: Option.getOrUndefined(v.log),
  script
})

const readStdin = (stdin: NodeJS.ReadStream): Promise<string> =>
  new Promise((resolve, reject) => {
    let text = ""
    stdin.setEncoding("utf8")
    stdin.on("data", (c) => (text += c))
    stdin.on("end", () => resolve(text))
    stdin.on("error", reject)
  })

/** `console` with ANSI escapes taken out of what it prints. */
const withoutEscapes = (console: Console.Console): Console.Console => {
  const clean = (args: ReadonlyArray<unknown>) => args.map((a) => (typeof a === "string" ? stripAnsi(a) : a))
  return {
    ...console,
    log: (...args) => console.log(...clean(args)),
    error: (...args) => console.error(...clean(args)),
    info: (...args) => console.info(...clean(args)),
    warn: (...args) => console.warn(...clean(args)),
    unsafe: {
      ...console.unsafe,
      log: (...args) => console.unsafe.log(...clean(args)),
      error: (...args) => console.unsafe.error(...clean(args)),
      info: (...args) => console.unsafe.info(...clean(args)),
      warn: (...args) => console.unsafe.warn(...clean(args))
    }
  }
}

export const main = async (pio: ProcessIo): Promise<number> => {
  let exitCode: number = ExitCode.Success
  const outStyle = styleFor(pio.stdout, pio.env)
  const errStyle = styleFor(pio.stderr, pio.env)
  const fail = (message: string, detail?: string) => {
    pio.stderr.write(`${errStyle.red("muse:")} ${terminalSafe(message)}\n`)
    if (detail) pio.stderr.write(`\n${terminalSafe(detail)}\n`)
  }
  // strict flags first: a misspelled flag must never become part of the task
  const parsed = Argv.parse(pio.argv)
  if (Either.isLeft(parsed)) {
    fail(parsed.left.message, parsed.left.detail)
    return ExitCode.Usage
  }
  const { script, positionals } = parsed.right
  const argv = [...(parsed.right.command === "" ? [] : [parsed.right.command]), ...parsed.right.flags]
  const columns = () => (pio.stdout.isTTY ? pio.stdout.columns || 80 : 100)
  // what History prints was escaped where it was built; terminalSafe is the last check
  const out: History.Out = {
    write: (s) => void pio.stdout.write(terminalSafe(s, outStyle)),
    style: outStyle,
    columns: columns()
  }
  const err: History.Out = {
    write: (s) => void pio.stderr.write(terminalSafe(s, errStyle)),
    style: errStyle,
    columns: pio.stderr.columns || 100
  }
  const env: Session.Env = { env: pio.env, cwd: pio.cwd }
  const signals: Headless.Signals = (listener) => {
    const onInt = () => listener("SIGINT")
    const onTerm = () => listener("SIGTERM")
    process.on("SIGINT", onInt)
    process.on("SIGTERM", onTerm)
    return () => {
      process.off("SIGINT", onInt)
      process.off("SIGTERM", onTerm)
    }
  }
  const isTty = Boolean(pio.stdin.isTTY && pio.stdout.isTTY)

  const interactive = (flags: Session.Flags, resumeId: string | undefined, resuming: boolean) =>
    Effect.gen(function* () {
      const tui = yield* Effect.promise(() => import("./tui/run.js"))
      exitCode = yield* tui.runInteractive({
        flags,
        env,
        stdin: pio.stdin,
        stdout: pio.stdout,
        resume: resuming ? { session: resumeId } : undefined
      })
    })

  const root = Command.make("muse", shared, (v) =>
    Effect.gen(function* () {
      if (!isTty) {
        return yield* new CliError({
          code: ExitCode.Usage,
          message: "muse without a command needs a terminal.",
          detail: 'For scripts and CI use: muse run "<task>" (see muse --help)'
        })
      }
      yield* interactive(toFlags(v, script), undefined, false)
    })
  ).pipe(Command.withDescription("muse: a coding agent for your terminal. Without a command: the interactive UI."))

  const run = Command.make(
    "run",
    {
      ...shared,
      outputFormat,
      sessionId: Options.text("session-id").pipe(
        Options.withDescription("the new session's id (letters, digits, '.', '_', '-'; a cluster runner gives one)"),
        Options.optional
      ),
      task: Args.text({ name: "task" }).pipe(Args.repeated)
    },
    (v) =>
      Effect.gen(function* () {
        // positionals were taken out by Argv.parse (so "--text" after -- stays text)
        void v.task
        let task = positionals.join(" ")
        if (task.trim() === "" || task === "-") {
          if (!pio.stdin.isTTY) task = yield* Effect.promise(() => readStdin(pio.stdin))
        }
        exitCode = yield* Headless.run({
          task,
          session: Option.getOrUndefined(v.sessionId),
          flags: toFlags(v, script),
          format: v.outputFormat,
          env,
          streams: { stdout: pio.stdout, stderr: pio.stderr },
          signals
        })
      })
  ).pipe(Command.withDescription('Run one task headless (scripts, CI): muse run "fix the failing test"'))

  const readFlags = (v: { readonly cwd: Option.Option<string>; readonly log: Option.Option<string> }) => ({
    cwd: Option.getOrUndefined(v.cwd),
    log: Option.getOrUndefined(v.log)
  })

  const sessions = Command.make(
    "sessions",
    {
      json: Options.boolean("json").pipe(Options.withDescription("one JSON object per session")),
      cluster: Options.boolean("cluster").pipe(
        Options.withDescription("the sessions submitted to the cluster, with the runner each is on and its state")
      ),
      cwd: shared.cwd,
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        const { store, location } = yield* Session.storeFor(readFlags(v), env)
        if (v.cluster) {
          const rows = yield* Cluster.list(location)
          if (v.json) for (const r of rows) out.write(`${stringifySafe(r)}\n`)
          else {
            if (rows.length === 0) out.write(`no sessions were submitted to the cluster at ${location.display}\n`)
            for (const r of rows) {
              const task = r.task.length > 50 ? `${r.task.slice(0, 49)}…` : r.task
              out.write(
                `${terminalSafe(r.session)}  ${terminalSafe(r.state.padEnd(10))}  ${terminalSafe((r.runner ?? "-").padEnd(21))}  ${terminalSafe(task.replace(/\s+/g, " "))}\n`
              )
            }
          }
          return
        }
        const rows = yield* History.listSessions(store, location)
        if (v.json) for (const r of rows) out.write(`${stringifySafe(r)}\n`)
        else History.printSessions(rows, out, location.display)
      }).pipe(Effect.scoped)
  ).pipe(Command.withDescription("List recorded sessions, newest first"))

  const resume = Command.make(
    "resume",
    {
      ...shared,
      outputFormat,
      notice: Options.text("notice").pipe(
        Options.withDescription(
          "a note from muse the agent reads before it goes on (recorded; a runner's takeover note)"
        ),
        Options.optional
      ),
      session: Args.text({ name: "session" }).pipe(Args.optional)
    },
    (v) =>
      Effect.gen(function* () {
        const flags = toFlags(v, script)
        void v.session
        const id = positionals[0]
        if (isTty && v.outputFormat === "text") return yield* interactive(flags, id, true)
        exitCode = yield* Headless.resume({
          session: id,
          notice: Option.getOrUndefined(v.notice),
          flags,
          format: v.outputFormat,
          env,
          streams: { stdout: pio.stdout, stderr: pio.stderr },
          signals
        })
      })
  ).pipe(
    Command.withDescription("Continue a session (the latest by default); headless, finish the turn that was cut short")
  )

  const replay = Command.make(
    "replay",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      verify: Options.boolean("verify").pipe(
        Options.withDescription("re-run the session from its log; exit 1 at the first divergence")
      ),
      example: Options.boolean("example").pipe(
        Options.withDescription("the example session shipped with muse (no API key needed)")
      ),
      cwd: shared.cwd,
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        exitCode = yield* History.replay(
          {
            session: positionals[0],
            example: v.example,
            verify: v.verify,
            flags: readFlags(v),
            env
          },
          out,
          err
        )
      })
  ).pipe(Command.withDescription("Print a session as a transcript; --verify re-runs it and checks every event"))

  const log = Command.make(
    "log",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      agent: Options.text("agent").pipe(
        Options.withDescription("only this agent (main, worker-1, …)"),
        Options.optional
      ),
      type: Options.text("type").pipe(
        Options.withDescription("only these event types: tool, tool.started, model.*"),
        Options.optional
      ),
      json: Options.boolean("json").pipe(Options.withDescription("the raw events, one JSON object per line")),
      follow: Options.boolean("follow").pipe(
        Options.withAlias("f"),
        Options.withDescription("keep printing events as they are stored, with progress lines, until the session ends")
      ),
      cwd: shared.cwd,
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        const { store, location } = yield* Session.storeFor(readFlags(v), env)
        const id = positionals[0] ?? (yield* Session.latestSession(store))
        if (v.follow) {
          const Follow = yield* Effect.promise(() => import("./follow.js"))
          const filters = { agent: Option.getOrUndefined(v.agent), type: Option.getOrUndefined(v.type), json: v.json }
          const writing = location.kind === "dir" ? Follow.fileWriter(location.dir, id) : undefined
          return yield* Follow.follow({ session: id, store, writing, ...filters }, out, err)
        }
        const { events } = yield* Session.readRecorded(id, store)
        if (events.length === 0) err.write(`session ${id} holds no events: it stopped before its task was recorded\n`)
        History.printLog(
          events,
          { agent: Option.getOrUndefined(v.agent), type: Option.getOrUndefined(v.type), json: v.json },
          out
        )
      }).pipe(Effect.scoped)
  ).pipe(Command.withDescription("The events of a session (the latest by default)"))

  const view = Command.make(
    "view",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      out: Options.text("out").pipe(
        Options.withAlias("o"),
        Options.withDescription("where the page is written (default ./muse-<session>.html; - for stdout)"),
        Options.optional
      ),
      open: Options.boolean("open").pipe(Options.withDescription("open the page in the browser")),
      serve: Options.boolean("serve").pipe(
        Options.withDescription("serve the page on 127.0.0.1, kept live while the session runs (until Ctrl-C)")
      ),
      port: Options.integer("port").pipe(
        Options.withDescription("the port --serve listens on (default: a free one)"),
        Options.optional
      ),
      cwd: shared.cwd,
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        void v.session
        const View = yield* Effect.promise(() => import("./view/command.js"))
        exitCode = yield* View.run(
          {
            session: positionals[0],
            out: Option.getOrUndefined(v.out),
            open: v.open,
            serve: v.serve,
            port: Option.getOrUndefined(v.port),
            flags: readFlags(v),
            env
          },
          out,
          err
        )
      })
  ).pipe(
    Command.withDescription(
      "A session's timeline as one HTML page: lanes per agent, calls, costs, diffs (the latest by default)"
    )
  )

  const runner = Command.make(
    "runner",
    {
      host: Options.text("host").pipe(
        Options.withDescription("the address other runners reach this one at (default 127.0.0.1)"),
        Options.withDefault("127.0.0.1")
      ),
      port: Options.integer("port").pipe(
        Options.withDescription("the port this runner listens on (default 34431)"),
        Options.withDefault(34431)
      ),
      workDir: Options.text("work-dir").pipe(
        Options.withDescription("where the sessions' workspaces are cloned (default: <state dir>/runner)"),
        Options.optional
      ),
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        const location = yield* Session.locationFor(readFlags({ cwd: Option.none(), log: v.log }), env)
        const workDir = Option.getOrElse(v.workDir, () =>
          location.kind === "dir" ? `${location.dir}/runner` : `${pio.env.MUSE_HOME ?? `${pio.env.HOME}/.muse`}/runner`
        )
        return yield* Cluster.runner({
          location,
          host: v.host,
          port: v.port,
          workDir,
          env: pio.env,
          openStore: Effect.map(Session.storeFor(readFlags({ cwd: Option.none(), log: v.log }), env), (s) => s.store),
          say: (line) => err.write(`${line}\n`)
        })
      }).pipe(Effect.scoped)
  ).pipe(Command.withDescription("Join a cluster of runners (--log postgres://…) and run the sessions it is given"))

  const submit = Command.make(
    "submit",
    {
      repo: Options.text("repo").pipe(Options.withDescription("the git URL or path the runner clones")),
      model: shared.model,
      approvalMode: shared.approvalMode,
      sandbox: shared.sandbox,
      maxTurns: shared.maxTurns,
      log: shared.log,
      task: Args.text({ name: "task" }).pipe(Args.repeated)
    },
    (v) =>
      Effect.gen(function* () {
        void v.task
        const location = yield* Session.locationFor(readFlags({ cwd: Option.none(), log: v.log }), env)
        const args: Array<string> = []
        if (Option.isSome(v.model)) args.push("--model", v.model.value)
        if (Option.isSome(v.approvalMode)) args.push("--approval-mode", v.approvalMode.value)
        if (Option.isSome(v.sandbox)) args.push("--sandbox", v.sandbox.value)
        if (Option.isSome(v.maxTurns)) args.push("--max-turns", String(v.maxTurns.value))
        if (script) args.push("--script", path.resolve(pio.cwd, script))
        const session = yield* Cluster.submit({
          task: positionals.join(" "),
          repo: v.repo,
          args,
          location,
          env: pio.env
        })
        out.write(`${session}\n`)
      }).pipe(Effect.scoped)
  ).pipe(Command.withDescription('Start a session on the cluster: muse submit "fix the test" --repo <git url|path>'))

  const attach = Command.make(
    "attach",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      json: Options.boolean("json").pipe(Options.withDescription("the raw events, one JSON object per line")),
      log: shared.log
    },
    (v) =>
      Effect.gen(function* () {
        void v.session
        const id = positionals[0]
        if (!id) {
          return yield* new CliError({
            code: ExitCode.Usage,
            message: "muse attach needs a session id: muse attach <id>"
          })
        }
        const { store } = yield* Session.storeFor(readFlags({ cwd: Option.none(), log: v.log }), env)
        const Follow = yield* Effect.promise(() => import("./follow.js"))
        yield* Follow.follow({ session: id, store, json: v.json }, out, err)
      }).pipe(Effect.scoped)
  ).pipe(Command.withDescription("Follow a session's events as they are stored, until its task ends"))

  const acp = Command.make("acp", shared, (v) =>
    Effect.gen(function* () {
      const Acp = yield* Effect.promise(() => import("./acp.js"))
      exitCode = yield* Acp.run({
        flags: toFlags(v, script),
        env,
        stdin: pio.stdin,
        stdout: pio.stdout,
        stderr: pio.stderr
      })
    })
  ).pipe(
    Command.withDescription(
      'Serve the Agent Client Protocol on stdin/stdout, for editors (Zed: agent_servers.muse = { command: "muse", args: ["acp"] })'
    )
  )

  const trust = Command.make(
    "trust",
    {
      cwd: shared.cwd,
      revoke: Options.boolean("revoke").pipe(Options.withDescription("stop trusting the folder")),
      show: Options.boolean("show").pipe(
        Options.withDescription("only show what the folder's files set and whether it is trusted")
      )
    },
    (v) =>
      Effect.gen(function* () {
        const s = outStyle
        const dir = yield* Session.rootOf({ cwd: Option.getOrUndefined(v.cwd) }, env)
        if (v.revoke) {
          const had = yield* Trust.revoke(dir, pio.env)
          out.write(
            had
              ? `${dir} is no longer trusted: its own settings are not used until you trust it again.\n`
              : `${dir} was not trusted.\n`
          )
          return
        }
        const project = Trust.scan(dir)
        if (project.files.length === 0) {
          out.write(
            `${dir} has no settings of its own (.muse/config.json, .muse/permissions.json, skills): nothing to trust.\n`
          )
          return
        }
        const status = Trust.status(project, pio.env)
        out.write(`${s.bold(dir)}\n${Trust.describe(project, s).join("\n")}\n`)
        if (v.show) {
          out.write(
            `${
              status._tag === "trusted"
                ? s.green("trusted")
                : status._tag === "changed"
                  ? s.yellow(`changed since you trusted it: ${status.changed.join(", ")}`)
                  : s.yellow(
                      `not trusted${status._tag === "untrusted" && status.problem ? ` (${status.problem})` : ""}`
                    )
            }\n`
          )
          return
        }
        yield* Trust.record(project, pio.env)
        out.write(
          `${s.green("trusted")}: muse uses these settings here until one of these files changes (then it asks again). Undo: muse trust --revoke\n`
        )
      })
  ).pipe(Command.withDescription("Trust the current folder's own settings (.muse/config.json, permissions, skills)"))

  const rewind = Command.make(
    "rewind",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      to: Options.text("to").pipe(
        Options.withDescription(
          "where to: a seq, turn:<n> (just before that turn's prompt), last (before the latest turn) or undo (take the latest rewind back); without it, the turns are listed"
        ),
        Options.optional
      ),
      force: Options.boolean("force").pipe(
        Options.withDescription("also put back files someone else changed since the session wrote them")
      ),
      cwd: shared.cwd
    },
    (v) =>
      Effect.gen(function* () {
        exitCode = yield* Rewinds.rewind(
          {
            session: positionals[0],
            to: Option.getOrUndefined(v.to),
            force: v.force,
            cwd: Option.getOrUndefined(v.cwd),
            script,
            env
          },
          out
        )
      })
  ).pipe(
    Command.withDescription(
      "Put a session's files and conversation back to a point of its log (the latest session by default)"
    )
  )

  const fork = Command.make(
    "fork",
    {
      session: Args.text({ name: "session" }).pipe(Args.optional),
      at: Options.text("at").pipe(
        Options.withDescription("where the fork starts: a seq, turn:<n> (just before that turn's prompt) or last"),
        Options.optional
      ),
      json: Options.boolean("json").pipe(Options.withDescription("the new session as one JSON object")),
      cwd: shared.cwd
    },
    (v) =>
      Effect.gen(function* () {
        exitCode = yield* Rewinds.fork(
          {
            session: positionals[0],
            at: Option.getOrUndefined(v.at),
            cwd: Option.getOrUndefined(v.cwd),
            json: v.json,
            env
          },
          out
        )
      })
  ).pipe(
    Command.withDescription(
      "A new session that starts as a session was at a point of its log, in a git worktree of its own"
    )
  )

  const cli = Command.run(
    root.pipe(
      Command.withSubcommands([
        run,
        sessions,
        resume,
        replay,
        log,
        view,
        trust,
        acp,
        rewind,
        fork,
        runner,
        submit,
        attach
      ])
    ),
    {
      name: "muse",
      version: version()
    }
  )

  // help and usage errors go through Effect's Console; without colours (a pipe, NO_COLOR) they carry no escapes
  // the parser's own options (--completions, --log-level, --wizard) are not muse's: the strict flag table refuses them
  const program = cli(["node", "muse", ...argv]).pipe(
    Effect.provide(CliConfig.layer({ showBuiltIns: false })),
    Effect.provide(NodeContext.layer)
  ) as Effect.Effect<void, unknown>
  const exit = await Effect.runPromiseExit(
    outStyle === plain ? Effect.flatMap(Effect.console, (c) => Effect.withConsole(program, withoutEscapes(c))) : program
  )
  if (Exit.isSuccess(exit)) return exitCode
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const e = failure.value
    if (e instanceof CliError) {
      fail(e.message, e.detail)
      return e.code
    }
    if (ValidationError.isValidationError(e)) {
      if (ValidationError.isHelpRequested(e)) return ExitCode.Success
      return ExitCode.Usage
    }
  }
  if (Cause.isInterruptedOnly(exit.cause)) return ExitCode.Interrupted
  pio.stderr.write(`${errStyle.red("muse: unexpected failure:")} ${Cause.pretty(exit.cause)}\n`)
  return ExitCode.Failed
}
