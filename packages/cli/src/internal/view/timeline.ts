/**
 * A session's log folded into what the timeline page draws: one lane per agent, a mark per model
 * call, tool call, approval wait, turn, crew task, report, delivery, review, merge, compaction,
 * rewind, interruption and resume, the links between a member's report and its delivery to the
 * main agent, and the usage series (tokens, cost, context size). The fold is incremental: `add`
 * takes events in log order, and `changes` hands out what moved since the last call (how the page
 * served by `muse view --serve` is kept live).
 *
 * Every text a mark carries (labels, file names) is made visible with `escapeUnsafe` (a control or
 * bidi character shows as its escape); the page puts it in with `textContent` only.
 *
 * @example
 * ```ts
 * const t = new Timeline()
 * for (const e of events) t.add(e)
 * t.marks.length // one per call, wait, report, …
 * ```
 */
import type { Event } from "@musekit/core"
import { escapeUnsafe, plain } from "../ansi.js"
import * as ModelInfo from "../modelInfo.js"

/** What a mark is. The order is the page's: the index is what the page carries. */
export const KINDS = [
  "turn",
  "task",
  "model",
  "tool",
  "approval",
  "input",
  "report",
  "delivery",
  "review",
  "verdict",
  "merge",
  "compaction",
  "rewind",
  "interrupt",
  "resume",
  "failure",
  "spawn",
  "plan",
  "fork"
] as const
export type Kind = (typeof KINDS)[number]

export const STATUSES = ["ok", "failed", "denied", "interrupted", "open"] as const
export type Status = (typeof STATUSES)[number]

export interface Lane {
  readonly name: string
  /** `main`, a crew role (`worker`, `reviewer`, …) or `helper`. */
  role: string
}

export interface Mark {
  /** The seq of the event that opened it. */
  readonly id: number
  readonly lane: number
  readonly kind: Kind
  /** Milliseconds since the session's first event. */
  readonly start: number
  /** `null` while it is in flight. */
  end: number | null
  status: Status
  /** One line, escaped, at most 200 characters. */
  label: string
  /** Files it touched or named, escaped. */
  files: Array<string>
  /** The mark it leads to (a report's delivery, a delegation's task). */
  link: number | null
  /** The events it was made from (intent first), for its details. */
  readonly events: Array<Event.Envelope>
}

/** One model response's usage. */
export interface UsagePoint {
  readonly t: number
  readonly lane: number
  readonly input: number
  readonly output: number
  readonly cached: number
  /** US dollars; `null` when the model's price is not known. */
  readonly cost: number | null
}

export interface Meta {
  session: string
  title: string
  model: string
  root: string
  /** Epoch milliseconds of the first event. */
  t0: number
  /** Milliseconds since t0 of the last event. */
  last: number
  events: number
  lastSeq: number
  fork: { readonly session: string; readonly seq: number } | null
}

const LABEL_MAX = 200

/** One line of recorded text, escaped and cut. */
export const line = (v: unknown, max = LABEL_MAX): string => {
  const s = typeof v === "string" ? v : v === undefined || v === null ? "" : (JSON.stringify(v) ?? "")
  const one = s.replace(/\s+/g, " ").trim()
  const cut = one.length > max ? `${one.slice(0, max - 1)}…` : one
  return escapeUnsafe(cut, plain)
}

const obj = (u: unknown): Record<string, any> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? (u as Record<string, any>) : {}

const HELPERS = /\/|^(planner|grill|worktree|compactor)$/

export class Timeline {
  readonly lanes: Array<Lane> = []
  readonly marks: Array<Mark> = []
  readonly usage: Array<UsagePoint> = []
  readonly meta: Meta = {
    session: "",
    title: "",
    model: "",
    root: "",
    t0: 0,
    last: 0,
    events: 0,
    lastSeq: -1,
    fork: null
  }
  private readonly laneOf = new Map<string, number>()
  /** Open marks by key (`<agent> <kind> <callId|seq>`). */
  private readonly open = new Map<string, Mark>()
  private readonly byId = new Map<number, Mark>()
  /** `<agent>:<callId>` of a report → its mark; `<agent>:done:<taskId>` → the task's mark. */
  private readonly deliverable = new Map<string, Mark>()
  /** `<agent>:<callId>` of a delegation → its mark. */
  private readonly delegations = new Map<string, Mark>()
  private readonly toolByCall = new Map<string, Mark>()
  /** The kind of the task each member is on (a review ends with `crew.review.done`, a message with the turn). */
  private readonly taskKind = new Map<string, string>()
  private changed = new Set<Mark>()
  private usageSent = 0
  private lanesSent = 0

  constructor(session = "") {
    this.meta.session = session
  }

  private lane(agent: string): number {
    const known = this.laneOf.get(agent)
    if (known !== undefined) return known
    const role = agent === "main" ? "main" : HELPERS.test(agent) ? "helper" : agent.replace(/-\d+$/, "")
    this.lanes.push({ name: escapeUnsafe(agent, plain), role: escapeUnsafe(role, plain) })
    this.laneOf.set(agent, this.lanes.length - 1)
    return this.lanes.length - 1
  }

  private mark(e: Event.Envelope, kind: Kind, label: string, options: { open?: boolean; status?: Status } = {}) {
    const m: Mark = {
      id: e.seq,
      lane: this.lane(e.agent),
      kind,
      start: e.at - this.meta.t0,
      end: options.open ? null : e.at - this.meta.t0,
      status: options.status ?? (options.open ? "open" : "ok"),
      label: line(label),
      files: [],
      link: null,
      events: [e]
    }
    this.marks.push(m)
    this.byId.set(m.id, m)
    this.changed.add(m)
    return m
  }

  private close(key: string, e: Event.Envelope, status: Status = "ok"): Mark | undefined {
    const m = this.open.get(key)
    if (!m) return undefined
    this.open.delete(key)
    m.end = Math.max(m.start, e.at - this.meta.t0)
    m.status = status
    m.events.push(e)
    this.changed.add(m)
    return m
  }

  /** End what is open under `key` as interrupted, where a new one of its kind starts (it will get no outcome). */
  private abandon(key: string, e: Event.Envelope) {
    const m = this.open.get(key)
    if (!m) return
    this.open.delete(key)
    m.end = Math.max(m.start, e.at - this.meta.t0)
    m.status = "interrupted"
    this.changed.add(m)
  }

  /** End the task a member is on (one that has no `crew.task.done` of its own). */
  private endTask(agent: string, e: Event.Envelope, status: Status) {
    const m = this.open.get(`${agent} task`)
    this.taskKind.delete(agent)
    if (!m) return
    this.open.delete(`${agent} task`)
    for (const [k, v] of this.open) if (v === m) this.open.delete(k)
    m.end = Math.max(m.start, e.at - this.meta.t0)
    m.status = status
    m.events.push(e)
    this.changed.add(m)
  }

  private touch(m: Mark, e: Event.Envelope) {
    m.events.push(e)
    this.changed.add(m)
  }

  private forkMark(e: Event.Envelope) {
    const f = this.meta.fork!
    this.mark(e, "fork", `forked from ${f.session} here (seq ${f.seq}): what follows is this session's own`)
  }

  /** Take one event (in log order). */
  add(e: Event.Envelope): void {
    if (this.meta.events === 0) this.meta.t0 = e.at
    this.meta.events++
    this.meta.lastSeq = e.seq
    this.meta.last = Math.max(this.meta.last, e.at - this.meta.t0)
    const d = obj(e.data)
    const a = e.agent
    // a fork's log is its parent's up to `fork.seq`: what follows that event is the fork's own
    if (this.meta.fork && e.seq === this.meta.fork.seq) this.forkMark(e)
    switch (e.type) {
      case "session.started": {
        const c = obj(d.config)
        this.meta.title = line(d.title ?? c.title ?? "", 300)
        this.meta.model = line(c.model ?? "")
        this.meta.root = line(c.root ?? "", 500)
        const fork = obj(c.fork)
        if (typeof fork.session === "string" && typeof fork.seq === "number") {
          this.meta.fork = { session: line(fork.session), seq: fork.seq }
          if (fork.seq === e.seq) this.forkMark(e)
        }
        this.lane(a)
        return
      }
      case "user.input": {
        this.mark(e, "input", String(d.text ?? d.preview ?? ""))
        return
      }
      case "user.message": {
        // a turn of this agent begins (a task, crew reports, a review request)
        this.abandon(`${a} turn`, e)
        const m = this.mark(e, "turn", String(d.text ?? ""), { open: true })
        this.open.set(`${a} turn`, m)
        return
      }
      case "turn.completed": {
        const status: Status = d.status === "completed" || d.status === "budget" ? "ok" : "failed"
        this.close(`${a} turn`, e, status)
        if (this.taskKind.get(a) === "message") this.endTask(a, e, status)
        return
      }
      case "turn.interrupted": {
        this.close(`${a} turn`, e, "interrupted")
        if (this.taskKind.get(a) === "message") this.endTask(a, e, "interrupted")
        this.mark(e, "interrupt", `interrupted${d.reason ? `: ${d.reason}` : ""}`, { status: "interrupted" })
        return
      }
      case "turn.resumed": {
        this.mark(e, "resume", `resumed: ${d.reason ?? "the session was resumed"}`)
        // the turn goes on from here
        this.abandon(`${a} turn`, e)
        this.open.set(`${a} turn`, this.mark(e, "turn", "the interrupted turn, resumed", { open: true }))
        return
      }
      case "model.requested": {
        // a request sent again after a restart: the one before it never got an answer
        this.abandon(`${a} model`, e)
        const m = this.mark(e, "model", String(d.model ?? "model"), { open: true })
        this.open.set(`${a} model`, m)
        return
      }
      case "model.responded": {
        const m = this.close(`${a} model`, e)
        const u = obj(d.usage)
        const calls = Array.isArray(d.toolCalls) ? d.toolCalls.map((c: any) => String(c?.name ?? "")).join(", ") : ""
        const text = typeof d.text === "string" ? d.text : ""
        if (m) m.label = line(`${d.model ?? ""}${calls ? ` → ${calls}` : ""}${text ? ` · ${text}` : ""}`)
        const model = String(d.model ?? "")
        this.usage.push({
          t: e.at - this.meta.t0,
          lane: this.lane(a),
          input: Number(u.inputTokens ?? 0) || 0,
          output: Number(u.outputTokens ?? 0) || 0,
          cached: Number(u.cachedInputTokens ?? 0) || 0,
          cost: ModelInfo.cost(model, u) ?? null
        })
        return
      }
      case "model.failed": {
        const m = this.close(`${a} model`, e, "failed")
        if (m) m.label = line(`model error: ${d.error ?? ""}`)
        return
      }
      case "approval.requested": {
        const m = this.mark(e, "approval", `approve? ${d.tool ?? ""} ${d.summary ?? ""}`, { open: true })
        this.open.set(`${a} approval ${d.callId ?? e.seq}`, m)
        return
      }
      case "approval.answered": {
        const key = `${a} approval ${d.callId ?? ""}`
        const m = this.close(key, e, d.allow ? "ok" : "denied")
        if (m)
          m.label = line(
            `${d.allow ? "allowed" : "denied"} (${d.scope ?? "once"}) · ${m.label.replace(/^approve\? /, "")}`
          )
        return
      }
      case "approval.decided": {
        if (!d.allow && d.by !== "user") {
          this.mark(
            e,
            "approval",
            `denied by ${d.by === "rule" ? `rule ${d.rule ?? ""}` : `mode ${d.mode ?? ""}`}: ${d.tool ?? ""} ${d.summary ?? ""}`,
            {
              status: "denied"
            }
          )
        }
        return
      }
      case "tool.started": {
        const tool = String(d.tool ?? "")
        const summary = typeof d.summary === "string" ? d.summary : tool
        const kind: Kind =
          tool === "report" ? "report" : tool === "verdict" ? "verdict" : tool === "worktree_merge" ? "merge" : "tool"
        const label = tool === "run_shell" ? `$ ${summary}` : summary.startsWith(tool) ? summary : `${tool} ${summary}`
        const m = this.mark(e, kind, label, { open: true })
        const p = obj(d.params)
        if (typeof p.path === "string") m.files.push(line(p.path, 500))
        for (const f of Object.keys(obj(obj(d.observed).fingerprint)))
          if (!m.files.includes(line(f, 500))) m.files.push(line(f, 500))
        const call = String(d.callId ?? e.seq)
        this.open.set(`${a} tool ${call}`, m)
        this.toolByCall.set(`${a}:${call}`, m)
        if (tool === "report") this.deliverable.set(`${a}:${call}`, m)
        if (tool === "delegate" || tool === "message") this.delegations.set(`${a}:${call}`, m)
        return
      }
      case "tool.completed": {
        const call = String(d.callId ?? "")
        const r = obj(d.result)
        const failed = d.isFailure === true
        const m = this.close(`${a} tool ${call}`, e, failed ? "failed" : "ok")
        if (!m) return
        if (typeof r.path === "string" && !m.files.includes(line(r.path, 500))) m.files.push(line(r.path, 500))
        if (m.kind === "merge" && !failed) {
          const commit = typeof r.commit === "string" ? ` (${r.commit.slice(0, 10)})` : ""
          m.label = line(
            `merged ${r.agent ?? ""} into ${r.into ?? "main"}${commit}${r._tag && r._tag !== "Merged" ? ` · ${r._tag}` : ""}`
          )
        } else if (m.kind === "merge" && failed) {
          m.label = line(`merge failed: ${m.label}`)
        }
        if (typeof r.exit_code === "number" && r.exit_code !== 0) m.status = "failed"
        if (typeof d.settled === "string") {
          const s = this.mark(e, "resume", `${d.settled} after a restart: ${m.label}`, {
            status: d.settled === "interrupted" ? "interrupted" : "ok"
          })
          s.link = m.id
          if (d.settled === "interrupted") m.status = "interrupted"
        }
        return
      }
      case "tool.rejected": {
        const call = String(d.callId ?? "")
        const m = this.close(`${a} tool ${call}`, e, "failed")
        if (!m) this.mark(e, "tool", `rejected ${d.tool ?? ""}: ${d.reason ?? ""}`, { status: "failed" })
        return
      }
      case "file.changed": {
        const m = this.toolByCall.get(`${a}:${d.callId ?? ""}`)
        if (m) {
          const p = line(d.path ?? "", 500)
          if (p && !m.files.includes(p)) m.files.push(p)
          this.touch(m, e)
        }
        return
      }
      case "crew.spawned": {
        const l = this.lane(a)
        if (typeof d.role === "string") this.lanes[l]!.role = line(d.role, 40)
        this.mark(e, "spawn", `${a} joined the crew (${d.role ?? "?"})`)
        return
      }
      case "crew.task.received": {
        if (d.kind === "stop" || d.kind === "fail") {
          this.mark(e, d.kind === "fail" ? "failure" : "interrupt", `${d.kind}: ${d.text ?? ""}`, {
            status: d.kind === "fail" ? "failed" : "interrupted"
          })
          return
        }
        this.taskKind.set(a, String(d.kind ?? "task"))
        const m = this.mark(e, "task", `${d.kind ?? "task"} from ${d.from ?? "?"}: ${d.text ?? ""}`, { open: true })
        this.open.set(`${a} task ${d.id ?? ""}`, m)
        this.open.set(`${a} task`, m)
        // the delegation that sent it: `<from>:<callId>`
        const from = typeof d.id === "string" ? this.delegations.get(d.id) : undefined
        if (from) from.link = m.id
        if (typeof d.id === "string") this.deliverable.set(`${a}:done:${d.id}`, m)
        return
      }
      case "crew.task.done": {
        const m = this.close(`${a} task ${d.taskId ?? ""}`, e, d.status === "completed" ? "ok" : "failed")
        if (m && this.open.get(`${a} task`) === m) this.open.delete(`${a} task`)
        if (m) {
          const review = obj(d.review)
          m.label = line(`${m.label}${review.verdict ? ` · review: ${review.verdict}` : ""}`)
        }
        return
      }
      case "crew.review.requested": {
        this.mark(e, "review", `asks ${d.reviewer ?? "a reviewer"} for a review (round ${d.round ?? 1})`)
        return
      }
      case "crew.verdict.received": {
        const verdict = obj(d.data).verdict
        this.mark(e, "review", `verdict ${verdict ?? "?"} from ${d.from ?? "?"}: ${d.text ?? ""}`, {
          status: verdict === "approve" ? "ok" : "failed"
        })
        return
      }
      case "crew.review.done":
        this.endTask(a, e, "ok")
        return
      case "crew.member.failed": {
        this.mark(e, "failure", `failed: ${d.error ?? ""}`, { status: "failed" })
        return
      }
      case "crew.stopped": {
        this.mark(e, "interrupt", `${a} stopped`, { status: "interrupted" })
        return
      }
      case "crew.reports":
      case "inbox.delivered": {
        const m = this.mark(e, "delivery", String(d.text ?? ""))
        const ids: Array<unknown> = Array.isArray(d.ids) ? d.ids : typeof d.id === "string" ? [d.id] : []
        for (const id of ids) {
          const from = typeof id === "string" ? this.deliverable.get(id) : undefined
          if (from && from.link === null) {
            from.link = m.id
            this.changed.add(from)
          }
        }
        return
      }
      case "context.compacted": {
        this.mark(
          e,
          "compaction",
          `context compacted: ${d.before ?? "?"} → ${d.after ?? "?"} tokens${d.force ? " (requested)" : ""}`
        )
        return
      }
      case "rewind.started": {
        const m = this.mark(e, "rewind", `rewind to seq ${d.to ?? "?"}`, { open: true })
        this.open.set(`${a} rewind`, m)
        for (const f of Array.isArray(d.files) ? d.files : []) m.files.push(line(obj(f).path ?? "", 500))
        return
      }
      case "rewind.completed": {
        const failed = Array.isArray(d.failed) && d.failed.length > 0
        this.close(`${a} rewind`, e, failed ? "failed" : "ok")
        return
      }
      case "worktree.reattached": {
        const all: Array<any> = Array.isArray(d.worktrees) ? d.worktrees : []
        this.mark(e, "resume", `worktrees after a restart: ${all.map((w) => `${w.agent} ${w.status}`).join(", ")}`, {
          status: all.some((w) => w.status === "failed") ? "failed" : "ok"
        })
        return
      }
      case "worktree.failed": {
        this.mark(e, "failure", `worktree failed: ${d.error ?? ""}`, { status: "failed" })
        return
      }
      case "plan.proposed":
      case "plan.revised":
      case "plan.completed":
      case "goal.started":
      case "goal.completed": {
        const plan = obj(d.plan)
        this.mark(
          e,
          "plan",
          `${e.type}: ${plan.title ?? d.objective ?? d.status ?? ""}${d.reason ? ` (${d.reason})` : ""}`,
          { status: e.type === "goal.completed" && d.status !== "achieved" ? "failed" : "ok" }
        )
        return
      }
    }
  }

  /** A mark by its id. */
  get(id: number): Mark | undefined {
    return this.byId.get(id)
  }

  /** The marks changed (or new) since the last call, the usage points and lanes since then. */
  changes(): { marks: Array<Mark>; usage: Array<UsagePoint>; lanes: Array<Lane> } {
    const marks = [...this.changed].sort((x, y) => x.id - y.id)
    this.changed = new Set()
    const usage = this.usage.slice(this.usageSent)
    this.usageSent = this.usage.length
    const lanes = this.lanes.slice(this.lanesSent)
    this.lanesSent = this.lanes.length
    return { marks, usage, lanes }
  }
}

/** Fold a whole log. */
export const fold = (session: string, events: Iterable<Event.Envelope>): Timeline => {
  const t = new Timeline(session)
  for (const e of events) t.add(e)
  t.changes()
  return t
}
