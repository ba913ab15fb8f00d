/**
 * The recorder: how an agent program writes to the event log, so that it can be replayed.
 *
 * Live, `append` appends to the `EventLog`. Replaying, `append` matches what the program produces
 * against the recorded events of the same agent (each agent is deterministic given what it was
 * fed) and returns the recorded envelope; a mismatch is a `Divergence` naming the seq. Resuming is
 * replaying until an agent's recorded events run out, then appending live.
 *
 * `step` is the write-ahead unit: an intent event (`tool.started`, `model.requested`, …) is durable
 * before the effect runs; the outcome event follows. Replaying, the outcome is served from the log
 * and the effect does not run. Resuming with an intent but no outcome at the tail, `settle` decides
 * (re-run, or report as interrupted).
 *
 * @example
 * ```ts
 * import { Recorder } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const roll = Recorder.step({
 *   agent: "main",
 *   intent: { type: "dice.rolling", data: {} },
 *   run: Effect.sync(() => Math.floor(Math.random() * 6) + 1),
 *   outcome: (n) => ({ type: "dice.rolled", data: { n } }),
 *   fromOutcome: (e) => (e.data as { n: number }).n
 * }) // replays return the recorded number
 * ```
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as Event from "./Event.js"
import * as EventLog from "./EventLog.js"
import * as Redactor from "./Redactor.js"

/** Replay produced something other than what the log holds. */
export class Divergence extends Schema.TaggedError<Divergence>("@musekit/core/Divergence")("Divergence", {
  seq: Schema.Number,
  agent: Schema.String,
  expected: Schema.String,
  got: Schema.String,
  /** What the difference suggests, e.g. the tools or plugin events of the recording this run lacks. */
  hint: Schema.optional(Schema.String)
}) {
  override get message() {
    return `replay diverged at seq ${this.seq} (agent ${this.agent}):\n  expected ${this.expected}\n  got      ${this.got}${
      this.hint ? `\n  ${this.hint}` : ""
    }`
  }
}

/** Event types the core machinery records; any other prefix belongs to a plugin or to the app. */
const CORE_PREFIXES = new Set([
  "session",
  "model",
  "tool",
  "approval",
  "turn",
  "agent",
  "crew",
  "user",
  "input",
  "clock",
  "random",
  "interrupted",
  "skill",
  "checkpoint",
  "inbox",
  "prompt",
  "file",
  "report"
])

const toolNames = (e: { readonly data: unknown }): ReadonlyArray<string> | undefined => {
  const tools = (e.data as { tools?: unknown } | null)?.tools
  return Array.isArray(tools) && tools.every((t) => typeof t === "string") ? tools : undefined
}

/**
 * Why a replay that diverged probably did: the recording offered tools this run does not have (a
 * plugin or tool list differs), or holds an event of a plugin this run lacks. Undefined when
 * nothing points that way.
 */
export const divergenceHint = (
  expected: { readonly type: string; readonly data: unknown },
  got: { readonly type: string; readonly data: unknown }
): string | undefined => {
  const before = toolNames(expected)
  const now = toolNames(got)
  if (before && now) {
    const missing = before.filter((t) => !now.includes(t))
    const extra = now.filter((t) => !before.includes(t))
    const parts: Array<string> = []
    if (missing.length > 0) parts.push(`the recording had the tool(s) ${missing.join(", ")} that this run lacks`)
    if (extra.length > 0) parts.push(`this run has the tool(s) ${extra.join(", ")} the recording did not`)
    if (parts.length > 0) {
      return `${parts.join("; ")}: replay with the same plugins and tools the session was recorded with`
    }
  }
  if (expected.type === "tool.started" && got.type !== "tool.started") {
    const tool = (expected.data as { tool?: unknown } | null)?.tool
    if (typeof tool === "string") return `the recording ran the tool ${tool} here: is it (or its plugin) missing?`
  }
  const prefix = expected.type.split(".")[0]!
  if (expected.type !== got.type && !CORE_PREFIXES.has(prefix) && !got.type.startsWith(`${prefix}.`)) {
    return `the recording has a ${expected.type} event here, which a plugin or the app records: replay with the plugin that records ${prefix}.* events`
  }
  return undefined
}

/** Replay reached the end of the log while the program wanted to go on (the run was cut short). */
export class ReplayEnded extends Schema.TaggedError<ReplayEnded>("@musekit/core/ReplayEnded")("ReplayEnded", {
  seq: Schema.Number,
  agent: Schema.String
}) {
  override get message() {
    return `the log ends at seq ${this.seq}; agent ${this.agent} would continue live from here`
  }
}

/**
 * The turn stops here: a stop was requested (`Stop`; `seq` is -1), or the log shows that the turn
 * was interrupted here (replaying a Ctrl-C; `seq` is that of the recorded `turn.interrupted`).
 */
export class Interrupted extends Schema.TaggedError<Interrupted>("@musekit/core/Interrupted")("Interrupted", {
  seq: Schema.Number,
  agent: Schema.String,
  /** Why (the stop request's reason, or the one the log recorded). */
  reason: Schema.optional(Schema.String)
}) {
  override get message() {
    return `the turn of agent ${this.agent} was interrupted${this.reason ? ` (${this.reason})` : ""}${
      this.seq >= 0 ? ` at seq ${this.seq}` : ""
    }`
  }
}

/** Event type recorded when a turn is interrupted (e.g. Ctrl-C). */
export const INTERRUPTED = "turn.interrupted"

/** The `Interrupted` a recorded `turn.interrupted` event stands for. */
export const interruptedAt = (e: Event.Envelope): Interrupted => {
  const reason = (e.data as { reason?: unknown } | null)?.reason
  return new Interrupted({ seq: e.seq, agent: e.agent, ...(typeof reason === "string" ? { reason } : {}) })
}

export type RecorderError = Divergence | ReplayEnded | Interrupted | EventLog.EventLogError

/** Key of draft data that holds observations of the world (not compared on replay). */
export const OBSERVED = "observed"

export interface Service {
  /** Append (live) or match against the log (replay). `observe` runs only live; its value lands in `data.observed`. */
  readonly append: (
    draft: Event.Draft,
    observe?: Effect.Effect<unknown> | undefined,
    options?: AppendOptions | undefined
  ) => Effect.Effect<Event.Envelope, RecorderError>
  /** Replaying: the recorded outcome of `intent` (the agent's next event whose parent is the intent). */
  readonly outcomeOf: (
    intent: Event.Envelope,
    types: ReadonlyArray<string>
  ) => Effect.Effect<Option.Option<Event.Envelope>>
  /** Whether an agent still has recorded events to replay. */
  readonly replaying: (agent: string) => Effect.Effect<boolean>
  /** The agent's next recorded event, if replaying. */
  readonly peek: (agent: string) => Effect.Effect<Option.Option<Event.Envelope>>
  /** `replay` never runs effects; `resume` and `live` may. */
  readonly mode: "live" | "replay" | "resume"
  /** The recorded events this recorder replays (those after a checkpoint, when a run starts from one); none live. */
  readonly recorded: ReadonlyArray<Event.Envelope>
  /**
   * Store a payload (live; see `EventLog.Service.putBlob`) — replaying, the payload is already in
   * the blob store and only its hash is computed.
   */
  readonly putBlob: (
    data: Uint8Array | string,
    options?: EventLog.BlobOptions | undefined
  ) => Effect.Effect<string, EventLog.EventLogError>
  readonly getBlob: (hash: string) => Effect.Effect<Uint8Array, EventLog.EventLogError>
  /** Called by an agent program on every event it produced (for observers and the UI). */
  readonly events: ReadonlyArray<(e: Event.Envelope) => Effect.Effect<void>>
  /**
   * What the log does to text before storing it (secrets replaced). Fingerprints of recorded data
   * are taken over redacted text, so a replay, which sees only redacted data, computes the same.
   */
  readonly redact: (text: string) => string
}

export interface AppendOptions {
  /**
   * `false`: do not wait for the event to be durable; it becomes durable with the next durable
   * append, and observers see it only then. For outcomes and decisions a crash may lose (the
   * intent before them is durable, so resume settles it). Default `true`.
   */
  readonly durable?: boolean | undefined
  /**
   * With `durable: false`: observers see the event (and those before it) as soon as the log has
   * made it durable, not only at the next durable append. For the intent of a step whose effect
   * changes nothing (`StepOptions.durableIntent`), so that the UI shows a long read while it runs.
   */
  readonly shown?: boolean | undefined
}

export class Recorder extends Context.Tag("@musekit/core/Recorder")<Recorder, Service>() {}

const withObserved = (draft: Event.Draft, observed: unknown): Event.Draft => ({
  ...draft,
  data: { ...(draft.data as object), [OBSERVED]: observed }
})

const stripObserved = (data: unknown): unknown => {
  if (typeof data !== "object" || data === null || !(OBSERVED in data)) return data
  const { [OBSERVED]: _, ...rest } = data as Record<string, unknown>
  return rest
}

/** A live recorder over the `EventLog`. */
export const makeLive = (
  log: EventLog.Service,
  options: { readonly onEvent?: (e: Event.Envelope) => Effect.Effect<void> } = {}
): Service => {
  // events appended without waiting, shown to observers once a later append made them durable
  const unseen: Array<Event.Envelope> = []
  /** Show observers the unseen events up to `seq` (durable by now), in order. */
  const showUpTo = (onEvent: (e: Event.Envelope) => Effect.Effect<void>, seq: number): Effect.Effect<void> =>
    Effect.whileLoop({
      while: () => unseen.length > 0 && unseen[0]!.seq <= seq,
      body: () => onEvent(unseen.shift()!),
      step: () => {}
    })
  return {
    append: (draft, observe, appendOptions) =>
      Effect.gen(function* () {
        const d = observe ? withObserved(draft, yield* observe) : draft
        if (appendOptions?.durable === false) {
          const e = yield* log.enqueue(d)
          if (options.onEvent) {
            unseen.push(e)
            unseen.sort((a, b) => a.seq - b.seq)
            if (appendOptions.shown === true) {
              const onEvent = options.onEvent
              yield* Effect.forkDaemon(
                Effect.ignore(
                  Effect.zipRight(
                    log.whenDurable(e.seq),
                    Effect.suspend(() => showUpTo(onEvent, e.seq))
                  )
                )
              )
            }
          }
          return e
        }
        const e = yield* log.append(d)
        if (options.onEvent) {
          // events before this one in the log are durable now; later ones (another agent's) are not yet
          while (unseen.length > 0 && unseen[0]!.seq < e.seq) yield* options.onEvent(unseen.shift()!)
          yield* options.onEvent(e)
        }
        return e
      }),
    outcomeOf: () => Effect.succeed(Option.none()),
    replaying: () => Effect.succeed(false),
    peek: () => Effect.succeed(Option.none()),
    mode: "live",
    recorded: [],
    putBlob: log.putBlob,
    getBlob: log.getBlob,
    events: [],
    redact: log.redact
  }
}

export const layerLive: Layer.Layer<Recorder, never, EventLog.EventLog> = Layer.effect(
  Recorder,
  Effect.map(EventLog.EventLog, (log) => makeLive(log))
)

export interface ReplayOptions {
  /** The recorded events of the session, in seq order. */
  readonly events: ReadonlyArray<Event.Envelope>
  /**
   * `replay`: no appends at all (a program that goes past the log diverges).
   * `resume`: once an agent's recorded events run out it continues live on `log`.
   */
  readonly mode: "replay" | "resume"
  /** The live log, for `resume`. */
  readonly log?: EventLog.Service | undefined
  /** Blobs, for `replay` without a writable log. */
  readonly getBlob?: ((hash: string) => Effect.Effect<Uint8Array, EventLog.EventLogError>) | undefined
  /** The redactor the live run used, so redacted data compares equal. */
  readonly redactor?: Redactor.Redactor | undefined
  readonly onEvent?: ((e: Event.Envelope) => Effect.Effect<void>) | undefined
}

export interface ReplayState {
  /** Events of the log no agent has consumed (verification fails if any remain). */
  readonly remaining: () => ReadonlyArray<Event.Envelope>
  /** Number of recorded events matched so far. */
  readonly matched: () => number
}

/**
 * What replay compares: everything an agent program decides, not where or when it landed — the
 * agent, parent and type, and the data without its observations as canonical JSON, the produced
 * side redacted (the recorded side was redacted when it was written). Plain data that is equal
 * member by member, with nothing in it to redact, is known to match without serializing it; in
 * every other case (a mismatch included) the JSON texts are compared.
 */
const sameAs = (
  draft: Event.Draft,
  recorded: Event.Envelope,
  redactor: Redactor.Redactor,
  checks: Redactor.TokenChecks | undefined
): boolean => {
  if (
    draft.type !== recorded.type ||
    (draft.parent ?? "") !== (recorded.parent ?? "") ||
    draft.agent !== recorded.agent
  ) {
    return false
  }
  const expected = stripObserved(recorded.data)
  const produced = draft.data === recorded.data ? expected : stripObserved(draft.data)
  if (checks !== undefined && sameCleanJson(produced, expected, redactor, checks, 0)) return true
  return redactor.redact(Event.canonicalJson(produced)) === Event.canonicalJson(expected)
}

/** Nesting deeper than this is left to the JSON comparison (and a cycle to the serializer, which throws). */
const MAX_DEPTH = 64

/** JSON leaves out members with these values. */
const omitted = (v: unknown) => v === undefined || typeof v === "function" || typeof v === "symbol"

/**
 * Whether `a` and `b` certainly have the same canonical JSON, with nothing in it to redact: the
 * same value (`Redactor.isClean`), or plain data (strings, numbers, booleans, null, arrays, plain
 * objects without `toJSON`) equal member by member, keys in the same order. `false` means "differs
 * or not known".
 */
const sameCleanJson = (
  a: unknown,
  b: unknown,
  redactor: Redactor.Redactor,
  checks: Redactor.TokenChecks,
  depth: number
): boolean => {
  if (a === b) {
    switch (typeof b) {
      case "string":
        return checks.string(b)
      case "number":
        return !Number.isFinite(b) || checks.number(b)
      case "boolean":
      case "undefined":
        return true
      default:
        return b === null || Redactor.isClean(redactor, b)
    }
  }
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || depth >= MAX_DEPTH) return false
  if ((a as { toJSON?: unknown }).toJSON !== undefined || (b as { toJSON?: unknown }).toJSON !== undefined) return false
  const proto = Object.getPrototypeOf(a)
  if (proto !== Object.getPrototypeOf(b)) return false
  if (proto === Array.prototype) {
    const x = a as ReadonlyArray<unknown>
    const y = b as ReadonlyArray<unknown>
    if (x.length !== y.length) return false
    for (let i = 0; i < x.length; i++) if (!sameCleanJson(x[i], y[i], redactor, checks, depth + 1)) return false
    return true
  }
  if (proto !== Object.prototype && proto !== null) return false
  const x = a as Record<string, unknown>
  const y = b as Record<string, unknown>
  const xs = Object.keys(x)
  const ys = Object.keys(y)
  let i = 0
  let j = 0
  for (;;) {
    let xv: unknown
    let yv: unknown
    while (i < xs.length && omitted((xv = x[xs[i]!]))) i++
    while (j < ys.length && omitted((yv = y[ys[j]!]))) j++
    if (i === xs.length || j === ys.length) return i === xs.length && j === ys.length
    const key = xs[i]!
    if (key !== ys[j] || !checks.string(key) || !sameCleanJson(xv, yv, redactor, checks, depth + 1)) return false
    i++
    j++
  }
}

const show = (d: Event.Draft) => {
  const s = `${d.type} ${Event.canonicalJson(stripObserved(d.data))}`
  return s.length > 600 ? `${s.slice(0, 600)}…` : s
}

/** A recorder that replays `events` (and, for `resume`, continues live on `log`). */
export const makeReplay = (options: ReplayOptions): Service & ReplayState => {
  const redactor = options.redactor ?? Redactor.none
  const checks = Redactor.tokenChecks(redactor)
  const queues = new Map<string, { events: Array<Event.Envelope>; cursor: number }>()
  for (const e of options.events) {
    let q = queues.get(e.agent)
    if (!q) queues.set(e.agent, (q = { events: [], cursor: 0 }))
    q.events.push(e)
  }
  let matched = 0
  const lastSeq = options.events.length > 0 ? options.events[options.events.length - 1]!.seq : -1
  const live = options.log
    ? makeLive(options.log, { ...(options.onEvent ? { onEvent: options.onEvent } : {}) })
    : undefined
  const next = (agent: string): Event.Envelope | undefined => {
    const q = queues.get(agent)
    return q !== undefined && q.cursor < q.events.length ? q.events[q.cursor] : undefined
  }
  const match = (draft: Event.Draft): Event.Envelope | Interrupted | Divergence | undefined => {
    const q = queues.get(draft.agent)
    if (q === undefined || q.cursor >= q.events.length) return undefined
    const expected = q.events[q.cursor]!
    if (expected.type === INTERRUPTED && draft.type !== INTERRUPTED) return interruptedAt(expected)
    if (!sameAs(draft, expected, redactor, checks)) {
      const hint = divergenceHint(expected, draft)
      return new Divergence({
        seq: expected.seq,
        agent: draft.agent,
        expected: show(expected),
        got: show(draft),
        ...(hint ? { hint } : {})
      })
    }
    q.cursor++
    matched++
    return expected
  }
  const service: Service & ReplayState = {
    append: (draft, observe, appendOptions) =>
      Effect.suspend(() => {
        const m = match(draft)
        if (m === undefined) {
          if (options.mode === "resume" && live) return live.append(draft, observe, appendOptions)
          return Effect.fail(new ReplayEnded({ seq: lastSeq, agent: draft.agent }))
        }
        if (isMismatch(m)) return Effect.fail(m)
        return options.onEvent ? Effect.as(options.onEvent(m), m) : Effect.succeed(m)
      }),
    outcomeOf: (intent, types) =>
      Effect.sync(() => {
        const q = queues.get(intent.agent)
        if (!q || q.cursor >= q.events.length) return Option.none()
        const next = q.events[q.cursor]!
        return next.parent === intent.id && types.includes(next.type) ? Option.some(next) : Option.none()
      }),
    replaying: (agent) =>
      Effect.sync(() => {
        const q = queues.get(agent)
        return q !== undefined && q.cursor < q.events.length
      }),
    peek: (agent) =>
      Effect.sync(() => {
        const q = queues.get(agent)
        return q && q.cursor < q.events.length ? Option.some(q.events[q.cursor]!) : Option.none()
      }),
    mode: options.mode,
    recorded: options.events,
    putBlob: (data, blobOptions) =>
      Effect.suspend(() => {
        if (live) return live.putBlob(data, blobOptions)
        // the hash the live run got: of the payload as stored (redacted unless it had to stay exact)
        const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data
        return EventLog.sha256Hex(blobOptions?.exact ? bytes : Redactor.redactBytes(redactor, bytes))
      }),
    getBlob: (hash) =>
      live
        ? live.getBlob(hash)
        : options.getBlob
          ? options.getBlob(hash)
          : Effect.fail(new EventLog.BlobNotFound({ hash })),
    events: [],
    redact: options.redactor ? (text) => options.redactor!.redact(text) : (options.log?.redact ?? ((text) => text)),
    remaining: () => {
      const out: Array<Event.Envelope> = []
      for (const q of queues.values()) out.push(...q.events.slice(q.cursor))
      return out.sort((a, b) => a.seq - b.seq)
    },
    matched: () => matched
  }
  // with no observer to run between the events of a step, steps and polls may match synchronously
  if (!options.onEvent) replayCores.set(service, { next, match })
  return service
}

/**
 * The synchronous core of a replaying recorder, for `step` and `poll`: replaying, most steps find
 * both events in the log, and matching them directly saves the effects in between.
 */
interface ReplayCore {
  /** The agent's next recorded event, if it has one left. */
  readonly next: (agent: string) => Event.Envelope | undefined
  /** What `append` does while the agent has recorded events left, without effects. */
  readonly match: (draft: Event.Draft) => Event.Envelope | Interrupted | Divergence | undefined
}

const replayCores = new WeakMap<Service, ReplayCore>()

const isMismatch = (m: Event.Envelope | Interrupted | Divergence): m is Interrupted | Divergence =>
  m instanceof Interrupted || m instanceof Divergence

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

export interface StepOptions<A, E, R> {
  readonly agent: string
  readonly parent?: string | null | undefined
  readonly intent: { readonly type: string; readonly data: unknown }
  /** Observed live before the effect (e.g. workspace fingerprints); stored in `data.observed`. */
  readonly observe?: Effect.Effect<unknown> | undefined
  /**
   * `false`: the effect changes nothing in the world (a read), so it may start before its intent is
   * durable: the intent is written with the next durable append (or the log's next commit), and a
   * crash that loses it loses nothing a resume needs — the step simply runs again. Default `true`.
   */
  readonly durableIntent?: boolean | undefined
  readonly run: (intent: Event.Envelope) => Effect.Effect<A, E, R>
  readonly outcome: (a: A) => { readonly type: string; readonly data: unknown }
  readonly fromOutcome: (outcome: Event.Envelope) => Effect.Effect<A, RecorderError> | A
  /** Outcome types that may follow the intent (default: the type `outcome` produces, found by replay). */
  readonly outcomeTypes: ReadonlyArray<string>
  /**
   * Resuming with this intent in flight (durable intent, no outcome): what to do. Default re-runs.
   * Return `undefined` to re-run, or a value to record as the outcome instead.
   */
  readonly settle?: ((intent: Event.Envelope) => Effect.Effect<A | undefined, E, R>) | undefined
}

/**
 * One write-ahead step: intent durable → effect → outcome durable. Replaying, the outcome comes from
 * the log and the effect does not run. (A step whose effect changes nothing may start before its
 * intent is durable: `durableIntent: false`.)
 */
export const step = <A, E, R>(
  options: StepOptions<A, E, R>
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, E | RecorderError, R | Recorder> =>
  Effect.flatMap(Recorder, (rec) => stepWith(rec, options))

/** `step` with the recorder given (no `Recorder` in context needed: for loops that run it often). */
export const stepWith = <A, E, R>(
  rec: Service,
  options: StepOptions<A, E, R>
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, E | RecorderError, R> =>
  Effect.suspend(() => {
    const core = replayCores.get(rec)
    return core !== undefined && core.next(options.agent) !== undefined
      ? replayStep(rec, core, options)
      : liveStep(rec, options)
  })

/** `step` while the agent is replaying: what `liveStep` does, with the recorded events matched directly. */
const replayStep = <A, E, R>(
  rec: Service,
  core: ReplayCore,
  options: StepOptions<A, E, R>
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, E | RecorderError, R> => {
  const intent = core.match({
    agent: options.agent,
    parent: options.parent ?? null,
    type: options.intent.type,
    data: options.intent.data
  })!
  if (isMismatch(intent)) return Effect.fail(intent)
  const recorded = core.next(options.agent)
  if (recorded === undefined || recorded.parent !== intent.id || !options.outcomeTypes.includes(recorded.type)) {
    return afterIntent(rec, options, intent, true)
  }
  const value = options.fromOutcome(recorded)
  return Effect.isEffect(value)
    ? Effect.flatMap(value, (a) => replayOutcome(rec, core, recorded, a))
    : replayOutcome(rec, core, recorded, value)
}

/** The end of `replayStep`: the recorded outcome matched, with the value read from it. */
const replayOutcome = <A>(
  rec: Service,
  core: ReplayCore,
  recorded: Event.Envelope,
  value: A
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, RecorderError> => {
  const draft = Event.toDraft(recorded)
  const out = core.match(draft)
  // (an effectful `fromOutcome` that took the agent's events is left to `append`)
  if (out === undefined) return Effect.map(rec.append(draft), (outcome) => ({ value, outcome }))
  return isMismatch(out) ? Effect.fail(out) : Effect.succeed({ value, outcome: out })
}

const liveStep = <A, E, R>(
  rec: Service,
  options: StepOptions<A, E, R>
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, E | RecorderError, R> =>
  Effect.gen(function* () {
    const wasReplaying = yield* rec.replaying(options.agent)
    const intent = yield* rec.append(
      { agent: options.agent, parent: options.parent ?? null, type: options.intent.type, data: options.intent.data },
      options.observe,
      options.durableIntent === false ? { durable: false, shown: true } : undefined
    )
    return yield* afterIntent(rec, options, intent, wasReplaying)
  })

/** The rest of a step once its intent is in the log. */
const afterIntent = <A, E, R>(
  rec: Service,
  options: StepOptions<A, E, R>,
  intent: Event.Envelope,
  wasReplaying: boolean
): Effect.Effect<{ readonly value: A; readonly outcome: Event.Envelope }, E | RecorderError, R> =>
  Effect.gen(function* () {
    const recorded = yield* rec.outcomeOf(intent, options.outcomeTypes)
    if (Option.isSome(recorded)) {
      const value = options.fromOutcome(recorded.value)
      const a: A = Effect.isEffect(value) ? yield* value : value
      const out = yield* rec.append(Event.toDraft(recorded.value))
      return { value: a, outcome: out }
    }
    const next = yield* rec.peek(options.agent)
    if (Option.isSome(next) && next.value.type === INTERRUPTED) {
      return yield* interruptedAt(next.value)
    }
    if (Option.isSome(next)) {
      return yield* new Divergence({
        seq: next.value.seq,
        agent: options.agent,
        expected: show(next.value),
        got: `an outcome of ${intent.type} (${options.outcomeTypes.join(" | ")})`
      })
    }
    if (rec.mode === "replay") return yield* new ReplayEnded({ seq: intent.seq, agent: options.agent })
    // In flight at the tail of a resumed log: the intent was recorded, its outcome was not.
    const inFlight = wasReplaying
    let value: A | undefined
    if (inFlight && options.settle) value = yield* options.settle(intent)
    if (value === undefined) value = yield* options.run(intent)
    const o = options.outcome(value)
    // the intent is durable; a crash that loses the outcome leaves the step in flight, which resume settles
    const out = yield* rec.append({ agent: options.agent, parent: intent.id, type: o.type, data: o.data }, undefined, {
      durable: false
    })
    return { value, outcome: out }
  })

/**
 * Take back, as they were, every event `agent` still has recorded (replaying or resuming), and
 * return them; live, none. For what a program records once per run under a name of its own — an
 * observation of the world at resume, say — which a later run cannot produce again and a replay
 * cannot look at: each run first takes back what earlier runs recorded, then (resuming) records
 * its own.
 */
export const takeRecorded = (agent: string): Effect.Effect<ReadonlyArray<Event.Envelope>, RecorderError, Recorder> =>
  Effect.flatMap(Recorder, (rec) =>
    Effect.gen(function* () {
      const out: Array<Event.Envelope> = []
      while (yield* rec.replaying(agent)) {
        const next = yield* rec.peek(agent)
        if (Option.isNone(next)) break
        out.push(yield* rec.append(Event.toDraft(next.value)))
      }
      return out
    })
  )

/** Record a plain event (no effect attached). */
export const record = (draft: Event.Draft): Effect.Effect<Event.Envelope, RecorderError, Recorder> =>
  Effect.flatMap(Recorder, (r) => r.append(draft))

/**
 * Take something that arrives from outside the agent (a mailbox delivery, user input) if there is
 * any. Live, `take` is asked and a result is recorded as an event of `type`; replaying, the
 * agent's next recorded event decides (a `type` event is served, anything else means nothing came).
 */
export interface PollOptions<A, E = never> {
  readonly agent: string
  readonly type: string
  readonly parent?: string | null | undefined
  readonly take: Effect.Effect<Option.Option<A>, E>
  readonly toData: (a: A) => unknown
  readonly fromData: (data: unknown) => A
}

export const poll = <A, E = never>(
  options: PollOptions<A, E>
): Effect.Effect<Option.Option<{ readonly value: A; readonly event: Event.Envelope }>, E | RecorderError, Recorder> =>
  Effect.flatMap(Recorder, (rec) => pollWith(rec, options))

/** `poll` with the recorder given (no `Recorder` in context needed: for loops that run it often). */
export const pollWith = <A, E = never>(
  rec: Service,
  options: PollOptions<A, E>
): Effect.Effect<Option.Option<{ readonly value: A; readonly event: Event.Envelope }>, E | RecorderError> =>
  Effect.suspend(() => {
    const core = replayCores.get(rec)
    const next = core?.next(options.agent)
    if (core === undefined || next === undefined) return livePoll(rec, options)
    // replaying: what `livePoll` does, with the recorded event matched directly
    if (next.type !== options.type) return Effect.succeed(Option.none())
    const event = core.match(Event.toDraft(next))!
    if (isMismatch(event)) return Effect.fail(event)
    return Effect.succeed(Option.some({ value: options.fromData(next.data), event }))
  })

const livePoll = <A, E>(
  rec: Service,
  options: PollOptions<A, E>
): Effect.Effect<Option.Option<{ readonly value: A; readonly event: Event.Envelope }>, E | RecorderError> =>
  Effect.gen(function* () {
    if (yield* rec.replaying(options.agent)) {
      const next = yield* rec.peek(options.agent)
      if (Option.isSome(next) && next.value.type === options.type) {
        const event = yield* rec.append(Event.toDraft(next.value))
        return Option.some({ value: options.fromData(next.value.data), event })
      }
      return Option.none()
    }
    if (rec.mode === "replay") return Option.none()
    const got = yield* options.take
    if (Option.isNone(got)) return Option.none()
    const event = yield* rec.append({
      agent: options.agent,
      parent: options.parent ?? null,
      type: options.type,
      data: options.toData(got.value)
    })
    return Option.some({ value: got.value, event })
  })
