/**
 * Rewinding a session's files to any point of its log, and the turns a person picks that point from.
 *
 * Every change a tool makes is in the log (`file.changed {callId, path, before, after}`, content
 * hashes) and the content before it is in the blob store (the `tool.started` fingerprint). So the
 * content of a file at seq `t` is the content before its first change after `t` — and a file with no
 * change after `t` is already as it was. A rewind is itself recorded: `rewind.started` names the
 * target and every file it will put back; `rewind.completed` lists each file restored (with the
 * hashes before and after, the content it replaced kept as a blob) and each one kept because someone
 * else changed it since. Its restores count as changes, so a later rewind to a point before it
 * undoes it, and a replay serves it from the log like any step.
 *
 * @example
 * ```ts
 * import { Rewind } from "@musekit/core"
 *
 * // const target = Rewind.resolve(events, "turn:2")   // before the second prompt
 * // if (target._tag === "Right") {
 * //   const plan = Rewind.plan(events, target.right)
 * //   plan.files      // [{ agent: "main", path: "src/a.ts", current: "9f…", to: "1c…" }, …]
 * //   plan.notUndone  // shell commands that ran after it: their effects stay
 * // }
 * ```
 */
import { Effect, Either } from "effect"
import type * as Event from "./Event.js"
import * as Recorder from "./Recorder.js"
import type * as Workspace from "./Workspace.js"

/** Event types a rewind records. */
export const STARTED = "rewind.started"
export const COMPLETED = "rewind.completed"

/** One turn of the session: a person's input and what the session's tools changed until the next one. */
export interface Turn {
  /** 1-based, in log order. */
  readonly n: number
  /** Seq of its `user.input`. */
  readonly seq: number
  /** The point just before it (what `turn:n` rewinds to). */
  readonly before: number
  readonly text: string
  readonly files: ReadonlyArray<{ readonly agent: string; readonly path: string }>
}

/** Where a rewind (or a fork) goes. */
export interface Target {
  /** Files are put back to their content after this event. */
  readonly seq: number
  /** The idle point (just before a person's input) at or before `seq`: the conversation goes on from here. */
  readonly boundary: number
  /** The turn whose input comes right after `boundary` (1-based), or the number of turns + 1 at the end. */
  readonly turn: number
}

/** One file a rewind puts back. Hashes are sha256 hex; `null` is "no file". */
export interface FilePlan {
  readonly agent: string
  readonly path: string
  /** Its content as the log last left it. */
  readonly current: string | null
  /** Its content at the target. */
  readonly to: string | null
}

/** A side effect after the target that no rewind can take back. */
export interface NotUndone {
  readonly seq: number
  readonly agent: string
  readonly tool: string
  readonly summary: string
}

export interface Plan {
  readonly target: Target
  readonly files: ReadonlyArray<FilePlan>
  readonly notUndone: ReadonlyArray<NotUndone>
}

/** A change to a file as the log knows it: a tool's, or a rewind's restore. */
interface Change {
  readonly seq: number
  readonly agent: string
  readonly path: string
  readonly before: string | null
  readonly after: string | null
}

const isRewindInput = (text: string) => /^\/rewind(\s|$)/.test(text.trim())

/** The `user.input` events a person typed (rewinds themselves are not turns). */
const inputs = (events: ReadonlyArray<Event.Envelope>) =>
  events.filter(
    (e) =>
      e.agent === "main" &&
      e.type === "user.input" &&
      typeof (e.data as { text?: unknown })?.text === "string" &&
      !isRewindInput((e.data as { text: string }).text)
  )

const changesOf = (events: ReadonlyArray<Event.Envelope>): Array<Change> => {
  const out: Array<Change> = []
  for (const e of events) {
    const d = e.data as any
    if (e.type === "file.changed" && d && typeof d.path === "string") {
      out.push({ seq: e.seq, agent: e.agent, path: d.path, before: d.before ?? null, after: d.after ?? null })
    } else if (e.type === COMPLETED && d && Array.isArray(d.restored)) {
      for (const r of d.restored) {
        if (r && typeof r.path === "string" && typeof r.agent === "string") {
          out.push({ seq: e.seq, agent: r.agent, path: r.path, before: r.before ?? null, after: r.after ?? null })
        }
      }
    }
  }
  return out
}

/** The turns of a session, with the files each changed. */
export const turns = (events: ReadonlyArray<Event.Envelope>): ReadonlyArray<Turn> => {
  const ins = inputs(events)
  const changes = changesOf(events)
  return ins.map((e, i) => {
    const end = ins[i + 1]?.seq ?? Number.POSITIVE_INFINITY
    const seen = new Set<string>()
    const files: Array<{ agent: string; path: string }> = []
    for (const c of changes) {
      if (c.seq <= e.seq || c.seq >= end) continue
      const key = `${c.agent}\0${c.path}`
      if (seen.has(key)) continue
      seen.add(key)
      files.push({ agent: c.agent, path: c.path })
    }
    return { n: i + 1, seq: e.seq, before: e.seq - 1, text: (e.data as { text: string }).text, files }
  })
}

/**
 * Read a target: a seq (`42`), a turn (`turn:3` or `t3`: just before its input), `last` (just
 * before the latest turn), or `undo` (just before the latest rewind, which takes it back).
 */
export const resolve = (events: ReadonlyArray<Event.Envelope>, spec: string): Either.Either<Target, string> => {
  const all = inputs(events)
  const last = events.length > 0 ? events[events.length - 1]!.seq : -1
  const idle = events
    .filter((e) => e.agent === "main" && e.type === "user.input")
    .map((e) => e.seq - 1)
    .concat(last >= 0 ? [last] : [])
  const s = spec.trim()
  let seq: number
  if (s === "last") {
    const t = all[all.length - 1]
    if (!t) return Either.left("the session has no turns to rewind")
    seq = t.seq - 1
  } else if (s === "undo") {
    const r = [...events].reverse().find((e) => e.type === COMPLETED)
    if (!r) return Either.left("the session has no rewind to undo")
    const input = [...events].reverse().find((e) => e.seq < r.seq && e.agent === "main" && e.type === "user.input")
    seq = input ? input.seq - 1 : r.seq - 2
  } else {
    const turn = /^(?:turn:|t)(\d+)$/.exec(s)
    if (turn) {
      const n = Number(turn[1])
      const t = all[n - 1]
      if (!t || n < 1) return Either.left(`there is no turn ${n} (the session has ${all.length})`)
      seq = t.seq - 1
    } else if (/^\d+$/.test(s)) {
      seq = Number(s)
      if (seq > last) return Either.left(`seq ${seq} is past the end of the session (its last event is seq ${last})`)
    } else {
      return Either.left(
        `cannot read ${JSON.stringify(spec)} as a point of the session: give a seq, turn:<n>, last or undo`
      )
    }
  }
  const boundary = idle.filter((b) => b <= seq).reduce((a, b) => Math.max(a, b), -1)
  if (boundary < 0) {
    return Either.left(`seq ${seq} is before the session's first input (seq ${(idle[0] ?? 0) + 1})`)
  }
  const turn = all.filter((e) => e.seq - 1 < boundary).length + 1
  return Either.right({ seq, boundary, turn })
}

/** What putting the session's files back to `target` means, from the log alone. */
export const plan = (events: ReadonlyArray<Event.Envelope>, target: Target): Plan => {
  const changes = changesOf(events)
  const byFile = new Map<string, { agent: string; path: string; first?: Change; last?: Change }>()
  for (const c of changes) {
    if (c.seq <= target.seq) continue
    const key = `${c.agent}\0${c.path}`
    let f = byFile.get(key)
    if (!f) byFile.set(key, (f = { agent: c.agent, path: c.path }))
    if (!f.first) f.first = c
    f.last = c
  }
  const files: Array<FilePlan> = []
  for (const f of byFile.values()) {
    const to = f.first!.before
    const current = f.last!.after
    if (to !== current) files.push({ agent: f.agent, path: f.path, current, to })
  }
  // tool calls whose effects the log does not hold as file contents
  const failed = new Set<string>()
  const tracked = new Set<string>()
  for (const e of events) {
    const d = e.data as any
    if (e.type === "tool.completed" && d?.isFailure === true) failed.add(`${e.agent}\0${d.callId}`)
    if (e.type === "file.changed") tracked.add(`${e.agent}\0${d?.callId}`)
  }
  const notUndone: Array<NotUndone> = []
  for (const e of events) {
    if (e.seq <= target.seq || e.type !== "tool.started") continue
    const d = e.data as any
    const key = `${e.agent}\0${d?.callId}`
    if (d?.effect === "read" || failed.has(key) || tracked.has(key)) continue
    notUndone.push({ seq: e.seq, agent: e.agent, tool: String(d?.tool), summary: String(d?.summary ?? "") })
  }
  return { target, files, notUndone }
}

/** The intent a rewind records (what replay compares). */
export const intentData = (p: Plan, force: boolean) => ({
  to: p.target.seq,
  boundary: p.target.boundary,
  turn: p.target.turn,
  force,
  files: p.files.map((f) => ({ agent: f.agent, path: f.path, current: f.current, to: f.to })),
  notUndone: p.notUndone
})

/** What a rewind did. */
export interface Result {
  readonly restored: ReadonlyArray<{
    readonly agent: string
    readonly path: string
    readonly before: string | null
    readonly after: string | null
  }>
  /** Files someone else changed since the log last saw them, left as they are. */
  readonly kept: ReadonlyArray<{ readonly agent: string; readonly path: string; readonly found: string | null }>
  /** Files that could not be put back (content unknown, a workspace gone, a write refused). */
  readonly failed: ReadonlyArray<{ readonly agent: string; readonly path: string; readonly reason: string }>
}

/** Files of a plan whose content on disk is not what the log last left (someone else changed them). */
export const changedSince = (
  p: Plan,
  workspaceFor: (agent: string) => Effect.Effect<Workspace.Service | undefined>
): Effect.Effect<ReadonlyArray<FilePlan & { readonly found: string | null }>> =>
  Effect.gen(function* () {
    const out: Array<FilePlan & { found: string | null }> = []
    for (const f of p.files) {
      const ws = yield* workspaceFor(f.agent)
      if (!ws) continue
      const found = (yield* ws.fingerprint([f.path]))[f.path] ?? null
      if (found !== f.current && found !== f.to) out.push({ ...f, found })
    }
    return out
  })

export interface ApplyOptions {
  readonly plan: Plan
  /** The workspace each agent's paths are relative to (`undefined`: gone). */
  readonly workspaceFor: (agent: string) => Effect.Effect<Workspace.Service | undefined>
  /** Overwrite files someone else changed since (default: keep them). */
  readonly force?: boolean | undefined
  /** Who records it (default `main`). */
  readonly agent?: string | undefined
}

/**
 * Put the files back, as a recorded step (`rewind.started` durable first, then the writes, then
 * `rewind.completed`). Replaying, the outcome comes from the log and no file is touched.
 */
export const apply = (options: ApplyOptions): Effect.Effect<Result, Recorder.RecorderError, Recorder.Recorder> =>
  Effect.gen(function* () {
    const rec = yield* Recorder.Recorder
    const force = options.force === true
    const run = Effect.gen(function* () {
      const restored: Array<Result["restored"][number]> = []
      const kept: Array<Result["kept"][number]> = []
      const failed: Array<Result["failed"][number]> = []
      for (const f of options.plan.files) {
        const ws = yield* options.workspaceFor(f.agent)
        if (!ws) {
          failed.push({ agent: f.agent, path: f.path, reason: `the workspace of ${f.agent} is gone` })
          continue
        }
        const bytes = yield* Effect.orElseSucceed(ws.read(f.path), () => null)
        // keep what is there now in the blob store, so that this rewind can be undone
        const found = bytes === null ? null : yield* Effect.orElseSucceed(rec.putBlob(bytes), () => "unknown")
        if (found === f.to) {
          restored.push({ agent: f.agent, path: f.path, before: found, after: f.to })
          continue
        }
        if (found !== f.current && !force) {
          kept.push({ agent: f.agent, path: f.path, found })
          continue
        }
        const content = f.to === null ? null : yield* Effect.option(rec.getBlob(f.to))
        if (content !== null && content._tag === "None") {
          failed.push({ agent: f.agent, path: f.path, reason: "its content at that point is not in the blob store" })
          continue
        }
        const ok = yield* Effect.orElseSucceed(ws.restore(f.path, content === null ? null : content.value), () => false)
        if (ok) restored.push({ agent: f.agent, path: f.path, before: found, after: f.to })
        else failed.push({ agent: f.agent, path: f.path, reason: "it could not be written" })
      }
      const r: Result = { restored, kept, failed }
      return r
    })
    const { value } = yield* Recorder.stepWith<Result, never, never>(rec, {
      agent: options.agent ?? "main",
      intent: { type: STARTED, data: intentData(options.plan, force) },
      // a rewind cut short is run again: files already put back are found at their target
      run: () => run,
      outcome: (r) => ({ type: COMPLETED, data: r }),
      outcomeTypes: [COMPLETED],
      fromOutcome: (e) => e.data as Result
    })
    return value
  })

/** `/rewind <target> [--force]`: the target and whether to overwrite, or `undefined` when `text` is no rewind. */
export const parseInput = (text: string): { readonly spec: string; readonly force: boolean } | undefined => {
  const m = /^\/rewind(?:\s+(.*))?$/s.exec(text.trim())
  if (!m) return undefined
  const words = (m[1] ?? "").split(/\s+/).filter((w) => w !== "")
  const force = words.includes("--force")
  const rest = words.filter((w) => w !== "--force")
  return { spec: rest.join(" ") || "last", force }
}

/** A one-line account of a rewind, for people. */
export const describe = (p: Plan, r: Result): ReadonlyArray<string> => {
  const lines: Array<string> = []
  lines.push(
    `rewound to seq ${p.target.seq} (before turn ${p.target.turn}): ${r.restored.length} file${r.restored.length === 1 ? "" : "s"} restored`
  )
  for (const f of r.restored) lines.push(`  restored ${f.agent === "main" ? "" : `${f.agent}:`}${f.path}`)
  for (const f of r.kept) {
    lines.push(`  kept ${f.agent === "main" ? "" : `${f.agent}:`}${f.path} (changed since by someone else)`)
  }
  for (const f of r.failed)
    lines.push(`  not restored ${f.agent === "main" ? "" : `${f.agent}:`}${f.path}: ${f.reason}`)
  if (p.notUndone.length > 0) {
    lines.push(`not undone (their effects stay): ${p.notUndone.length} command${p.notUndone.length === 1 ? "" : "s"}`)
    for (const n of p.notUndone) lines.push(`  seq ${n.seq} ${n.agent} ${n.tool}: ${n.summary}`)
  }
  return lines
}
