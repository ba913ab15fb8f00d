/**
 * Questions of muse itself (which turn `/rewind` goes back to; overwrite or keep): answered with a
 * key, or a number and enter, or cancelled with esc. Like approvals, keys that came before the
 * question could be read never answer it.
 *
 * @example
 * ```ts
 * const st = Menu.open("which turn?", choices, false, resolve)
 * Menu.footer(st, style, gate, statusLine, lines)   // "? which turn? (enter: 3)"
 * Menu.key(st, str, key, { gate, pasting, draw })
 * ```
 */
import type { Style } from "../ansi.js"
import type { Key } from "./editor.js"
import type { Gate } from "./gate.js"

/** One answer of a question of muse itself (`/rewind`'s turn, "overwrite or keep"). */
export interface MenuChoice {
  readonly key: string
  readonly label: string
  readonly value: string
}

export interface State {
  readonly _tag: "menu"
  readonly prompt: string
  readonly choices: ReadonlyArray<MenuChoice>
  /** The choices are shown in the footer (a few letters) rather than listed above (numbers). */
  readonly inline: boolean
  selected: number
  typed: string
  readonly resolve: (value: string | undefined) => void
}

export const open = (
  prompt: string,
  choices: ReadonlyArray<MenuChoice>,
  inline: boolean,
  resolve: (value: string | undefined) => void
): State => ({
  _tag: "menu",
  prompt,
  choices,
  inline,
  selected: inline ? 0 : choices.length - 1,
  typed: "",
  resolve
})

export const footer = (st: State, s: Style, gate: Gate, statusLine: string, lines: Array<string>): void => {
  if (!gate.armed) {
    lines.push(`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`)
    lines.push(statusLine)
    return
  }
  const opts = st.inline
    ? st.choices
        .map((c, i) => {
          const text = `[${c.key}] ${c.label}`
          return i === st.selected ? s.inverse(text) : text
        })
        .join("  ")
    : `${st.prompt} ${st.typed === "" ? s.dim(`(enter: ${st.choices[st.selected]!.key})`) : s.bold(st.typed)}`
  lines.push(`${s.yellow("?")} ${opts}`)
  const dropped = gate.dropped
  lines.push(
    statusLine +
      s.dim(
        dropped > 0
          ? ` · ${dropped} key${dropped === 1 ? "" : "s"} typed before the question ignored`
          : st.inline
            ? " · ←/→ enter, or a letter; esc cancels"
            : " · a number and enter, ↑/↓; esc cancels"
      )
  )
}

export const key = (
  st: State,
  str: string | undefined,
  key: Key,
  o: { readonly gate: Gate; readonly pasting: boolean; readonly draw: () => void }
): void => {
  // as with approvals: a paste, or a key that came before the question could be read, never answers it
  if (o.pasting || !o.gate.take()) {
    if (o.pasting) o.gate.dropped++
    o.draw()
    return
  }
  if (key.name === "escape") {
    st.resolve(undefined)
    return
  }
  const n = st.choices.length
  if (key.name === "up" || key.name === "left") st.selected = (st.selected + n - 1) % n
  else if (key.name === "down" || key.name === "right" || key.name === "tab") st.selected = (st.selected + 1) % n
  else if (key.name === "backspace") st.typed = st.typed.slice(0, -1)
  else if (key.name === "return" || key.name === "enter") {
    const c = st.typed === "" ? st.choices[st.selected] : st.choices.find((x) => x.key === st.typed)
    if (c) {
      st.resolve(c.value)
      return
    }
    st.typed = ""
  } else if (str && /^[0-9]$/.test(str) && !st.inline) {
    st.typed = `${st.typed}${str}`.slice(-6)
  } else if (str && st.inline) {
    const c = st.choices.find((x) => x.key === str.toLowerCase())
    if (c) {
      st.resolve(c.value)
      return
    }
  }
  o.draw()
}
