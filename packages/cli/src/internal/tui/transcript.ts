/**
 * The transcript: the model's streamed text (whole lines go to the scrollback as Markdown, the
 * line in progress stays in the footer) and the lines each event adds (tool calls, results,
 * diffs, answers), escaped and wrapped to the screen.
 *
 * @example
 * ```ts
 * const transcript = new Transcript(screen, style)
 * transcript.text("Reading sum.js.\nIt sub")   // one line printed, "It sub" in the footer
 * transcript.flush()                           // "It sub" printed too
 * ```
 */
import type { Event } from "@musekit/core"
import { escapeUnsafe, type Style } from "../ansi.js"
import * as Render from "../render.js"
import type { Screen } from "./screen.js"

export class Transcript {
  private partial = ""
  private readonly markdown: Render.Markdown

  constructor(
    private readonly screen: Screen,
    private readonly style: Style
  ) {
    this.markdown = new Render.Markdown(style)
  }

  /** The line in progress, for the footer (none when there is none). */
  partialLines(): Array<string> {
    if (this.partial === "") return []
    return [this.markdown.peek(this.partial)]
  }

  /** Streamed text: whole lines go to the scrollback, the rest stays in the footer. */
  text(delta: string): void {
    // the model's text is escaped as it arrives (each unsafe character on its own, so pieces cannot combine)
    this.partial += escapeUnsafe(delta, this.style, { newlines: true, tabs: "spaces" })
    const parts = this.partial.split("\n")
    this.partial = parts.pop() ?? ""
    const done: Array<string> = parts.map((l) => this.markdown.line(l))
    const wrapped = this.screen.wrap(this.partial)
    if (wrapped.length > 1) {
      done.push(...wrapped.slice(0, -1).map((l) => this.markdown.peek(l)))
      this.partial = wrapped[wrapped.length - 1]!
    }
    if (done.length > 0) this.screen.print(done)
  }

  /** The line in progress goes to the scrollback. */
  flush(): void {
    if (this.partial !== "") {
      const p = this.partial
      this.partial = ""
      this.screen.print([this.markdown.line(p)])
    }
  }

  /** What an event adds to the transcript, wrapped (a diff a question showed already: only its stat line). */
  eventLines(e: Event.Envelope, o: { readonly diffSeen: boolean }): Array<string> {
    const lines = Render.eventLines(e, {
      style: this.style,
      columns: this.screen.columns,
      mainText: false,
      transcript: false,
      maxDiffLines: o.diffSeen ? 0 : 40
    })
    const wrapped = Render.wrapAll(lines, this.screen.columns)
    return wrapped.length > 0 && (e.type === "turn.completed" || e.type === "turn.interrupted")
      ? [...wrapped, ""]
      : wrapped
  }

  /** The line that says how a person answered a question. */
  answerLine(data: any): string {
    const how = data.allow
      ? data.scope === "session"
        ? "allowed for this session"
        : data.scope === "project"
          ? "allowed always (saved in .muse/permissions.json)"
          : "allowed once"
      : `denied${data.reason ? `: ${escapeUnsafe(String(data.reason), this.style)}` : ""}`
    return `  ${data.allow ? this.style.green(`⎿ ${how}`) : this.style.red(`⎿ ${how}`)}`
  }
}
