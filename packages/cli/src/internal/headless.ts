/**
 * `muse run "<task>"` and `muse resume` without a terminal: one task, no one to ask, output as
 * text, one JSON object, or a stream of JSON lines; an exit code that says how it went.
 */
import type { Approvals, Event } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { escapeUnsafe, plain, stringifySafe, styleFor, terminalSafe } from "./ansi.js"
import { CliError, ExitCode } from "./exit.js"
import * as Render from "./render.js"
import * as Session from "./session.js"
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

export interface RunOptions {
  readonly task: string
  readonly flags: Session.Flags
  readonly format: OutputFormat
  readonly env: Session.Env
  readonly streams: Streams
  /** Resolves when the process is asked to stop (SIGINT). */
  readonly interrupted: Promise<void>
}

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

const sessionErrorMessage = (e: unknown): string => {
  const anyE = e as any
  if (anyE?._tag === "SessionLocked") return `session ${anyE.session} is in use by process ${anyE.pid}`
  return anyE?.message ?? String(e)
}

/** Run a program until done or interrupted; SIGINT interrupts its fiber (the turn is recorded as interrupted). */
const runInterruptible = <A, E>(program: Effect.Effect<A, E>, interrupted: Promise<void>) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(program)
    let wasInterrupted = false
    const onSignal = Effect.promise(() => interrupted).pipe(
      Effect.zipRight(Effect.sync(() => (wasInterrupted = true))),
      Effect.zipRight(Fiber.interrupt(fiber)),
      Effect.fork
    )
    const watcher = yield* onSignal
    const exit = yield* Fiber.await(fiber)
    yield* Fiber.interrupt(watcher)
    return { exit, wasInterrupted }
  })

const finishRun = (
  options: { readonly format: OutputFormat; readonly streams: Streams },
  em: Emitter,
  session: string,
  stateDir: string,
  fromSeq: number,
  started: number,
  result: { readonly exit: Exit.Exit<unknown, unknown>; readonly wasInterrupted: boolean }
) =>
  Effect.gen(function* () {
    const fresh = yield* EventLogFile.readSession(session, { dir: stateDir, fromSeq }).pipe(
      Effect.orElseSucceed(() => [])
    )
    const outcome = Session.exitCodeOf(fresh)
    let code = outcome.code
    let status = outcome.status
    let reason = outcome.reason
    if (result.wasInterrupted) {
      code = ExitCode.Interrupted
      status = "interrupted"
      reason = "interrupted (SIGINT)"
    } else if (Exit.isFailure(result.exit)) {
      const failure = Cause.failureOption(result.exit.cause)
      const err = Option.isSome(failure) ? failure.value : Cause.squash(result.exit.cause)
      if (err instanceof CliError) return yield* Effect.fail(err)
      code = ExitCode.Failed
      status = "failed"
      reason = sessionErrorMessage(err)
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
    if (status === "failed" && options.format === "text" && reason && Exit.isFailure(result.exit)) {
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
    const session = EventLogFile.newSessionId()
    const prepared = yield* Session.prepareNew(
      options.flags,
      options.env,
      session,
      task.length > 80 ? `${task.slice(0, 79)}…` : task,
      Session.headlessTrust(options.flags, options.env)
    )
    const em = emitter(options.format, options.streams, () => 0)
    if (options.format === "stream-json") {
      options.streams.stdout.write(
        `${stringifySafe({ kind: "session", session, model: prepared.config.model, root: prepared.root, stateDir: prepared.stateDir })}\n`
      )
    }
    for (const n of prepared.notices) em.note(n)
    for (const w of prepared.plugins.warnings) em.note(w)
    let given = false
    const io: SessionRuntime.Io = {
      ...em.io,
      input: Effect.sync(() => {
        if (given) return Option.none()
        given = true
        return Option.some(task)
      }),
      prompter: headlessPrompter(prepared.config.approvalMode, em.note)
    }
    const program = SessionRuntime.start({
      config: prepared.config,
      session,
      io,
      services: { languageModel: prepared.languageModel, plugins: prepared.plugins.plugins, tools: Tools.make([]) },
      dir: prepared.stateDir
    })
    const result = yield* runInterruptible(program as Effect.Effect<unknown, unknown>, options.interrupted)
    yield* prepared.plugins.close
    return yield* finishRun(options, em, session, prepared.stateDir, 0, started, result)
  })

export interface ResumeOptions {
  readonly session: string | undefined
  readonly flags: Session.Flags
  readonly format: OutputFormat
  readonly env: Session.Env
  readonly streams: Streams
  readonly interrupted: Promise<void>
}

/** `muse resume` without a terminal: finish the turn that was cut short. */
export const resume = (options: ResumeOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const started = performance.now()
    const dir = yield* Session.stateDirFor(options.flags, options.env)
    const session = options.session ?? (yield* Session.latestSession(dir))
    const prepared = yield* Session.prepareResume(
      session,
      options.flags,
      options.env,
      Session.headlessTrust(options.flags, options.env)
    )
    const fromSeq = prepared.nextSeq
    const em = emitter(options.format, options.streams, () => fromSeq)
    if (options.format === "stream-json") {
      options.streams.stdout.write(
        `${stringifySafe({ kind: "session", session, model: prepared.config.model, root: prepared.root, stateDir: prepared.stateDir, resumedAt: fromSeq })}\n`
      )
    }
    for (const n of prepared.notices) em.note(n)
    for (const w of prepared.plugins.warnings) em.note(w)
    const io: SessionRuntime.Io = {
      ...em.io,
      input: Effect.succeed(Option.none()),
      prompter: headlessPrompter(prepared.config.approvalMode, em.note),
      onResume: (info) =>
        Effect.sync(() => {
          if (info.ignored) em.note(`checkpoint not used (${info.ignored}); replaying the whole log`)
        })
    }
    const program = SessionRuntime.resume({
      session,
      io,
      services: {
        languageModel: prepared.languageModel,
        plugins: prepared.plugins.plugins,
        tools: Tools.make(prepared.events)
      },
      dir: prepared.stateDir
    })
    const result = yield* runInterruptible(program as Effect.Effect<unknown, unknown>, options.interrupted)
    yield* prepared.plugins.close
    return yield* finishRun(options, em, session, prepared.stateDir, fromSeq, started, result)
  })
