/**
 * A scrolling screen with a live footer: finished lines go into the terminal's scrollback as
 * ordinary output, and a few footer lines at the bottom (streamed text in progress, spinner,
 * prompt, status) are redrawn in place. Every line is wrapped narrower than the terminal, so the
 * footer's height is known exactly and redrawing never leaves debris. A resize is the exception
 * (terminals reflow what they show, each in its own way): after one the screen is cleared and its
 * last lines printed again at the new width, under the footer drawn anew. Every line passes
 * `terminalSafe` first: only muse's own colors reach the terminal as escape sequences.
 *
 * @example
 * ```ts
 * const screen = new Screen(process.stdout)
 * screen.print(["● $ npm test"])
 * screen.setFooter(["⠋ thinking · 2.1s", "model · auto-edit"])
 * ```
 */
import { plain, type Style, terminalSafe, width, wrap, wrapLine } from "../ansi.js"

export interface Output {
  readonly write: (s: string) => boolean
  readonly columns?: number | undefined
  readonly rows?: number | undefined
}

export interface Cursor {
  /** Index of the footer line the cursor is on. */
  readonly row: number
  readonly col: number
}

export class Screen {
  private footer: Array<string> = []
  private cursor: Cursor | undefined
  /** Footer row the terminal cursor is on now (relative to the footer's first row). */
  private cursorRow = 0
  private drawn = 0
  private closed = false
  /** The last lines printed (as given, before wrapping), to fill the screen again after a resize. */
  private recent: Array<string> = []

  constructor(
    private readonly out: Output,
    private readonly style: Style = plain
  ) {}

  get columns(): number {
    return Math.max(20, this.out.columns || 80)
  }

  get rows(): number {
    return Math.max(5, this.out.rows || 24)
  }

  /** Usable width of a line. */
  get lineWidth(): number {
    return this.columns - 1
  }

  /** Wrap text to the screen. */
  wrap(text: string, indent = ""): Array<string> {
    return wrap(text, this.lineWidth, indent)
  }

  /** Add finished lines above the footer (each is wrapped to the screen). */
  print(lines: ReadonlyArray<string>): void {
    const wrapped: Array<string> = []
    for (const l of lines)
      for (const part of terminalSafe(l, this.style).split("\n")) {
        this.recent.push(part)
        wrapped.push(...wrapLine(part, this.lineWidth, /^\s/.test(part) ? "    " : ""))
      }
    if (this.recent.length > 400) this.recent.splice(0, this.recent.length - 200)
    this.render(wrapped)
  }

  /** Replace the footer. Lines longer than the screen are wrapped (the cursor row refers to the given lines). */
  setFooter(lines: ReadonlyArray<string>, cursor?: Cursor): void {
    const out: Array<string> = []
    let cur: Cursor | undefined
    lines.forEach((l, i) => {
      const parts = terminalSafe(l, this.style)
        .split("\n")
        .flatMap((p) => wrapLine(p, this.lineWidth))
      if (cursor && cursor.row === i) {
        const lineIdx = Math.min(parts.length - 1, Math.floor(cursor.col / this.lineWidth))
        cur = { row: out.length + lineIdx, col: cursor.col - lineIdx * this.lineWidth }
      }
      out.push(...parts)
    })
    const max = this.rows - 1
    if (out.length > max) {
      const cut = out.length - max
      out.splice(0, cut)
      if (cur) cur = { row: Math.max(0, cur.row - cut), col: cur.col }
    }
    this.footer = out
    this.cursor = cur
    this.render([])
  }

  private render(permanent: ReadonlyArray<string>): void {
    if (this.closed) return
    let s = "\r"
    if (this.cursorRow > 0) s += `\x1b[${this.cursorRow}A`
    s += "\x1b[J"
    for (const l of permanent) s += `${l}\x1b[0m\r\n`
    s += this.footer.join("\x1b[0m\r\n")
    if (this.footer.length > 0) s += "\x1b[0m"
    const last = Math.max(0, this.footer.length - 1)
    if (this.cursor) {
      const up = last - this.cursor.row
      if (up > 0) s += `\x1b[${up}A`
      s += "\r"
      if (this.cursor.col > 0) s += `\x1b[${this.cursor.col}C`
      s += "\x1b[?25h"
      this.cursorRow = this.cursor.row
    } else {
      s += "\x1b[?25l"
      this.cursorRow = last
    }
    this.drawn = this.footer.length
    this.out.write(s)
  }

  /**
   * Redraw after a resize. Where the terminal left what was drawn depends on how it reflowed it, so
   * the screen is cleared, its last lines are printed again at the new width, and the footer (which
   * the owner sets again with `setFooter`) is drawn below them: nothing of the old footer is left.
   */
  redraw(): void {
    if (this.closed) return
    const footer = this.footer.flatMap((l) => wrapLine(l, this.lineWidth))
    const room = Math.max(0, this.rows - 1 - footer.length)
    const lines: Array<string> = []
    for (let i = this.recent.length - 1; i >= 0 && lines.length < room; i--) {
      const part = this.recent[i]!
      lines.unshift(...wrapLine(part, this.lineWidth, /^\s/.test(part) ? "    " : ""))
    }
    this.out.write("\x1b[H\x1b[2J")
    this.cursorRow = 0
    this.footer = footer
    this.cursor = undefined
    this.render(lines.slice(-room))
  }

  /** Clear the footer, leave the cursor on a fresh line, show it again. */
  close(finalLines: ReadonlyArray<string> = []): void {
    this.footer = []
    this.cursor = undefined
    this.render(finalLines.flatMap((l) => wrap(l, this.lineWidth)))
    this.out.write("\x1b[?25h")
    this.closed = true
    void this.drawn
  }
}

export const visibleWidth = width
