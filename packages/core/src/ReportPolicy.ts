/**
 * How crew reports reach the main agent, so that it is neither starved nor flooded.
 *
 * The default policy delivers `blocking` reports at the next boundary (before the main agent's
 * next model call, even in the middle of a task), `notable` ones at the next boundary too but at
 * most once every `notableEvery` boundaries, and folds `info` reports into a digest that is sent
 * when `digestSize` of them have piled up or together with any other delivery. Everything due at
 * one boundary arrives as one message. The policy is a layer: swap it to change the behaviour.
 *
 * @example
 * ```ts
 * import { ReportPolicy } from "@musekit/core"
 *
 * const quiet = ReportPolicy.layer({ digestSize: 50, notableEvery: 3 })
 * ```
 */
import { Context, Effect, Layer, Option } from "effect"
import type { InboxMessage } from "./Contract.js"

export type Importance = "info" | "notable" | "blocking"

export interface Report {
  /** Stable id (the recording event's id), so a resumed session does not deliver it twice. */
  readonly id: string
  readonly from: string
  readonly importance: Importance
  readonly text: string
}

export interface Service {
  readonly offer: (report: Report) => Effect.Effect<void>
  /** At a boundary of the main agent (before its next model call): what is due now, as one message. */
  readonly take: Effect.Effect<Option.Option<InboxMessage>>
  /** What is due now, without counting a boundary (for a waiting main agent, woken by the crew). */
  readonly due: Effect.Effect<Option.Option<InboxMessage>>
  /** Everything pending, due or not (when the main agent is idle). */
  readonly flush: Effect.Effect<Option.Option<InboxMessage>>
  readonly pending: Effect.Effect<number>
  /** Forget reports that were delivered (replayed deliveries after a resume). */
  readonly delivered: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** The policy's state as JSON data, for checkpoints. A policy without it turns checkpoints off. */
  readonly checkpoint?:
    | {
        readonly save: Effect.Effect<unknown>
        readonly restore: (state: unknown) => Effect.Effect<void>
      }
    | undefined
}

export class ReportPolicy extends Context.Tag("@musekit/core/ReportPolicy")<ReportPolicy, Service>() {}

export interface Options {
  /** Info reports folded into one digest before it is sent on its own (default 20). */
  readonly digestSize?: number | undefined
  /** Deliver notable reports at most once every N boundaries (default 1: every boundary). */
  readonly notableEvery?: number | undefined
  /** Lines of info shown in a digest; the rest are counted (default 10). */
  readonly digestLines?: number | undefined
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s)

export const make = (options: Options = {}): Service => {
  const digestSize = options.digestSize ?? 20
  const notableEvery = options.notableEvery ?? 1
  const digestLines = options.digestLines ?? 10
  const queue: Array<Report> = []
  const done = new Set<string>()
  let boundary = 0
  let lastNotable = Number.NEGATIVE_INFINITY

  const compose = (reports: ReadonlyArray<Report>): InboxMessage => {
    const lines: Array<string> = []
    for (const r of reports.filter((r) => r.importance === "blocking")) lines.push(`[blocking] ${r.from}: ${r.text}`)
    for (const r of reports.filter((r) => r.importance === "notable")) lines.push(`[notable] ${r.from}: ${r.text}`)
    const infos = reports.filter((r) => r.importance === "info")
    if (infos.length > 0) {
      const shown = infos.slice(-digestLines)
      lines.push(`Digest of ${infos.length} info report${infos.length === 1 ? "" : "s"}:`)
      if (infos.length > shown.length) lines.push(`  (${infos.length - shown.length} older ones not shown)`)
      for (const r of shown) lines.push(`  - ${r.from}: ${clip(r.text, 200)}`)
    }
    return {
      id: reports[0]!.id,
      from: "crew",
      text: `Crew reports:\n${lines.join("\n")}`,
      ids: reports.map((r) => r.id)
    }
  }

  const takeWhere = (pred: (r: Report) => boolean) => {
    const out = queue.filter(pred)
    for (const r of out) {
      queue.splice(queue.indexOf(r), 1)
      done.add(r.id)
    }
    return out
  }

  const takeDue = (): Option.Option<InboxMessage> => {
    const blocking = queue.some((r) => r.importance === "blocking")
    const notableDue = queue.some((r) => r.importance === "notable") && boundary - lastNotable >= notableEvery
    const infos = queue.filter((r) => r.importance === "info").length
    if (!blocking && !notableDue && infos < digestSize) return Option.none()
    if (notableDue) lastNotable = boundary
    const taken = takeWhere((r) => r.importance === "blocking" || notableDue || r.importance === "info")
    return taken.length > 0 ? Option.some(compose(taken)) : Option.none()
  }

  return {
    offer: (report) =>
      Effect.sync(() => {
        if (!done.has(report.id) && !queue.some((r) => r.id === report.id)) queue.push(report)
      }),
    take: Effect.sync(() => {
      boundary++
      return takeDue()
    }),
    due: Effect.sync(() => takeDue()),
    flush: Effect.sync(() => {
      const taken = takeWhere(() => true)
      return taken.length > 0 ? Option.some(compose(taken)) : Option.none()
    }),
    pending: Effect.sync(() => queue.length),
    delivered: (ids) =>
      Effect.sync(() => {
        for (const id of ids) {
          done.add(id)
          const i = queue.findIndex((r) => r.id === id)
          if (i >= 0) queue.splice(i, 1)
        }
      }),
    // The boundary count and the last notable delivery are not kept: replayed deliveries do not
    // count boundaries, so a session resumed from its whole log starts them afresh too.
    checkpoint: {
      save: Effect.sync(() => ({ queue: [...queue], done: [...done] })),
      restore: (state) =>
        Effect.sync(() => {
          const st = state as { queue: Array<Report>; done: Array<string> }
          queue.splice(0, queue.length, ...st.queue)
          done.clear()
          for (const id of st.done) done.add(id)
          boundary = 0
          lastNotable = Number.NEGATIVE_INFINITY
        })
    }
  }
}

export const layer = (options: Options = {}): Layer.Layer<ReportPolicy> => Layer.sync(ReportPolicy, () => make(options))
