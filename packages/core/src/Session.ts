/**
 * Running, replaying and resuming an agent program against a session's log.
 *
 * A program is an Effect that records through the `Recorder` (agents, crews and skills all do).
 * `run` records it live. `replay` re-runs it against the recorded events — no model call, no tool
 * side effect — and with `verify` reports the first divergence (seq, expected, got). `resume`
 * replays to the end of the log, settles what was in flight, then continues live on the same log.
 *
 * @example
 * ```ts
 * import { Session } from "@musekit/core"
 *
 * // const report = yield* Session.replay(program, { events, verify: true })
 * // report.matched === events.length
 *
 * // inside a recorded program: put every file the session's tools changed back to turn 2
 * // const { plan, result } = yield* Session.rewind({ events, to: "turn:2", workspaceFor })
 * // result.restored, result.kept (changed since by someone else), plan.notUndone (shell commands)
 *
 * // a new session that starts as this one was at seq 120, in another checkout
 * // const forked = Session.fork({ events, session: "s1", at: "120", root: "/work/s1-fork" })
 * ```
 */
import { Effect, Either, Schema } from "effect"
import type * as Event from "./Event.js"
import * as EventLog from "./EventLog.js"
import * as Recorder from "./Recorder.js"
import type * as Redactor from "./Redactor.js"
import * as Rewind from "./Rewind.js"
import type * as Workspace from "./Workspace.js"

export interface ReplayReport {
  /** Recorded events the program reproduced. */
  readonly matched: number
  /** Events in the log. */
  readonly total: number
  /** The log ended while the program wanted to go on (an interrupted run); not a divergence. */
  readonly endedEarly: boolean
}

/** The program finished but the log holds more events than it produced. */
export class Unreplayed extends Schema.TaggedError<Unreplayed>("@musekit/core/Unreplayed")("Unreplayed", {
  seq: Schema.Number,
  expected: Schema.String
}) {
  override get message() {
    return `replay diverged at seq ${this.seq}: the log has ${this.expected}, the program produced nothing more`
  }
}

export interface ReplayOptions {
  readonly events: ReadonlyArray<Event.Envelope>
  readonly verify?: boolean | undefined
  readonly getBlob?: ((hash: string) => Effect.Effect<Uint8Array, EventLog.EventLogError>) | undefined
  readonly redactor?: Redactor.Redactor | undefined
  readonly onEvent?: ((e: Event.Envelope) => Effect.Effect<void>) | undefined
}

/** Re-run `program` against recorded events. Fails with the first `Divergence` (or `Unreplayed`). */
export const replay = <A, E, R>(
  program: Effect.Effect<A, E, R>,
  options: ReplayOptions
): Effect.Effect<
  ReplayReport,
  E | Recorder.Divergence | Unreplayed | EventLog.EventLogError,
  Exclude<R, Recorder.Recorder>
> =>
  Effect.gen(function* () {
    const rec = Recorder.makeReplay({
      events: options.events,
      mode: "replay",
      getBlob: options.getBlob,
      redactor: options.redactor,
      onEvent: options.onEvent
    })
    const exit = yield* Effect.either(Effect.provideService(program, Recorder.Recorder, rec))
    let endedEarly = false
    if (exit._tag === "Left") {
      const err = exit.left as any
      if (err?._tag === "ReplayEnded") endedEarly = true
      else if (err?._tag === "Interrupted") endedEarly = true
      else return yield* Effect.fail(exit.left as E | Recorder.Divergence | EventLog.EventLogError)
    }
    const remaining = rec.remaining()
    if (options.verify && remaining.length > 0) {
      const first = remaining[0]!
      return yield* new Unreplayed({ seq: first.seq, expected: `${first.type} (agent ${first.agent})` })
    }
    return { matched: rec.matched(), total: options.events.length, endedEarly }
  })

export interface ResumeOptions {
  readonly redactor?: Redactor.Redactor | undefined
  readonly onEvent?: ((e: Event.Envelope) => Effect.Effect<void>) | undefined
  /**
   * The recorded events to replay before going live (default: the whole log). A program restored
   * from a checkpoint replays only the events after it.
   */
  readonly events?: ReadonlyArray<Event.Envelope> | undefined
}

/**
 * Replay `program` over the log's events, then continue live on the same log. In-flight steps at
 * the tail are settled by each step's `settle` rule (re-run, or reported as interrupted).
 */
export const resume = <A, E, R>(
  program: Effect.Effect<A, E, R>,
  options: ResumeOptions = {}
): Effect.Effect<A, E | EventLog.EventLogError, Exclude<R, Recorder.Recorder> | EventLog.EventLog> =>
  Effect.gen(function* () {
    const log = yield* EventLog.EventLog
    const events = options.events ?? (yield* EventLog.readAll(log))
    const rec = Recorder.makeReplay({
      events,
      mode: "resume",
      log,
      redactor: options.redactor,
      onEvent: options.onEvent
    })
    return yield* Effect.provideService(program, Recorder.Recorder, rec)
  })

/** `run` was given a log that already holds events: continuing it is `resume`'s job. */
export class SessionNotEmpty extends Schema.TaggedError<SessionNotEmpty>("@musekit/core/SessionNotEmpty")(
  "SessionNotEmpty",
  { session: Schema.String, lastSeq: Schema.Number }
) {
  override get message() {
    return `session ${this.session} already holds ${this.lastSeq + 1} event(s): Session.run starts a new session on an empty log; use Session.resume to continue this one (or open a new session id)`
  }
}

/**
 * Run `program` live, recording to the `EventLog` in context. The log must be empty: appending a
 * second run to a recorded session would make it unreplayable, so a log with events fails with
 * `SessionNotEmpty` (continue it with `resume`).
 */
export const run = <A, E, R>(
  program: Effect.Effect<A, E, R>,
  options: {
    readonly onEvent?: ((e: Event.Envelope) => Effect.Effect<void>) | undefined
    /**
     * Events the caller appended for this same run just before (its first events, written with the
     * log's creation): the log must hold exactly that many.
     */
    readonly written?: number | undefined
  } = {}
): Effect.Effect<A, E | SessionNotEmpty, Exclude<R, Recorder.Recorder> | EventLog.EventLog> =>
  Effect.flatMap(EventLog.EventLog, (log) =>
    Effect.flatMap(
      log.lastSeq,
      (lastSeq): Effect.Effect<A, E | SessionNotEmpty, Exclude<R, Recorder.Recorder>> =>
        lastSeq !== (options.written ?? 0) - 1
          ? Effect.fail(new SessionNotEmpty({ session: log.sessionId, lastSeq }))
          : Effect.provideService(
              program,
              Recorder.Recorder,
              Recorder.makeLive(log, options.onEvent ? { onEvent: options.onEvent } : {})
            )
    )
  )

/** A rewind or fork target that the session does not have. */
export class RewindError extends Schema.TaggedError<RewindError>("@musekit/core/RewindError")("RewindError", {
  message: Schema.String
}) {}

/**
 * Put the files the session's tools changed back to a point of its log (`Rewind.resolve` reads
 * `to`), recorded as a step so that replay serves it and a later rewind can undo it. `events` are
 * the session's events so far. Files someone else changed since are kept unless `force`.
 */
export const rewind = (options: {
  readonly events: ReadonlyArray<Event.Envelope>
  readonly to: string
  readonly workspaceFor: (agent: string) => Effect.Effect<Workspace.Service | undefined>
  readonly force?: boolean | undefined
}): Effect.Effect<
  { readonly plan: Rewind.Plan; readonly result: Rewind.Result },
  RewindError | Recorder.RecorderError,
  Recorder.Recorder
> =>
  Effect.gen(function* () {
    const target = Rewind.resolve(options.events, options.to)
    if (Either.isLeft(target)) return yield* new RewindError({ message: target.left })
    const plan = Rewind.plan(options.events, target.right)
    const result = yield* Rewind.apply({ plan, workspaceFor: options.workspaceFor, force: options.force })
    return { plan, result }
  })

/**
 * The log of a new session that starts as `session` was at `at` (a seq, `turn:<n>` or `last`):
 * its events up to that point, unchanged except that `session.started` names the fork
 * (`config.fork = { session, seq }`) and, when given, the new workspace root. The parent's log is
 * only read.
 */
export const fork = (options: {
  readonly events: ReadonlyArray<Event.Envelope>
  readonly session: string
  readonly at: string
  readonly root?: string | undefined
}): Either.Either<{ readonly events: ReadonlyArray<Event.Envelope>; readonly target: Rewind.Target }, RewindError> =>
  Either.gen(function* () {
    const target = yield* Either.mapLeft(
      Rewind.resolve(options.events, options.at),
      (m) => new RewindError({ message: m })
    )
    const events = options.events
      .filter((e) => e.seq <= target.seq)
      .map((e) => {
        if (e.type !== "session.started") return e
        const data = e.data as { config?: Record<string, unknown> }
        const config = {
          ...data.config,
          ...(options.root !== undefined ? { root: options.root } : {}),
          fork: { session: options.session, seq: target.seq }
        }
        return { ...e, data: { ...data, config } }
      })
    return { events, target }
  })
