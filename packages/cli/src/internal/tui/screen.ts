/**
 * A scrolling screen with a live footer: finished lines go into the terminal's scrollback as
 * ordinary output, and a few footer lines at the bottom (streamed text in progress, spinner,
 * prompt, status) are redrawn in place. Every line is wrapped narrower than the terminal, so the
 * footer's height is known exactly and redrawing never leaves debris. Every line passes
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
      for (const part of terminalSafe(l, this.style).split("\n"))
        wrapped.push(...wrapLine(part, this.lineWidth, /^\s/.test(part) ? "    " : ""))
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

  /** Redraw after a resize. */
  redraw(): void {
    this.render([])
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
