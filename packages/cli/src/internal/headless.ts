/**
 * `muse run "<task>"` and `muse resume` without a terminal: one task, no one to ask, output as
 * text, one JSON object, or a stream of JSON lines; an exit code that says how it went.
 */
import { type Approvals, type Event, type EventLog, Stop } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { escapeUnsafe, plain, stringifySafe, styleFor, terminalSafe } from "./ansi.js"
import { CliError, ExitCode } from "./exit.js"
import * as Render from "./render.js"
import * as Session from "./session.js"
import * as Telemetry from "./telemetry.js"
import * as Tools from "./tools.js"

export type OutputFormat = "text" | "json" | "stream-json"

export interface Streams {
  readonly stdout: NodeJS.WritableStream & {
    readonly isTTY?: boolean | undefined
    readonly columns?: number | undefined
  }
  readonly stderr: NodeJS.WritableStream & {
    readonly isTTY?: boolean | undefined
    readonly columns?: number | undefined
  }
}

/** The signals a headless run stops on. */
export type StopSignal = "SIGINT" | "SIGTERM"

/** Subscribe to the stop signals; returns the unsubscribe. */
export type Signals = (listener: (signal: StopSignal) => void) => () => void

export interface RunOptions {
  readonly task: string
  /** The new session's id (`muse submit` chooses it); a new one when absent. */
  readonly session?: string | undefined
  readonly flags: Session.Flags
  readonly format: OutputFormat
  readonly env: Session.Env
  readonly streams: Streams
  /**
   * SIGINT and SIGTERM: the first stops the session gracefully (the tool in flight is settled,
   * `turn.interrupted` recorded, the log closed and its lock released); a second one, or a stop
   * that takes longer than `STOP_GRACE_MS`, interrupts at once.
   */
  readonly signals: Signals
}

/** How long a graceful stop may take before it is cut short. */
export const STOP_GRACE_MS = 15_000

const headlessPrompter = (approvalMode: Approvals.Mode, note: (line: string) => void): Approvals.PrompterService => ({
  ask: (request) =>
    Effect.sync(() => {
      if (request.tool === "/plan") {
        if (approvalMode === "auto") {
          note(`plan approved (approval mode auto): ${request.summary}`)
          return { allow: true, scope: "once" as const }
        }
        note(`plan not run: no one can approve it in a headless run (use --approval-mode auto)`)
        return { allow: false, scope: "once" as const }
      }
      if (request.unsandboxed) {
        const reason =
          "running a command outside the OS sandbox needs a person's answer; no one can give it in a headless run (allow what it needs with the sandbox settings, or --sandbox off)"
        note(`denied ${request.tool} outside the sandbox ($ ${request.summary}): ${reason}`)
        return { allow: false, scope: "once" as const, reason }
      }
      // the suggestion is the rule a person would be offered, never a pattern made from the command text
      const rule = request.proposal
      const warnings = request.warnings ?? []
      const how =
        rule && rule.action === "allow"
          ? `allow it with --allow "${rule.tool}${rule.pattern === undefined ? "" : `:${rule.pattern}`}" or a more permissive --approval-mode`
          : warnings.length > 0
            ? `no rule can allow it (${warnings.join("; ")})`
            : "allow it with an --allow rule or a more permissive --approval-mode"
      const reason = `no one can answer in a headless run; ${how}`
      // the whole call is named (the note is escaped where it is shown)
      note(
        `denied ${request.tool} (${request.tool === "run_shell" ? `$ ${request.summary}` : request.summary}): ${reason}`
      )
      return { allow: false, scope: "once" as const, reason }
    })
})

interface Emitter {
  readonly io: Omit<SessionRuntime.Io, "input" | "prompter">
  readonly note: (line: string) => void
  readonly finish: (summary: Record<string, unknown>, events: ReadonlyArray<Event.Envelope>) => void
}

const emitter = (format: OutputFormat, streams: Streams, firstNewSeq: () => number): Emitter => {
  const out = (s: string) => streams.stdout.write(s)
  const err = (s: string) => streams.stderr.write(s)
  // JSON keeps every character; the few a terminal would act on are written as \u escapes
  const line = (o: unknown) => out(`${stringifySafe(o)}\n`)
  if (format === "stream-json") {
    return {
      note: (text) => line({ kind: "notice", text }),
      io: {
        onText: (agent, delta) => Effect.sync(() => line({ kind: "text", agent, delta })),
        onToolOutput: (callId, chunk) => Effect.sync(() => line({ kind: "tool_output", callId, chunk })),
        onEvent: (event) =>
          Effect.sync(() => (event.seq >= firstNewSeq() ? line({ kind: "event", event }) : undefined)),
        output: (text) => Effect.sync(() => line({ kind: "output", text }))
      },
      finish: (summary) => line({ kind: "result", ...summary })
    }
  }
  if (format === "json") {
    const outputs: Array<string> = []
    return {
      note: (text) => outputs.push(text),
      io: { output: (text) => Effect.sync(() => void outputs.push(text)) },
      finish: (summary) => line({ ...summary, output: outputs })
    }
  }
  const style = styleFor(streams.stderr)
  const outStyle = styleFor(streams.stdout)
  const columns = streams.stderr.columns ?? 100
  let atLineStart = true
  // every line on stderr was built from escaped text; terminalSafe is the last check
  const errLine = (l: string) => err(`${terminalSafe(l, style)}\n`)
  return {
    note: (text) => errLine(`${style.yellow("!")} ${escapeUnsafe(text, style)}`),
    io: {
      onText: (agent, delta) =>
        Effect.sync(() => {
          if (agent !== "main" || delta === "") return
          // the model's answer keeps its line breaks and tabs; anything a terminal would act on is escaped
          out(escapeUnsafe(delta, outStyle, { newlines: true, tabs: "keep" }))
          atLineStart = delta.endsWith("\n")
        }),
      onEvent: (event) =>
        Effect.sync(() => {
          if (event.seq < firstNewSeq()) return
          if (event.type === "model.responded" && event.agent === "main" && !atLineStart) {
            out("\n")
            atLineStart = true
          }
          const lines = Render.eventLines(event, {
            style,
            columns,
            mainText: false,
            transcript: false,
            maxDiffLines: 30
          })
          if (event.type === "turn.completed") return
          for (const l of lines) errLine(l)
        }),
      output: (text) =>
        Effect.sync(() => {
          const shown = escapeUnsafe(text, outStyle, { newlines: true, tabs: "keep" })
          out(shown.endsWith("\n") ? shown : `${shown}\n`)
        })
    },
    finish: (summary) => {
      if (!atLineStart) out("\n")
      const status = String(summary.status)
      const totals = summary.usage as { tokens: number; costUsd?: number | null }
      const mark = status === "completed" ? style.green("✓") : status === "failed" ? style.red("✗") : style.yellow("■")
      errLine(
        `${mark} ${status}${summary.reason && status !== "completed" ? `: ${escapeUnsafe(String(summary.reason), style)}` : ""} · ${Render.fmtInt(
          totals.tokens
        )} tokens${totals.costUsd ? ` · ${Render.fmtCost(totals.costUsd)}` : ""} · session ${summary.session}`
      )
    }
  }
}

/** Where the session is kept, for the first line of stream-json: `stateDir` for a directory, `log` for a database. */
const where = (location: Session.Prepared["location"]) =>
  location.kind === "dir" ? { stateDir: location.dir } : { log: location.display }

const sessionErrorMessage = (e: unknown): string => {
  const anyE = e as any
  if (anyE?._tag === "SessionLocked") {
    return `session ${anyE.session} is in use by process ${anyE.pid}; nothing was done (close that muse first, or wait for it to finish)`
  }
  return anyE?.message ?? String(e)
}

/**
 * Run a session program until it ends. The first stop signal presses the session's stop button:
 * the turns in progress end (`turn.interrupted`), the session saves and closes. A second signal, or
 * a stop that takes longer than `STOP_GRACE_MS`, interrupts the program at once.
 */
const runStoppable = <A, E>(
  program: Effect.Effect<A, E>,
  stop: Stop.Service,
  signals: Signals,
  note: (line: string) => void
) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(program)
    let signal: StopSignal | undefined
    let grace: ReturnType<typeof setTimeout> | undefined
    const unsubscribe = signals((sig) => {
      if (signal !== undefined) {
        Effect.runFork(Fiber.interrupt(fiber))
        return
      }
      signal = sig
      note(`${sig}: stopping — the work in progress ends and the session is saved (${sig} again stops at once)`)
      Effect.runFork(stop.request(`stopped by ${sig}`))
      grace = setTimeout(() => Effect.runFork(Fiber.interrupt(fiber)), STOP_GRACE_MS)
      grace.unref?.()
    })
    const exit = yield* Fiber.await(fiber)
    unsubscribe()
    if (grace) clearTimeout(grace)
    return { exit, signal }
  })

const finishRun = (
  options: { readonly format: OutputFormat; readonly streams: Streams },
  em: Emitter,
  session: string,
  store: EventLog.StoreService,
  /** The seq this run went on from, or `undefined` when it never opened the log (nothing it did is there). */
  fromSeq: number | undefined,
  started: number,
  result: { readonly exit: Exit.Exit<unknown, unknown>; readonly signal: StopSignal | undefined },
  /** What to say when the run recorded nothing (a resume that found nothing to do). */
  nothingDone?: (() => string) | undefined
) =>
  Effect.gen(function* () {
    const fresh = fromSeq === undefined ? [] : yield* store.read(session, fromSeq).pipe(Effect.orElseSucceed(() => []))
    const outcome = Session.exitCodeOf(fresh)
    let code = outcome.code
    let status = outcome.status
    let reason = outcome.reason
    if (result.signal !== undefined) {
      code = result.signal === "SIGTERM" ? ExitCode.Terminated : ExitCode.Interrupted
      status = "interrupted"
      reason = `stopped by ${result.signal}; continue with: muse resume ${session}`
    } else if (Exit.isFailure(result.exit)) {
      const failure = Cause.failureOption(result.exit.cause)
      const err = Option.isSome(failure) ? failure.value : Cause.squash(result.exit.cause)
      if (err instanceof CliError) return yield* Effect.fail(err)
      if ((err as { _tag?: unknown })?._tag === "EmptySession") return yield* Effect.fail(Session.noTask(session))
      code = ExitCode.Failed
      status = "failed"
      reason = sessionErrorMessage(err)
    } else if (fresh.length === 0 && nothingDone) {
      code = ExitCode.NothingToResume
      status = "nothing to resume"
      reason = nothingDone()
    }
    const totals = new Render.Totals()
    for (const e of fresh) totals.add(e)
    em.finish(
      {
        session,
        status,
        exitCode: code,
        ...(reason ? { reason } : {}),
        text: outcome.text,
        usage: {
          inputTokens: totals.inputTokens,
          outputTokens: totals.outputTokens,
          cachedInputTokens: totals.cachedInputTokens,
          tokens: totals.tokens,
          costUsd: totals.cost ?? null
        },
        modelCalls: totals.calls,
        events: fresh.length,
        durationMs: Math.round(performance.now() - started)
      },
      fresh
    )
    if (
      options.format === "text" &&
      reason &&
      ((status === "failed" && Exit.isFailure(result.exit)) || code === ExitCode.NothingToResume)
    ) {
      options.streams.stderr.write(`muse: ${escapeUnsafe(reason, plain, { newlines: true })}\n`)
    }
    return code
  })

/** `muse run`: returns the exit code. */
export const run = (options: RunOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const started = performance.now()
    const task = options.task.trim()
    if (task === "") {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: 'muse run needs a task: muse run "fix the failing test"'
      })
    }
    const session = options.session ?? EventLogFile.newSessionId()
    if (options.session !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(options.session)) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `--session-id ${JSON.stringify(options.session)}: use letters, digits, '.', '_' and '-'`
      })
    }
    const prepared = yield* Session.prepareNew(
      options.flags,
      options.env,
      session,
      task.length > 80 ? `${task.slice(0, 79)}…` : task,
      Session.headlessTrust(options.flags, options.env)
    )
    if (options.session !== undefined) {
      const ends = yield* prepared.store.ends(session).pipe(
        Effect.map((e) => e.first),
        Effect.catchTag("SessionNotFound", () => Effect.succeed(undefined)),
        Effect.mapError(Session.logError)
      )
      if (ends !== undefined) {
        return yield* new CliError({
          code: ExitCode.Usage,
          message: `session ${session} already exists in ${prepared.location.display}; continue it with muse resume ${session}`
        })
      }
    }
    const em = emitter(options.format, options.streams, () => 0)
    if (options.format === "stream-json") {
      options.streams.stdout.write(
        `${stringifySafe({ kind: "session", session, model: prepared.config.model, root: prepared.root, ...where(prepared.location) })}\n`
      )
    }
    for (const n of prepared.notices) em.note(n)
    for (const w of prepared.plugins.warnings) em.note(w)
    const telemetry = yield* Telemetry.start(yield* Telemetry.settings(prepared.loaded, options.env.env), {
      session,
      model: prepared.config.model,
      command: "run",
      resuming: false
    })
    const stop = yield* Stop.make
    const io: SessionRuntime.Io = telemetry.wrap({
      ...em.io,
      // the task is recorded with the session's start, in one write; there is nothing after it
      input: Effect.succeed(Option.none()),
      prompter: headlessPrompter(prepared.config.approvalMode, em.note),
      stop
    })
    const program = SessionRuntime.start({
      config: prepared.config,
      session,
      task,
      io,
      services: {
        languageModel: prepared.languageModel,
        plugins: prepared.plugins.plugins,
        tools: Tools.make([]),
        sandbox: prepared.sandboxOptions
      },
      store: prepared.store
    })
    const result = yield* runStoppable(program as Effect.Effect<unknown, unknown>, stop, options.signals, em.note)
    yield* prepared.plugins.close
    return yield* finishRun(options, em, session, prepared.store, 0, started, result)
  }).pipe(Effect.scoped)

export interface ResumeOptions {
  readonly session: string | undefined
  /** Told to the main agent before its next model call, and recorded (a runner's takeover note). */
  readonly notice?: string | undefined
  readonly flags: Session.Flags
  readonly format: OutputFormat
  readonly env: Session.Env
  readonly streams: Streams
  /** As for `run`. */
  readonly signals: Signals
}

/** How the main agent's last turn in `events` ended, for a resume that found nothing to do. */
const lastTurn = (events: ReadonlyArray<Event.Envelope>): string | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.agent !== "main") continue
    if (e.type === "turn.completed") {
      const d = e.data as { status?: string; reason?: string | null }
      return `its last task ended (${d.status ?? "completed"}${d.reason ? `: ${d.reason}` : ""})`
    }
    if (e.type === "user.input") return undefined
  }
  return undefined
}

/** `muse resume` without a terminal: finish the turn that was cut short. */
export const resume = (options: ResumeOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const started = performance.now()
    const session =
      options.session ?? (yield* Session.latestSession((yield* Session.storeFor(options.flags, options.env)).store))
    const prepared = yield* Session.prepareResume(
      session,
      options.flags,
      options.env,
      Session.headlessTrust(options.flags, options.env)
    )
    // the seq this run goes on from, known once it holds the log (another process may have written meanwhile)
    let fromSeq: number | undefined
    const em = emitter(options.format, options.streams, () => fromSeq ?? Number.POSITIVE_INFINITY)
    if (options.format === "stream-json") {
      options.streams.stdout.write(
        `${stringifySafe({ kind: "session", session, model: prepared.config.model, root: prepared.root, ...where(prepared.location), resumedAt: prepared.nextSeq })}\n`
      )
    }
    for (const n of prepared.notices) em.note(n)
    for (const w of prepared.plugins.warnings) em.note(w)
    const telemetry = yield* Telemetry.start(yield* Telemetry.settings(prepared.loaded, options.env.env), {
      session,
      model: prepared.config.model,
      command: "resume",
      resuming: true
    })
    const stop = yield* Stop.make
    let notice = options.notice?.trim() ? Option.some(options.notice.trim()) : Option.none<string>()
    const io: SessionRuntime.Io = telemetry.wrap({
      ...em.io,
      input: Effect.succeed(Option.none()),
      prompter: headlessPrompter(prepared.config.approvalMode, em.note),
      stop,
      ...(Option.isSome(notice)
        ? {
            notices: Effect.sync(() => {
              const next = notice
              notice = Option.none()
              return next
            })
          }
        : {}),
      onResume: (info) =>
        Effect.sync(() => {
          fromSeq = info.nextSeq
          if (info.ignored) em.note(`checkpoint not used (${info.ignored}); replaying the whole log`)
        })
    })
    const program = SessionRuntime.resume({
      session,
      ...(prepared.moved ? { root: prepared.root } : {}),
      io,
      services: {
        languageModel: prepared.languageModel,
        plugins: prepared.plugins.plugins,
        tools: Tools.make(prepared.events),
        sandbox: prepared.sandboxOptions
      },
      store: prepared.store
    })
    const result = yield* runStoppable(program as Effect.Effect<unknown, unknown>, stop, options.signals, em.note)
    yield* prepared.plugins.close
    return yield* finishRun(options, em, session, prepared.store, fromSeq, started, result, () => {
      const ended = lastTurn(prepared.events)
      return `session ${session} has nothing to resume: ${
        ended ?? "no task of it is unfinished"
      }. Give it a new task in a terminal (muse resume ${session}) or start one: muse run "<task>"`
    }).pipe(Effect.scoped)
  }).pipe(Effect.scoped)
