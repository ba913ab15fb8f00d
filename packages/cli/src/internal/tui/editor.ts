/**
 * A one-line input editor: cursor movement, history, word deletion and tab completion. The view
 * scrolls sideways when the text is wider than the screen.
 */
import { hasUnsafe, width } from "../ansi.js"

export interface Key {
  readonly name?: string | undefined
  readonly ctrl?: boolean | undefined
  readonly meta?: boolean | undefined
  readonly shift?: boolean | undefined
  readonly sequence?: string | undefined
}

export type EditResult =
  | { readonly _tag: "none" }
  | { readonly _tag: "submit"; readonly text: string }
  | { readonly _tag: "complete" }

export class Editor {
  private chars: Array<string> = []
  private pos = 0
  private history: Array<string> = []
  private historyIndex = -1
  private draft = ""
  /** Candidates of the last completion that was ambiguous (shown as a hint). */
  candidates: ReadonlyArray<string> = []

  constructor(private readonly complete: (text: string) => ReadonlyArray<string> = () => []) {}

  get text(): string {
    return this.chars.join("")
  }

  set(text: string): void {
    this.chars = [...text]
    this.pos = this.chars.length
  }

  clear(): void {
    this.set("")
    this.candidates = []
  }

  /** Handle one key; printable input arrives as `str`. */
  key(str: string | undefined, key: Key): EditResult {
    const name = key.name
    if (name !== "tab") this.candidates = []
    if (key.ctrl) {
      switch (name) {
        case "a":
          this.pos = 0
          return { _tag: "none" }
        case "e":
          this.pos = this.chars.length
          return { _tag: "none" }
        case "b":
          this.pos = Math.max(0, this.pos - 1)
          return { _tag: "none" }
        case "f":
          this.pos = Math.min(this.chars.length, this.pos + 1)
          return { _tag: "none" }
        case "u":
          this.chars.splice(0, this.pos)
          this.pos = 0
          return { _tag: "none" }
        case "k":
          this.chars.splice(this.pos)
          return { _tag: "none" }
        case "w": {
          let i = this.pos
          while (i > 0 && this.chars[i - 1] === " ") i--
          while (i > 0 && this.chars[i - 1] !== " ") i--
          this.chars.splice(i, this.pos - i)
          this.pos = i
          return { _tag: "none" }
        }
        case "h":
          return this.backspace()
        default:
          return { _tag: "none" }
      }
    }
    switch (name) {
      case "return":
      case "enter": {
        const text = this.text
        if (text.trim() !== "" && this.history[this.history.length - 1] !== text) this.history.push(text)
        this.historyIndex = -1
        this.clear()
        return { _tag: "submit", text }
      }
      case "backspace":
        return this.backspace()
      case "delete":
        this.chars.splice(this.pos, 1)
        return { _tag: "none" }
      case "left":
        this.pos = Math.max(0, this.pos - 1)
        return { _tag: "none" }
      case "right":
        this.pos = Math.min(this.chars.length, this.pos + 1)
        return { _tag: "none" }
      case "home":
        this.pos = 0
        return { _tag: "none" }
      case "end":
        this.pos = this.chars.length
        return { _tag: "none" }
      case "up":
        return this.browse(-1)
      case "down":
        return this.browse(1)
      case "tab":
        return this.tab()
      case "escape":
        return { _tag: "none" }
    }
    if (str && !key.ctrl && !key.meta) {
      // controls, bidi overrides and invisible characters (say, in pasted text) are not taken into the line
      const clean = [...str.replace(/\r\n?|\n/g, " ")].filter((c) => !hasUnsafe(c))
      if (clean.length > 0) {
        this.chars.splice(this.pos, 0, ...clean)
        this.pos += clean.length
      }
    }
    return { _tag: "none" }
  }

  private backspace(): EditResult {
    if (this.pos > 0) {
      this.chars.splice(this.pos - 1, 1)
      this.pos--
    }
    return { _tag: "none" }
  }

  private browse(dir: -1 | 1): EditResult {
    if (this.history.length === 0) return { _tag: "none" }
    if (this.historyIndex === -1) {
      if (dir === 1) return { _tag: "none" }
      this.draft = this.text
      this.historyIndex = this.history.length - 1
    } else {
      this.historyIndex += dir
      if (this.historyIndex >= this.history.length) {
        this.historyIndex = -1
        this.set(this.draft)
        return { _tag: "none" }
      }
      this.historyIndex = Math.max(0, this.historyIndex)
    }
    this.set(this.history[this.historyIndex]!)
    return { _tag: "none" }
  }

  private tab(): EditResult {
    const before = this.chars.slice(0, this.pos).join("")
    const options = this.complete(before)
    if (options.length === 0) return { _tag: "complete" }
    if (options.length === 1) {
      const done = options[0]!
      const add = done.slice(before.length)
      const tail = done.endsWith(" ") ? add : `${add} `
      this.chars.splice(this.pos, 0, ...tail)
      this.pos += [...tail].length
      this.candidates = []
      return { _tag: "complete" }
    }
    let prefix = options[0]!
    for (const o of options) while (!o.startsWith(prefix)) prefix = prefix.slice(0, -1)
    if (prefix.length > before.length) {
      const add = prefix.slice(before.length)
      this.chars.splice(this.pos, 0, ...add)
      this.pos += [...add].length
    }
    this.candidates = options
    return { _tag: "complete" }
  }

  /** The visible part of the line and the cursor column, for a prompt of `promptWidth` in `columns`. */
  view(promptWidth: number, columns: number): { readonly text: string; readonly col: number } {
    const room = Math.max(5, columns - promptWidth - 1)
    const cw = this.chars.map((c) => width(c))
    const cursorX = cw.slice(0, this.pos).reduce((a, b) => a + b, 0)
    if (cw.reduce((a, b) => a + b, 0) < room) return { text: this.text, col: promptWidth + cursorX }
    // scroll so the cursor stays inside, a third from the right edge when possible
    let start = 0
    let x = cursorX
    while (x > room - Math.floor(room / 3) && start < this.pos) {
      x -= cw[start]!
      start++
    }
    let end = start
    let w = 0
    while (end < this.chars.length && w + cw[end]! < room) {
      w += cw[end]!
      end++
    }
    const text = (start > 0 ? "…" : "") + this.chars.slice(start + (start > 0 ? 1 : 0), end).join("")
    return { text, col: promptWidth + x }
  }
}
