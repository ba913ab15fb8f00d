/**
 * The append-only, totally ordered, durable event log of one session — the source of truth.
 *
 * `append` returns only once the event is durable (for the file layer: after fsync). Concurrent
 * appends are group-committed: one backend commit serves every append that arrived while the
 * previous commit was in flight. `stream` tails the log live without missing or repeating an
 * event across the switch from stored to live events.
 *
 * @example
 * ```ts
 * import { EventLog } from "@musekit/core"
 * import { Effect, Stream } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const log = yield* EventLog.EventLog
 *   const e = yield* log.append({ agent: "main", type: "user.message", data: { text: "hi" } })
 *   const all = yield* Stream.runCollect(log.read(0))
 *   return [e.seq, all.length] // [0, 1]
 * }).pipe(Effect.provide(EventLog.layerMemory("demo")))
 * ```
 */
import { Chunk, Clock, Context, Effect, Either, Layer, PubSub, Schema, type Scope, Stream } from "effect"
import * as Event from "./Event.js"
import * as Redactor from "./Redactor.js"

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** A line in the middle of a log is damaged. Nothing was deleted; the file needs a person. */
export class LogCorrupted extends Schema.TaggedError<LogCorrupted>("@musekit/core/LogCorrupted")("LogCorrupted", {
  file: Schema.String,
  line: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `event log ${this.file} is corrupt at line ${this.line}: ${this.reason}. Nothing was deleted; move the file aside or repair that line by hand.`
  }
}

/** Another live process holds the session open for writing. */
export class SessionLocked extends Schema.TaggedError<SessionLocked>("@musekit/core/SessionLocked")("SessionLocked", {
  session: Schema.String,
  pid: Schema.Number,
  lockFile: Schema.String
}) {
  override get message() {
    return `session ${this.session} is open for writing by process ${this.pid} (lock ${this.lockFile}); close that process first`
  }
}

export class SessionNotFound extends Schema.TaggedError<SessionNotFound>("@musekit/core/SessionNotFound")(
  "SessionNotFound",
  { session: Schema.String, where: Schema.String }
) {
  override get message() {
    return `no session ${this.session} in ${this.where}`
  }
}

export class BlobNotFound extends Schema.TaggedError<BlobNotFound>("@musekit/core/BlobNotFound")("BlobNotFound", {
  hash: Schema.String
}) {
  override get message() {
    return `blob ${this.hash} is missing from the blob store`
  }
}

export class BlobCorrupted extends Schema.TaggedError<BlobCorrupted>("@musekit/core/BlobCorrupted")("BlobCorrupted", {
  hash: Schema.String,
  file: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `blob ${this.hash} (${this.file}) is damaged: ${this.reason}`
  }
}

/** The backend failed to make events durable; the log refuses further appends. */
export class LogWriteFailed extends Schema.TaggedError<LogWriteFailed>("@musekit/core/LogWriteFailed")(
  "LogWriteFailed",
  { session: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `could not write to the event log of session ${this.session}: ${this.reason}`
  }
}

export class LogClosed extends Schema.TaggedError<LogClosed>("@musekit/core/LogClosed")("LogClosed", {
  session: Schema.String
}) {
  override get message() {
    return `the event log of session ${this.session} is closed`
  }
}

export type EventLogError =
  | LogCorrupted
  | SessionLocked
  | SessionNotFound
  | BlobNotFound
  | BlobCorrupted
  | LogWriteFailed
  | LogClosed

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

export interface Service {
  readonly sessionId: string
  /** Append one event; resolves once it is durable. */
  readonly append: (draft: Event.Draft) => Effect.Effect<Event.Envelope, EventLogError>
  /** Append several events atomically ordered (consecutive seqs); resolves once all are durable. */
  readonly appendAll: (
    drafts: ReadonlyArray<Event.Draft>
  ) => Effect.Effect<ReadonlyArray<Event.Envelope>, EventLogError>
  /**
   * Append without waiting for the event to be durable. It is committed in order, with the next
   * durable append (or a `flush`, or at the latest `LAZY_COMMIT_MS` later: an agent's turn writes
   * its outcomes and its next intent with one sync); if the process dies first it may be lost, so use it only for events a crash may drop
   * (an outcome whose intent is durable), and never acknowledge it to anyone before a later
   * `append` has returned.
   */
  readonly enqueue: (draft: Event.Draft) => Effect.Effect<Event.Envelope, EventLogError>
  /** Stored events with `seq >= fromSeq`, up to the last durable event at the time of the call. */
  readonly read: (fromSeq?: number) => Stream.Stream<Event.Envelope, EventLogError>
  /** Stored events from `fromSeq`, then every new event as it becomes durable. Never ends by itself. */
  readonly stream: (fromSeq?: number) => Stream.Stream<Event.Envelope, EventLogError>
  /** Sequence number of the last durable event, -1 for an empty log. */
  readonly lastSeq: Effect.Effect<number>
  /** Whether every event handed out so far is durable (nothing `enqueue`d waits for a later append). */
  readonly settled: Effect.Effect<boolean>
  /** Wait until every event handed out so far is durable. */
  readonly flush: Effect.Effect<void, EventLogError>
  /** Wait until event `seq` is durable, without hastening its commit (see `enqueue`). */
  readonly whenDurable: (seq: number) => Effect.Effect<void, EventLogError>
  /** What the log does to text before it is stored (secrets replaced); the identity without a redactor. */
  readonly redact: (text: string) => string
  /**
   * Store a payload in the content-addressed blob store; returns the sha256 hex hash of what was
   * stored. Payloads are redacted like events (secrets replaced), unless `exact`: a payload that
   * must come back byte for byte (a file's content before a write, to restore it) is stored as it
   * is when it holds no secret, and sealed by the backend when it does (`Backend.putSealed`); its
   * hash is then that of the exact bytes.
   */
  readonly putBlob: (data: Uint8Array | string, options?: BlobOptions) => Effect.Effect<string, EventLogError>
  readonly getBlob: (hash: string) => Effect.Effect<Uint8Array, EventLogError>
  /**
   * How many batches the backend has made durable since this log was opened: each is one
   * `fdatasync` of the file log, one transaction of a database's. What a turn costs in syncs.
   */
  readonly commits: Effect.Effect<number>
}

export interface BlobOptions {
  /** The payload must come back byte for byte (see `Service.putBlob`). */
  readonly exact?: boolean | undefined
}

export class EventLog extends Context.Tag("@musekit/core/EventLog")<EventLog, Service>() {}

/** One committed record: the envelope and its canonical JSON line (no newline, no checksum). */
export interface Committed {
  readonly event: Event.Envelope
  readonly line: string
}

/** What a storage backend supplies; `make` adds seq assignment, redaction, group commit and tailing. */
export interface Backend {
  /** Seq of the last stored event when the backend was opened (-1 when empty). */
  readonly lastSeq: number
  /** Make a batch durable, in order. Called by one committer at a time. */
  readonly commit: (batch: ReadonlyArray<Committed>) => Effect.Effect<void, EventLogError>
  /** Stored events with `fromSeq <= seq <= toSeq`. */
  readonly read: (fromSeq: number, toSeq: number) => Stream.Stream<Event.Envelope, EventLogError>
  readonly putBlob: (data: Uint8Array) => Effect.Effect<string, EventLogError>
  /**
   * Store a payload that holds a secret and must come back exactly, so that the store itself shows
   * none of it (the file backend encrypts it with a key kept outside the state directory); `getBlob`
   * gives it back by the sha256 of its bytes. Without it, such payloads are stored as they are (a
   * backend that never reaches a disk, like the memory one).
   */
  readonly putSealed?: ((data: Uint8Array) => Effect.Effect<string, EventLogError>) | undefined
  readonly getBlob: (hash: string) => Effect.Effect<Uint8Array, EventLogError>
}

export interface MakeOptions {
  readonly sessionId: string
  readonly redactor?: Redactor.Redactor | undefined
  /** Largest number of events one commit carries (a larger `appendAll` is still committed whole). */
  readonly maxBatch?: number | undefined
  /** How long an `enqueue`d event waits for a durable append to share a sync with (default `LAZY_COMMIT_MS`). */
  readonly lazyCommitMs?: number | undefined
}

interface Pending {
  readonly items: ReadonlyArray<Committed>
  /** Wakes the appender: `undefined` once its events are durable, else the reason they are not. */
  readonly settle: (error: EventLogError | undefined) => void
}

const encoder = new TextEncoder()

/**
 * The longest an `enqueue`d event waits for a durable append to share a sync with, before it is
 * written on its own (milliseconds).
 */
export const LAZY_COMMIT_MS = 50

/**
 * `Event.canonicalJson` of a draft's data. Plain `JSON.stringify` gives the same text whenever it
 * succeeds (the canonical replacer only changes bigints), so it is tried first: it is several times
 * faster. Data that is not JSON at all (a function, a symbol) is refused.
 */
const dataToJson = (d: Event.Draft): string => {
  let json: string | undefined
  try {
    json = JSON.stringify(d.data === undefined ? null : d.data)
  } catch {
    json = Event.canonicalJson(d.data)
  }
  if (typeof json !== "string") throw new TypeError(`data of event ${d.type} is not JSON (${typeof d.data})`)
  return json
}

/**
 * Build the full service over a backend. The returned log lives as long as the scope; closing it
 * waits for a commit in flight, then fails appends that were not committed yet with `LogClosed`
 * (they were never acknowledged).
 */
export const make = (backend: Backend, options: MakeOptions): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function* () {
    const sessionId = options.sessionId
    const redactor = options.redactor ?? Redactor.none
    const maxBatch = Math.max(1, options.maxBatch ?? 4096)
    const lazyCommitMs = Math.max(0, options.lazyCommitMs ?? LAZY_COMMIT_MS)
    let commits = 0
    let nextSeq = backend.lastSeq + 1
    let durableSeq = backend.lastSeq
    let failure: EventLogError | undefined
    let closed = false
    // Appends waiting for the next commit, in seq order. Plain array + wake-up callback: this is the
    // hot path of every append, so it avoids a queue and a deferred per event.
    let queue: Array<Pending> = []
    let wakeCommitter: (() => void) | undefined
    // whether the queue must be written now: a durable append, a flush, closing, or the lazy timer
    // (events only enqueued wait for one of these, so that they share the next durable append's sync)
    let due = false
    let lazyTimer: ReturnType<typeof setTimeout> | undefined
    const commitNow = () => {
      if (queue.length === 0) return
      due = true
      wakeCommitter?.()
    }
    const commitSoon = () => {
      if (due) return commitNow()
      if (lazyTimer !== undefined) return
      lazyTimer = setTimeout(() => {
        lazyTimer = undefined
        commitNow()
      }, lazyCommitMs)
      lazyTimer.unref?.()
    }
    // callers of `flush`, each waiting for a seq to become durable
    let flushWaiters: Array<{ readonly seq: number; readonly done: (error: EventLogError | undefined) => void }> = []
    const wakeFlushers = () => {
      if (flushWaiters.length === 0) return
      const ready = flushWaiters.filter((w) => failure !== undefined || w.seq <= durableSeq)
      if (ready.length === 0) return
      flushWaiters = flushWaiters.filter((w) => !ready.includes(w))
      for (const w of ready) w.done(failure)
    }
    const pubsub = yield* PubSub.unbounded<ReadonlyArray<Event.Envelope>>()

    // Seqs are taken only once every draft is encoded: a draft that cannot be serialized fails its
    // append without leaving a gap in the sequence.
    const seal = (drafts: ReadonlyArray<Event.Draft>, at: number): Array<Committed> => {
      let seq = nextSeq
      const out = drafts.map((d) => {
        const dataJson = dataToJson(d)
        const redacted = redactor.redact(dataJson)
        const data = redacted === dataJson ? d.data : JSON.parse(redacted)
        const event: Event.Envelope = {
          v: Event.FORMAT_VERSION,
          seq,
          id: Event.idFor(seq),
          at,
          agent: d.agent,
          parent: d.parent ?? null,
          type: d.type,
          data
        }
        seq++
        return { event, line: Event.encodeLine(event) }
      })
      nextSeq = seq
      return out
    }

    /** The next group to commit: every queued append, up to `maxBatch` events (at least one append). */
    const takeGroup = (): Array<Pending> => {
      let events = queue[0]!.items.length
      let n = 1
      while (n < queue.length && events + queue[n]!.items.length <= maxBatch) events += queue[n++]!.items.length
      if (n === queue.length) {
        const group = queue
        queue = []
        return group
      }
      return queue.splice(0, n)
    }

    const settleAll = (group: ReadonlyArray<Pending>, error: EventLogError | undefined) => {
      for (const p of group) p.settle(error)
    }

    const commitGroup = (group: ReadonlyArray<Pending>): Effect.Effect<void> => {
      if (failure) return Effect.sync(() => settleAll(group, failure))
      const batch = group.length === 1 ? group[0]!.items : group.flatMap((p) => p.items)
      return backend.commit(batch).pipe(
        Effect.withSpan("EventLog.commit", {
          attributes: { session: sessionId, events: batch.length },
          captureStackTrace: false
        }),
        Effect.catchAllDefect((d) => Effect.fail(new LogWriteFailed({ session: sessionId, reason: String(d) }))),
        Effect.matchEffect({
          onFailure: (e) =>
            Effect.sync(() => {
              failure = e
              settleAll(group, e)
              wakeFlushers()
            }),
          onSuccess: () => {
            commits++
            durableSeq = batch[batch.length - 1]!.event.seq
            settleAll(group, undefined)
            wakeFlushers()
            return PubSub.publish(
              pubsub,
              batch.map((c) => c.event)
            )
          }
        })
      )
    }

    const waitForWork = Effect.async<void>((resume) => {
      if (queue.length > 0 && due) return resume(Effect.void)
      wakeCommitter = () => {
        wakeCommitter = undefined
        resume(Effect.void)
      }
      return Effect.sync(() => {
        wakeCommitter = undefined
      })
    })

    // A taken group is always settled: the commit is uninterruptible, so closing the scope waits for it.
    const committer = Effect.forever(
      Effect.zipRight(
        waitForWork,
        Effect.uninterruptible(
          Effect.suspend(() => {
            const group = takeGroup()
            // what is enqueued from now on waits for the next reason to write
            if (queue.length === 0) {
              due = false
              if (lazyTimer !== undefined) clearTimeout(lazyTimer)
              lazyTimer = undefined
            }
            return commitGroup(group)
          })
        )
      )
    )
    yield* Effect.forkScoped(committer)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        // let the committer write what is queued (events enqueued without waiting included)
        if (lazyTimer !== undefined) clearTimeout(lazyTimer)
        lazyTimer = undefined
        commitNow()
        const deadline = Date.now() + 10_000
        while (queue.length > 0 && !failure && Date.now() < deadline) {
          // a real timer, not the Effect clock: a test clock must not stop the log from closing
          yield* Effect.promise(() => new Promise<void>((r) => setTimeout(r, 1)))
        }
        closed = true
        const left = queue
        queue = []
        settleAll(left, new LogClosed({ session: sessionId }))
        const waiting = flushWaiters
        flushWaiters = []
        for (const w of waiting) w.done(w.seq <= durableSeq ? undefined : new LogClosed({ session: sessionId }))
      })
    )

    const appendAll = (
      drafts: ReadonlyArray<Event.Draft>
    ): Effect.Effect<ReadonlyArray<Event.Envelope>, EventLogError> => {
      if (drafts.length === 0) return Effect.succeed([])
      return Clock.currentTimeMillis.pipe(
        Effect.flatMap((at) =>
          Effect.async<ReadonlyArray<Event.Envelope>, EventLogError>((resume) => {
            if (failure) return resume(Effect.fail(failure))
            if (closed) return resume(Effect.fail(new LogClosed({ session: sessionId })))
            let items: Array<Committed>
            try {
              items = seal(drafts, at)
            } catch (e) {
              return resume(Effect.die(e))
            }
            const events = items.map((c) => c.event)
            // seq assignment and enqueueing happen in one synchronous step, so queue order = seq order
            queue.push({
              items,
              settle: (error) => resume(error === undefined ? Effect.succeed(events) : Effect.fail(error))
            })
            commitNow()
          })
        ),
        Effect.uninterruptible
      )
    }

    const enqueue = (draft: Event.Draft): Effect.Effect<Event.Envelope, EventLogError> =>
      Clock.currentTimeMillis.pipe(
        Effect.flatMap((at) =>
          Effect.suspend(() => {
            if (failure) return Effect.fail(failure)
            if (closed) return Effect.fail(new LogClosed({ session: sessionId }))
            const items = seal([draft], at)
            queue.push({ items, settle: () => {} })
            commitSoon()
            return Effect.succeed(items[0]!.event)
          })
        )
      )

    const read = (fromSeq = 0): Stream.Stream<Event.Envelope, EventLogError> =>
      Stream.suspend(() => (fromSeq > durableSeq ? Stream.empty : backend.read(Math.max(0, fromSeq), durableSeq)))

    const stream = (fromSeq = 0): Stream.Stream<Event.Envelope, EventLogError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const sub = yield* PubSub.subscribe(pubsub)
          const upTo = durableSeq
          const stored = fromSeq > upTo ? Stream.empty : backend.read(Math.max(0, fromSeq), upTo)
          const live = Stream.fromQueue(sub).pipe(
            Stream.flattenIterables,
            Stream.filter((e) => e.seq > upTo && e.seq >= fromSeq)
          )
          return Stream.concat(stored, live)
        })
      )

    return {
      sessionId,
      append: (draft) => Effect.map(appendAll([draft]), (es) => es[0]!),
      appendAll,
      enqueue,
      read,
      stream,
      lastSeq: Effect.sync(() => durableSeq),
      settled: Effect.sync(() => durableSeq === nextSeq - 1),
      commits: Effect.sync(() => commits),
      flush: Effect.async<void, EventLogError>((resume) => {
        const seq = nextSeq - 1
        if (failure) return resume(Effect.fail(failure))
        if (durableSeq >= seq) return resume(Effect.void)
        flushWaiters.push({ seq, done: (error) => resume(error ? Effect.fail(error) : Effect.void) })
        commitNow()
      }),
      whenDurable: (seq) =>
        Effect.async<void, EventLogError>((resume) => {
          if (failure) return resume(Effect.fail(failure))
          if (durableSeq >= seq) return resume(Effect.void)
          if (closed) return resume(Effect.fail(new LogClosed({ session: sessionId })))
          flushWaiters.push({ seq, done: (error) => resume(error ? Effect.fail(error) : Effect.void) })
        }),
      redact: (text) => redactor.redact(text),
      putBlob: (data, blobOptions) =>
        Effect.suspend(() => {
          const bytes = typeof data === "string" ? encoder.encode(data) : data
          const redacted = Redactor.redactBytes(redactor, bytes)
          if (redacted === bytes) return backend.putBlob(bytes)
          if (blobOptions?.exact) return (backend.putSealed ?? backend.putBlob)(bytes)
          return backend.putBlob(redacted)
        }),
      getBlob: backend.getBlob
    } satisfies Service
  })

// ---------------------------------------------------------------------------------------------
// Memory backend
// ---------------------------------------------------------------------------------------------

/** sha256 hex of bytes, via Web Crypto (no Node import). */
export const sha256Hex = (data: Uint8Array): Effect.Effect<string> =>
  Effect.promise(async () => {
    const digest = await globalThis.crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>)
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("")
  })

/** An in-memory backend; `events` may be pre-filled (e.g. to open a recorded session). */
export const memoryBackend = (
  initial: ReadonlyArray<Event.Envelope> = [],
  blobs: Map<string, Uint8Array> = new Map()
): Effect.Effect<Backend & { readonly events: ReadonlyArray<Event.Envelope> }> =>
  Effect.sync(() => {
    const store: Array<Event.Envelope> = [...initial]
    return {
      get events() {
        return store
      },
      lastSeq: initial.length - 1,
      commit: (batch) =>
        Effect.sync(() => {
          for (const c of batch) store.push(c.event)
        }),
      read: (fromSeq, toSeq) => Stream.suspend(() => Stream.fromIterable(store.slice(fromSeq, toSeq + 1))),
      putBlob: (data) =>
        Effect.map(sha256Hex(data), (hash) => {
          blobs.set(hash, data)
          return hash
        }),
      getBlob: (hash) =>
        Effect.suspend(() => {
          const b = blobs.get(hash)
          return b ? Effect.succeed(b) : Effect.fail(new BlobNotFound({ hash }))
        })
    }
  })

/** An in-memory log, for tests and for SDK users who do not need durability. */
export const layerMemory = (
  sessionId = "memory",
  options: { readonly initial?: ReadonlyArray<Event.Envelope>; readonly redactor?: Redactor.Redactor } = {}
): Layer.Layer<EventLog> =>
  Layer.scoped(
    EventLog,
    Effect.flatMap(memoryBackend(options.initial ?? []), (backend) =>
      make(backend, { sessionId, redactor: options.redactor })
    )
  )

/** Read a whole log into an array (convenience for tests and tools). */
export const readAll = (log: Service, fromSeq = 0): Effect.Effect<ReadonlyArray<Event.Envelope>, EventLogError> =>
  Effect.map(Stream.runCollect(log.read(fromSeq)), Chunk.toReadonlyArray)

// ---------------------------------------------------------------------------------------------
// Store: the set of sessions a backend holds
// ---------------------------------------------------------------------------------------------

/** A session as listed by a store, read without loading whole logs. */
export interface SessionInfo {
  readonly id: string
  readonly title: string | null
  /** `at` of the first event (ms since epoch), null for an empty log. */
  readonly started: number | null
  /** `at` of the last event, null for an empty log. */
  readonly lastEventAt: number | null
  /** Number of events (last seq + 1). */
  readonly events: number
  /** Size in bytes of the stored log. */
  readonly bytes: number
  /** The text of the first user input, where the store keeps it at hand (absent: not known). */
  readonly firstInput?: string | null | undefined
}

export interface OpenOptions {
  /** Create the session when it does not exist (default false: a missing session is `SessionNotFound`). */
  readonly create?: boolean | undefined
}

/** The first and the last event of a stored session (both absent for an empty log). */
export interface Ends {
  readonly first?: Event.Envelope | undefined
  readonly last?: Event.Envelope | undefined
}

/**
 * The folded state of a session at an idle point, as a log store keeps it beside the log (the
 * `Checkpoint` module makes, encodes and checks them; it re-exports this type).
 */
export interface Checkpoint<S = unknown> {
  readonly version: 1
  readonly session: string
  /** The last event the state includes. */
  readonly seq: number
  /** Hash of that event's canonical line: a checkpoint of another log never matches. */
  readonly check: string
  readonly state: S
}

/**
 * The sessions a backend holds: opening one for writing (one writer at a time, across processes
 * where the backend is shared), reading without opening, their blobs and their checkpoints.
 * `SessionRuntime` runs a session on any store; the file store is the default.
 */
export interface StoreService {
  /** Where the sessions are, for messages (a directory, a database without its password). */
  readonly where: string
  /**
   * Open a session for writing. While it is open nobody else can write to it: a second `open`
   * (from this process or another one) fails with `SessionLocked`.
   */
  readonly open: (sessionId: string, options?: OpenOptions) => Effect.Effect<Service, EventLogError, Scope.Scope>
  /** Every session, newest activity first. */
  readonly sessions: Effect.Effect<ReadonlyArray<SessionInfo>, EventLogError>
  readonly exists: (sessionId: string) => Effect.Effect<boolean>
  /** A session's stored events from `fromSeq` on, without opening it (a writer may be appending meanwhile). */
  readonly read: (sessionId: string, fromSeq?: number) => Effect.Effect<ReadonlyArray<Event.Envelope>, EventLogError>
  /** The first and last stored event of a session, without reading the rest. */
  readonly ends: (sessionId: string) => Effect.Effect<Ends, EventLogError>
  /** A blob of the store (the blob store every session of it shares). */
  readonly getBlob: (hash: string) => Effect.Effect<Uint8Array, EventLogError>
  /** The session's latest checkpoint, or why there is none to use (`"none"`: never written). */
  readonly readCheckpoint: (sessionId: string) => Effect.Effect<Either.Either<Checkpoint, string>>
  /** Replace the session's checkpoint (a crash leaves the old one or the new one, never a mix). */
  readonly writeCheckpoint: (checkpoint: Checkpoint) => Effect.Effect<void, EventLogError>
}

export class EventStore extends Context.Tag("@musekit/core/EventStore")<EventStore, StoreService>() {}

/** `SessionInfo` of a stored log, from its events. */
export const infoOf = (id: string, events: ReadonlyArray<Event.Envelope>): SessionInfo => {
  const first = events[0]
  const last = events[events.length - 1]
  const title = first && typeof first.data === "object" && first.data !== null ? (first.data as any).title : null
  return {
    id,
    title: typeof title === "string" ? title : null,
    started: first?.at ?? null,
    lastEventAt: last?.at ?? null,
    events: events.length,
    bytes: events.reduce((n, e) => n + Event.encodeLine(e).length + 1, 0)
  }
}

/** A store that keeps every session in memory (tests, embedding). */
export const makeMemoryStore = (options: { readonly redactor?: Redactor.Redactor | undefined } = {}): StoreService => {
  const logs = new Map<string, Array<Event.Envelope>>()
  const blobs = new Map<string, Uint8Array>()
  const checkpoints = new Map<string, string>()
  const writing = new Set<string>()
  const redactor = options.redactor ?? Redactor.none
  const stored = (sessionId: string) =>
    Effect.suspend(() => {
      const events = logs.get(sessionId)
      return events ? Effect.succeed(events) : Effect.fail(new SessionNotFound({ session: sessionId, where: "memory" }))
    })
  return {
    where: "memory",
    open: (sessionId, opts) =>
      Effect.gen(function* () {
        if (writing.has(sessionId)) {
          return yield* new SessionLocked({ session: sessionId, pid: 0, lockFile: "memory" })
        }
        const existing = logs.get(sessionId)
        if (!existing && !opts?.create) return yield* new SessionNotFound({ session: sessionId, where: "memory" })
        yield* Effect.acquireRelease(
          Effect.sync(() => writing.add(sessionId)),
          () => Effect.sync(() => writing.delete(sessionId))
        )
        const backend = yield* memoryBackend(existing ?? [], blobs)
        logs.set(sessionId, backend.events as Array<Event.Envelope>)
        return yield* make(backend, { sessionId, redactor: options.redactor })
      }),
    sessions: Effect.sync(() =>
      [...logs.entries()]
        .map(([id, events]) => infoOf(id, events))
        .sort((a, b) => (b.lastEventAt ?? 0) - (a.lastEventAt ?? 0) || (a.id < b.id ? 1 : -1))
    ),
    exists: (sessionId) => Effect.sync(() => logs.has(sessionId)),
    read: (sessionId, fromSeq = 0) => Effect.map(stored(sessionId), (events) => events.slice(Math.max(0, fromSeq))),
    ends: (sessionId) =>
      Effect.map(stored(sessionId), (events) => ({ first: events[0], last: events[events.length - 1] })),
    getBlob: (hash) =>
      Effect.suspend(() => {
        const b = blobs.get(hash)
        return b ? Effect.succeed(b) : Effect.fail(new BlobNotFound({ hash }))
      }),
    readCheckpoint: (sessionId) =>
      Effect.sync(() => {
        const text = checkpoints.get(sessionId)
        return text === undefined ? Either.left("none") : Either.right(JSON.parse(text) as Checkpoint)
      }),
    writeCheckpoint: (checkpoint) =>
      // kept as text, redacted like the log (what `Checkpoint.encode` stores)
      Effect.sync(() => void checkpoints.set(checkpoint.session, redactor.redact(JSON.stringify(checkpoint))))
  }
}

export const layerMemoryStore = (options: { readonly redactor?: Redactor.Redactor } = {}): Layer.Layer<EventStore> =>
  Layer.sync(EventStore, () => makeMemoryStore(options))

/** Open one session of the store in context as the `EventLog` of a layer. */
export const layerFromStore = (
  sessionId: string,
  options?: OpenOptions
): Layer.Layer<EventLog, EventLogError, EventStore> =>
  Layer.scoped(
    EventLog,
    Effect.flatMap(EventStore, (store) => store.open(sessionId, options))
  )
