/**
 * Drive `muse` in a real pseudo-terminal and read the screen as a person sees it
 * (@lydell/node-pty + @xterm/headless).
 */
import { createRequire } from "node:module"
import type { IPty } from "@lydell/node-pty"
import type { Terminal as XTerminal } from "@xterm/headless"

const require = createRequire(import.meta.url)
const pty = require("@lydell/node-pty") as typeof import("@lydell/node-pty")
const { Terminal } = require("@xterm/headless") as typeof import("@xterm/headless")

export interface Session {
  readonly pty: IPty
  readonly term: XTerminal
  /** Everything the program wrote (raw). */
  readonly raw: () => string
  /** The screen lines (viewport), trailing spaces trimmed. */
  readonly screen: () => Array<string>
  /** Scrollback and screen. */
  readonly all: () => string
  readonly type: (text: string) => void
  readonly waitFor: (what: string | RegExp, timeoutMs?: number) => Promise<void>
  readonly exited: Promise<{ readonly exitCode: number; readonly signal?: number | undefined }>
  readonly kill: () => void
}

export const spawnInTerminal = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly cols?: number; readonly rows?: number }
): Session => {
  const cols = options.cols ?? 80
  const rows = options.rows ?? 30
  const term = new Terminal({ cols, rows, scrollback: 5000, allowProposedApi: true })
  const p = pty.spawn(file, [...args], {
    name: "xterm-256color",
    cols,
    rows,
    cwd: options.cwd,
    env: options.env as Record<string, string>
  })
  let raw = ""
  let pending = Promise.resolve()
  p.onData((d) => {
    raw += d
    pending = pending.then(() => new Promise<void>((r) => term.write(d, r)))
  })
  const exited = new Promise<{ exitCode: number; signal?: number }>((resolve) => p.onExit((e) => resolve(e)))
  const lines = (from: number, to: number) => {
    const out: Array<string> = []
    const buf = term.buffer.active
    for (let i = from; i < to; i++) out.push(buf.getLine(i)?.translateToString(true) ?? "")
    return out
  }
  const screen = () => {
    const buf = term.buffer.active
    return lines(buf.viewportY, buf.viewportY + rows)
  }
  const all = () => lines(0, term.buffer.active.length).join("\n")
  const waitFor = async (what: string | RegExp, timeoutMs = 20_000) => {
    const start = Date.now()
    while (Date.now() - start < timeoutMs) {
      await pending
      const text = all()
      if (typeof what === "string" ? text.includes(what) : what.test(text)) return
      await new Promise((r) => setTimeout(r, 25))
    }
    throw new Error(
      `timed out after ${timeoutMs} ms waiting for ${String(what)}; screen:\n${all().split("\n").slice(-60).join("\n")}\nlast output: ${JSON.stringify(raw.slice(-300))}`
    )
  }
  return {
    pty: p,
    term,
    raw: () => raw,
    screen,
    all,
    type: (text) => p.write(text),
    waitFor,
    exited,
    kill: () => {
      try {
        p.kill()
      } catch {}
    }
  }
}

/**
 * What a terminal shows for `data`: it is written into a headless xterm (`\n` as a new line) and
 * the whole buffer is read back, with the window titles it was asked to set.
 */
export const renderInTerminal = async (
  data: string,
  options: { readonly cols?: number; readonly rows?: number } = {}
): Promise<{ readonly lines: Array<string>; readonly text: string; readonly titles: Array<string> }> => {
  const term = new Terminal({
    cols: options.cols ?? 100,
    rows: options.rows ?? 40,
    scrollback: 5000,
    allowProposedApi: true,
    convertEol: true
  })
  const titles: Array<string> = []
  term.onTitleChange((t) => titles.push(t))
  await new Promise<void>((r) => term.write(data, r))
  const buf = term.buffer.active
  const lines: Array<string> = []
  for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? "")
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  term.dispose()
  return { lines, text: lines.join("\n"), titles }
}
