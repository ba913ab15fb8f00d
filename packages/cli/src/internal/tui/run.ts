/**
 * `muse` and `muse resume` in a terminal: the folder's trust asked first, the session prepared, the
 * UI (`app.ts`) connected to it — keys, approvals, streamed text, events, retries, resize, SIGINT
 * and SIGTERM — and the session run until the user leaves.
 *
 * Cancelling interrupts the session program (the agent records `turn.interrupted`), then resumes
 * the same session in place: the log is replayed to its end and the prompt comes back.
 *
 * @example
 * ```ts
 * const code = yield* runInteractive({ flags, env, stdin: process.stdin, stdout: process.stdout })
 * ```
 */
import * as readline from "node:readline"
import { type Approvals, type Event, Rewind, Stop } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { escapeUnsafe, styleFor } from "../ansi.js"
import { type CliError, ExitCode } from "../exit.js"
import * as History from "../history.js"
import * as Mcp from "../mcp.js"
import type * as Model from "../model.js"
import * as Session from "../session.js"
import * as Telemetry from "../telemetry.js"
import * as Tools from "../tools.js"
import * as Trust from "../trust.js"
import { version } from "../version.js"
import { App } from "./app.js"
import type { Key } from "./editor.js"
import { askTrust, type KeyHandler } from "./trustScreen.js"

export interface InteractiveOptions {
  readonly flags: Session.Flags
  readonly env: Session.Env
  readonly stdin: NodeJS.ReadStream
  readonly stdout: NodeJS.WriteStream
  readonly resume?: { readonly session: string | undefined } | undefined
}

const welcome = (app: App, prepared: Session.Prepared, session: string, resumed: boolean): Array<string> => {
  const s = app.style
  const home = process.env.HOME
  const root = home && prepared.root.startsWith(home) ? `~${prepared.root.slice(home.length)}` : prepared.root
  return [
    `${s.bold("muse")} ${s.dim(version())} · ${s.cyan(escapeUnsafe(prepared.config.model, s))} · ${escapeUnsafe(root, s)}`,
    s.dim(
      `${resumed ? "resumed" : "session"} ${session} · approvals ${prepared.config.approvalMode} · sandbox ${
        app.sandboxStatus().active ? app.sandboxMode : app.sandboxMode === "off" ? "off" : "unavailable"
      } · crew ${prepared.config.crew ? "on" : "off"}`
    ),
    s.dim("Type a task, or /help. Ctrl-C cancels a turn, Ctrl-D exits."),
    ...prepared.notices.map((w) => s.yellow(`! ${escapeUnsafe(w, s)}`)),
    ...prepared.plugins.warnings.map((w) => s.yellow(`! ${escapeUnsafe(w, s)}`)),
    ""
  ]
}

/** Run the interactive UI until the user leaves; returns the exit code. */
export const runInteractive = (options: InteractiveOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const resuming = options.resume !== undefined
    const stdin = options.stdin
    // the model's retries (429, 5xx, a lost connection) reach the status line, once there is one
    let onRetry: ((retry: Model.Retry) => void) | undefined
    const env: Session.Env = { ...options.env, onRetry: (retry) => onRetry?.(retry) }
    const style = styleFor(options.stdout)
    // keys typed while muse starts are kept for the prompt; a question drawn meanwhile never takes them
    const early: Array<[string | undefined, Key]> = []
    let handler: KeyHandler = (str, key) => {
      if (early.length < 4096) early.push([str, key])
    }
    const keys: Array<KeyHandler> = []
    const onKey = (str: string | undefined, key: Key | undefined) => {
      try {
        ;(keys[keys.length - 1] ?? handler)(str, key ?? { sequence: str })
      } catch (e) {
        options.stdout.write(`internal error: ${escapeUnsafe((e as Error).message)}\r\n`)
      }
    }
    readline.emitKeypressEvents(stdin)
    stdin.setRawMode?.(true)
    stdin.resume()
    options.stdout.write("\x1b[?2004h")
    stdin.on("keypress", onKey)
    let restored = false
    const restoreTerminal = Effect.sync(() => {
      if (restored) return
      restored = true
      stdin.off("keypress", onKey)
      stdin.setRawMode?.(false)
      stdin.pause()
      options.stdout.write("\x1b[?2004l\x1b[?25h")
    })

    // the folder's own settings: asked about once, before they could take effect
    let trustState:
      | {
          readonly decision: Session.TrustDecision
          readonly recorded: boolean
          readonly rulesAtStart: ReadonlyArray<unknown>
        }
      | undefined
    let quit = false
    const decide: Session.Decide = (root) =>
      Effect.gen(function* () {
        const { project, status } = Session.projectTrust(root, options.env)
        let trusted = status._tag === "trusted"
        let recorded = trusted
        if (!trusted && status._tag !== "nothing") {
          if (options.flags.trust) trusted = true
          else {
            const answer = yield* Effect.promise(() =>
              askTrust(options.stdout, style, { project, status }, (h) => keys.push(h))
            )
            keys.pop()
            if (answer === "quit") quit = true
            if (answer === "trust") {
              yield* Trust.record(project, options.env.env)
              recorded = true
            }
            trusted = answer === "trust" || answer === "once"
          }
        }
        const rulesAtStart = trusted
          ? yield* SessionRuntime.loadProjectRules(root).pipe(Effect.orElseSucceed(() => []))
          : []
        const decision = { project, status, trusted }
        trustState = { decision, recorded, rulesAtStart }
        return decision
      })

    const started = yield* Effect.either(
      Effect.gen(function* () {
        if (options.resume) {
          const session =
            options.resume.session ??
            (yield* Session.latestSession((yield* Session.storeFor(options.flags, options.env)).store))
          const prepared = yield* Session.prepareResume(session, options.flags, env, decide)
          // the whole session, for the cost so far and the transcript's last lines
          const past = (yield* Session.readRecorded(session, prepared.store)).events
          return { session, prepared: prepared as Session.Prepared, past }
        }
        const session = EventLogFile.newSessionId()
        const prepared = yield* Session.prepareNew(options.flags, env, session, "", decide)
        return { session, prepared, past: [] as ReadonlyArray<Event.Envelope> }
      })
    )
    if (started._tag === "Left" || quit) {
      yield* restoreTerminal
      if (started._tag === "Left") return yield* Effect.fail(started.left)
      return ExitCode.Interrupted
    }
    const { session, prepared, past } = started.right
    /** Rules the user saved with "yes, always" in this session (what core stores for such an answer). */
    const savedRules: Array<unknown> = []
    const app = new App(options.stdout, session, prepared.config, prepared.modelSource, prepared.plugins.skills)
    const mcp = prepared.plugins.mcp
    if (mcp) {
      // server names, versions, errors and tool names come from the servers: shown as data
      app.mcpLines = () => Mcp.statusLines(mcp.servers, mcp.discovery, app.style, (t) => escapeUnsafe(t, app.style))
    }
    app.rewinder = {
      turns: () =>
        Effect.runPromise(
          prepared.store.read(session).pipe(
            Effect.map((events) => Rewind.turns(events)),
            Effect.orElseSucceed(() => [])
          )
        ),
      changed: (spec) =>
        Effect.runPromise(
          prepared.store.read(session).pipe(
            Effect.flatMap((events) => SessionRuntime.planRewind(events, spec)),
            Effect.map((r) => ({
              files: r.changed.map((f) => (f.agent === "main" ? f.path : `${f.agent}:${f.path}`))
            })),
            Effect.catchAll((e) => Effect.succeed({ error: e.message }))
          )
        )
    }
    handler = (str, key) => app.onKey(str, key)
    for (const [str, key] of early.splice(0)) app.onKey(str, key)
    if (trustState) {
      const t = trustState
      const nothing = t.decision.status._tag === "nothing"
      app.alwaysOk = t.decision.trusted || nothing
      if (t.recorded || nothing) {
        const baseline = nothing ? {} : Trust.fingerprint(t.decision.project)
        app.onAlwaysSaved = () => {
          Trust.acceptSavedRules({
            root: t.decision.project.root,
            baseline,
            rulesAtStart: t.rulesAtStart,
            saved: savedRules,
            env: options.env.env
          })
        }
      }
    }
    onRetry = (retry) => {
      app.retrying = {
        until: Date.now() + retry.delayMs,
        reason: retry.reason,
        attempt: retry.attempt,
        of: retry.maxRetries
      }
      app.draw()
    }
    const onResize = () => {
      app.screen.redraw()
      app.draw()
    }
    options.stdout.on("resize", onResize)
    const onSigint = () => app.onKey(undefined, { name: "c", ctrl: true })
    process.on("SIGINT", onSigint)
    // SIGTERM: stop what runs, save, and leave
    let terminated = false
    const onSigterm = () => {
      terminated = true
      app.exitRequested = true
      app.cancel?.("stopped by SIGTERM")
      app.finishInputIfWaiting()
    }
    process.on("SIGTERM", onSigterm)
    const stop = yield* Stop.make

    if (past.length > 0) {
      const lines: Array<string> = []
      // the last screenfuls are enough (a day-long session has far more lines than anyone scrolls)
      History.printTranscript(past.slice(-400), {
        write: (t) => lines.push(...t.replace(/\n$/, "").split("\n")),
        style: app.style,
        columns: app.screen.columns
      })
      const shown = lines.slice(-40)
      if (past.length > 400) shown.unshift(app.style.dim(`… earlier lines: muse replay ${session}`))
      else if (lines.length > shown.length)
        shown.unshift(app.style.dim(`… ${lines.length - shown.length} earlier lines (muse replay ${session})`))
      app.screen.print(shown)
      for (const e of past) {
        app.totals.add(e)
        app.crew.track(e, e.data ?? {})
      }
    }
    app.screen.print(welcome(app, prepared, session, resuming))

    const telemetry = yield* Telemetry.start(yield* Telemetry.settings(prepared.loaded, options.env.env), {
      session,
      model: prepared.config.model,
      command: "interactive",
      resuming
    })
    const io: SessionRuntime.Io = telemetry.wrap({
      input: Effect.map(
        Effect.promise(() => app.nextInput()),
        (t) => (t === undefined ? Option.none() : Option.some(t))
      ),
      stop,
      prompter: {
        ask: (request) =>
          Effect.async<Approvals.Answer>((resume) => {
            app.askApproval(request, (a) => {
              if (a.allow && a.scope === "project") {
                // what the answer stores: the confirmed rule (or, where a store keeps the call's summary, that)
                if (a.rule) savedRules.push({ ...a.rule, scope: "project" })
                savedRules.push({ tool: request.tool, pattern: request.summary, action: "allow", scope: "project" })
              }
              resume(Effect.succeed(a))
            })
            return Effect.sync(() => {
              if (app.state._tag === "approval") app.state = { _tag: "busy" }
            })
          })
      },
      onText: (agent, delta) => Effect.sync(() => (agent === "main" ? app.text(delta) : undefined)),
      onToolOutput: (_callId, chunk) => Effect.sync(() => app.toolOutput(chunk)),
      onEvent: (e) => Effect.sync(() => app.onEvent(e)),
      onResume: (info) =>
        Effect.sync(() => {
          if (info.ignored)
            app.print([`checkpoint not used (${escapeUnsafe(info.ignored, app.style)}); replaying the whole log`])
        }),
      output: (text) =>
        Effect.sync(() => {
          app.lastOutput = text
          app.print([...escapeUnsafe(text.replace(/\n$/, ""), app.style, { newlines: true }).split("\n"), ""])
        })
    })
    const services = (events: ReadonlyArray<Event.Envelope>): SessionRuntime.Services => ({
      languageModel: prepared.languageModel,
      plugins: prepared.plugins.plugins,
      tools: Tools.make(events),
      sandbox: {
        ...prepared.sandboxOptions,
        built: (service) => {
          app.sandbox = service
        }
      }
    })

    let code: number = ExitCode.Success
    let failure: string | undefined
    app.setBusy(resuming ? "resuming" : "starting")
    const recorded = resuming ? yield* prepared.store.read(session).pipe(Effect.orElseSucceed(() => [])) : []
    app.replayedBelow = recorded.length
    const program = resuming
      ? SessionRuntime.resume({ session, io, services: services(recorded), store: prepared.store })
      : SessionRuntime.start({ config: prepared.config, session, io, services: services([]), store: prepared.store })
    const fiber = yield* Effect.fork(program as Effect.Effect<unknown, unknown>)
    // Ctrl-C presses the session's stop button: the main agent's turn and every crew member's end,
    // and the session asks for the next input; reports that come later wait for it
    app.cancel = (reason) => Effect.runFork(stop.request(reason))
    app.hardExit = () => Effect.runFork(Fiber.interrupt(fiber))
    const exit = yield* Fiber.await(fiber)
    app.cancel = undefined
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      const err = Cause.squash(exit.cause) as any
      failure =
        err?._tag === "SessionLocked"
          ? `session ${session} is in use by process ${err.pid}`
          : (err?.message ?? String(err))
      code = ExitCode.Failed
    } else if (terminated) code = ExitCode.Terminated
    yield* prepared.plugins.close
    options.stdout.off("resize", onResize)
    process.off("SIGINT", onSigint)
    process.off("SIGTERM", onSigterm)
    app.gate.dispose()
    yield* restoreTerminal
    const s = app.style
    app.close([
      ...(failure ? [s.red(`muse: ${escapeUnsafe(failure, s)}`)] : []),
      s.dim(`${app.totals.describe()} · session ${session}`),
      s.dim(`continue it with: muse resume ${session}`)
    ])
    return code
  }).pipe(Effect.scoped)
