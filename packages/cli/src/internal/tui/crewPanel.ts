/**
 * The crew as the terminal shows it: each member's role, status and current task, followed from
 * the session's events, and drawn as the `/agents` panel and as the lines under the spinner.
 *
 * @example
 * ```ts
 * const crew = new CrewView()
 * crew.track(event, event.data ?? {})
 * screen.print(crew.panel(style, true))
 * ```
 */
import type { Event } from "@musekit/core"
import { escapeUnsafe, type Style, truncate } from "../ansi.js"

export interface Member {
  role: string
  status: string
  task: string | null
  tasks: number
}

export class CrewView {
  readonly members = new Map<string, Member>()

  get size(): number {
    return this.members.size
  }

  /** Members working or waiting for an answer. */
  working(): Array<[string, Member]> {
    return [...this.members.entries()].filter(([, m]) => m.status === "working" || m.status === "waiting-approval")
  }

  track(e: Event.Envelope, data: any): void {
    const m = this.members.get(e.agent)
    switch (e.type) {
      case "crew.spawned":
        this.members.set(e.agent, { role: String(data.role ?? "?"), status: "idle", task: null, tasks: 0 })
        return
      case "crew.task.received":
        if (m && data.kind !== "stop" && data.kind !== "fail") {
          m.status = "working"
          m.task = String(data.text ?? "").split("\n")[0] ?? null
          m.tasks++
        }
        return
      case "crew.task.done":
      case "crew.review.done":
        if (m) {
          m.status = "idle"
          m.task = null
        }
        return
      case "crew.member.failed":
        if (m) m.status = "failed"
        return
      case "crew.stopped":
        if (m) m.status = "stopped"
        return
      case "approval.requested":
        if (m) m.status = "waiting-approval"
        return
      case "approval.answered":
        if (m && m.status === "waiting-approval") m.status = "working"
        return
    }
  }

  /** One short line per working member, under the spinner. */
  busyLines(s: Style, width: number): Array<string> {
    return this.working().map(([name, m]) =>
      truncate(
        s.dim(
          `  ${s.magenta(escapeUnsafe(name, s))} ${m.status}${m.task ? `: ${escapeUnsafe(m.task.replace(/ +/g, " "), s)}` : ""}`
        ),
        width
      )
    )
  }

  /** The `/agents` panel. */
  panel(s: Style, enabled: boolean): Array<string> {
    if (!enabled) return [s.dim("The crew is off in this session (--no-crew).")]
    if (this.members.size === 0)
      return [s.dim("No crew members yet: the main agent spawns them when it delegates work.")]
    const lines = [s.bold("crew")]
    for (const [name, m] of this.members) {
      const color =
        m.status === "working"
          ? s.green
          : m.status === "failed"
            ? s.red
            : m.status === "waiting-approval"
              ? s.yellow
              : s.dim
      lines.push(
        `  ${s.magenta(escapeUnsafe(name.padEnd(12), s))} ${escapeUnsafe(m.role.padEnd(9), s)} ${color(m.status.padEnd(16))} ${s.dim(`${m.tasks} task${m.tasks === 1 ? "" : "s"}`)}${m.task ? `  ${escapeUnsafe(m.task, s)}` : ""}`
      )
    }
    return lines
  }
}
