/**
 * Following a running session from its log: `muse log <id> --follow` and `muse attach <id>`. The
 * events are printed as `muse log` prints them (stdout), and a progress line (stderr) says where
 * the session is: the main agent's turn, each crew member's status, tokens and cost so far, the
 * time since it started. It ends when the session does: for a session in a state directory, when
 * its writer's lock is gone; for one in a database (a cluster session), when the main agent's task
 * has ended and no member is busy. Ctrl-C stops following (the session goes on).
 *
 * @example
 * ```ts
 * yield* Follow.follow({ session, store, writing: Follow.fileWriter(dir, session), json: false }, out, err)
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Event, EventLog } from "@musekit/core"
import { Effect } from "effect"
import { escapeUnsafe, plain } from "./ansi.js"
import * as History from "./history.js"
import * as Render from "./render.js"

/** What each agent is doing, from its events. */
export class Progress {
  readonly totals = new Render.Totals()
  /** The main agent's turns so far. */
  turn = 0
  mainDone = false
  first: number | undefined
  last: number | undefined
  readonly status = new Map<string, string>()
  /** Members with a task they have not finished. */
  readonly busy = new Set<string>()

  add(e: Event.Envelope): void {
    this.first ??= e.at
    this.last = e.at
    this.totals.add(e)
    const d = (typeof e.data === "object" && e.data !== null ? e.data : {}) as Record<string, any>
    const a = e.agent
    const say = (s: string) => this.status.set(a, escapeUnsafe(s.length > 60 ? `${s.slice(0, 59)}…` : s, plain))
    switch (e.type) {
      case "user.message":
        if (a === "main") {
          this.turn++
          this.mainDone = false
        }
        say("working")
        return
      case "model.requested":
        say("waiting on the model")
        return
      case "tool.started":
        say(`running ${Render.toolTitle(String(d.tool ?? ""), d.summary, plain)}`)
        return
      case "approval.requested":
        say(`waiting for approval of ${String(d.tool ?? "")}`)
        return
      case "tool.completed":
      case "tool.rejected":
      case "model.responded":
        say("working")
        return
      case "turn.completed":
      case "turn.interrupted":
        if (a === "main") this.mainDone = true
        say(e.type === "turn.completed" ? `idle (${d.status ?? "done"})` : "interrupted")
        return
      case "crew.spawned":
        say("idle")
        return
      case "crew.task.received":
        if (d.kind !== "stop" && d.kind !== "fail") this.busy.add(a)
        say(`task: ${String(d.text ?? "").split("\n")[0]}`)
        return
      case "crew.task.done":
        this.busy.delete(a)
        say(`idle (${d.status ?? "done"})`)
        return
      case "crew.member.failed":
        this.busy.delete(a)
        say("failed")
        return
      case "crew.stopped":
        this.busy.delete(a)
        say("stopped")
        return
      case "context.compacted":
        say("compacted its context")
        return
    }
  }

  /** The main agent's task is over and no member has one. */
  get quiet(): boolean {
    return this.mainDone && this.busy.size === 0
  }

  /** What the line says besides the time: turn, tokens, cost, each agent's status. */
  get state(): string {
    const cost = this.totals.cost === undefined ? "" : ` · ${Render.fmtCost(this.totals.cost)}`
    const agents = [...this.status.entries()].map(([a, s]) => `${escapeUnsafe(a, plain)}: ${s}`).join(" · ")
    return `${Render.fmtInt(this.totals.tokens)} tokens${cost}${agents ? ` · ${agents}` : ""}`
  }

  /** One line: turn, elapsed, tokens, cost, each agent's status. */
  line(now: number): string {
    const elapsed = this.first === undefined ? 0 : Math.max(0, now - this.first)
    return `── turn ${this.turn} · ${Render.fmtDuration(elapsed)} · ${this.state}`
  }
}

/** Whether a process still holds the session's writer lock in the state directory `dir`. */
export const fileWriter = (dir: string, session: string) => (): boolean => {
  try {
    const pid = Number(fs.readFileSync(path.join(dir, "sessions", `${session}.lock`), "utf8").trim())
    if (!Number.isInteger(pid) || pid <= 0) return false
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

export interface FollowOptions {
  readonly session: string
  readonly store: EventLog.StoreService
  /**
   * Whether the session is still being written (a state directory's lock). Absent: it is over once
   * the main agent's task has ended and no member is busy.
   */
  readonly writing?: (() => boolean) | undefined
  readonly json: boolean
  readonly agent?: string | undefined
  readonly type?: string | undefined
  /** How often the log is read (default 300 ms). */
  readonly pollMs?: number | undefined
  /** Longest silence between two progress lines while the session runs (default 30 s). */
  readonly heartbeatMs?: number | undefined
}

/** Print the session's events as they are stored, with progress lines, until it ends. */
export const follow = (o: FollowOptions, out: History.Out, err: History.Out): Effect.Effect<void> =>
  Effect.gen(function* () {
    const progress = new Progress()
    let next = 0
    let lastState = ""
    let lastAt = 0
    let lastTurn = -1
    const heartbeat = o.heartbeatMs ?? 30_000
    const report = (ended: boolean) => {
      const now = ended ? (progress.last ?? Date.now()) : Date.now()
      const force = ended
      const changed = progress.state !== lastState
      if (force || progress.turn !== lastTurn || (changed && now - lastAt > 2000) || now - lastAt > heartbeat) {
        err.write(`${err.style.dim(progress.line(now))}\n`)
        lastState = progress.state
        lastAt = now
        lastTurn = progress.turn
      }
    }
    for (;;) {
      // whether it was still written before this read: what this read finds is then all there is
      const writing = o.writing ? o.writing() : true
      const fresh = yield* o.store.read(o.session, next).pipe(Effect.orElseSucceed(() => [] as Array<Event.Envelope>))
      if (fresh.length > 0) {
        History.printLog(fresh, { agent: o.agent, type: o.type, json: o.json }, out)
        for (const e of fresh) progress.add(e)
        next = fresh.at(-1)!.seq + 1
      }
      const over = o.writing ? !writing : progress.quiet && fresh.length === 0 && next > 0
      if (over) {
        if (next > 0) report(true)
        err.write(
          `${err.style.dim(`session ${escapeUnsafe(o.session, plain)} is not running (${Render.fmtInt(next)} events)`)}\n`
        )
        return
      }
      if (next > 0) report(false)
      yield* Effect.sleep(o.pollMs ?? 300)
    }
  })
